/*
 * init.c - TF_InitKernel: registers every simdev kernel for device type
 * SIMDEV through the kernel C API. One registration function per file with
 * an op table (the lines of families.def), all called from here: the files
 * of a family (nn/conv.c and nn/conv_backprop.c, ...) share code through
 * their family header but never call each other to register.
 *
 * TF_InitKernel has no status: a failed registration is printed and the
 * remaining families still register, so the failure shows up as an op that
 * SIMDEV refuses (soft placement off) rather than a dead process.
 */
#include <stdio.h>

#include "kernels/framework/sk.h"

/* Looked up by TensorFlow with dlsym after SE_InitPlugin. */
__attribute__((visibility("default"))) void TF_InitKernel(void);

typedef bool (*register_fn)(char* msg, size_t len);

void TF_InitKernel(void) {
  char msg[512] = "";
  if (!sk_launch_init()) return; /* no device: no kernels either */
  static const struct {
    const char* file;
    register_fn fn;
  } families[] = {
#define SK_FAMILY(folder, file) {#folder "/" #file ".c", sk_register_##file},
#include "kernels/framework/families.def"
#undef SK_FAMILY
  };
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    msg[0] = '\0';
    if (!families[i].fn(msg, sizeof(msg)))
      fprintf(stderr,
              "simdev: the kernels of src/kernels/%s not registered: %s\n",
              families[i].file, msg);
  }
}
