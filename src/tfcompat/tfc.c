/*
 * tfc.c - optional TensorFlow functions found at run time (tfc.h says why).
 *
 * Thread contract: any thread; no state but tfc_tensor_alignment's cached
 * value (dlopen's reference counts are thread-safe, and each lookup drops
 * the reference RTLD_NOLOAD took).
 */
#include "tfcompat/tfc.h"

#include <dlfcn.h>
#include <string.h>

#include "tensorflow/c/tf_tensor.h"

/* TF's libraries a process may hold without exporting them globally:
 * TF's Python package loads libtensorflow_cc with RTLD_LOCAL; a C program
 * links libtensorflow. */
static const char* const kLibs[] = {"libtensorflow_framework.so.2",
                                    "libtensorflow_cc.so.2",
                                    "libtensorflow.so.2"};

void* tfc_sym(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  for (size_t i = 0; p == NULL && i < sizeof(kLibs) / sizeof(kLibs[0]); i++) {
    void* h = dlopen(kLibs[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL) continue;
    p = dlsym(h, name);
    /* The library stays loaded (TF holds it); this drops only the
     * reference NOLOAD took, so p stays valid. */
    dlclose(h);
  }
  return p;
}

int tfc_find_(void** out, const char* name) {
  void* p = tfc_sym(name);
  /* POSIX: a dlsym result converts to a function pointer; memcpy keeps ISO
   * C quiet about it. */
  memcpy(out, &p, sizeof(p));
  return p != NULL;
}

size_t tfc_tensor_alignment(void) {
  /* Found at run time even where the headers declare it (2.17 on): a
   * linked reference would make the plugin fail to load in 2.16 ("undefined
   * symbol: TF_TensorDefaultAlignment", which TF's Python import raises,
   * so `import tensorflow` itself fails; measured by make matrix's refuses
   * step) instead of offering no device with the release message. Looked
   * up once and cached: the kernel path calls this per launch. Any thread:
   * racing first callers store the same value. */
  static _Atomic size_t cached;
  size_t a = cached;
  if (a != 0) return a;
#if TFC_TF_MINOR >= 17
  __typeof__(&TF_TensorDefaultAlignment) fn = NULL;
  a = TFC_FIND(fn, TF_TensorDefaultAlignment) ? fn() : 0;
#endif
  if (a == 0) a = 64; /* 2.16: Allocator::kAllocatorAlignment (tfc.h) */
  cached = a;
  return a;
}
