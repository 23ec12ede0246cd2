/*
 * tf.c - TensorFlow's libraries, loaded at run time.
 *
 * The harness needs TF only for TF_Status (every callback takes one) and,
 * for the kernel checks, for TF's op and kernel registries. It does not link
 * TF: it dlopens libtensorflow_framework.so.2 with RTLD_GLOBAL before the
 * plugin, so the plugin's own NEEDED entry for that soname resolves to the
 * copy already loaded, and --tf-dir chooses which release that is (a plugin
 * built for TF 2.15 is tested against 2.15's library). Without --tf-dir the
 * library search path is tried (LD_LIBRARY_PATH), then the directory of the
 * TF the harness was compiled against (CONF_TF_DIR_DEFAULT, from CMake).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define FRAMEWORK "libtensorflow_framework.so.2"
#define CC "libtensorflow_cc.so.2"

static struct {
  TF_Status* (*new_status)(void);
  void (*delete_status)(TF_Status*);
  void (*set_status)(TF_Status*, TF_Code, const char*);
  TF_Code (*get_code)(const TF_Status*);
  const char* (*message)(const TF_Status*);
} fn;

static char tf_dir[PATH_MAX];
static void* cc_handle;

static void* open_framework(const char* dir, char* err, size_t errlen) {
  char path[PATH_MAX];
  if (dir != NULL) {
    snprintf(path, sizeof(path), "%s/%s", dir, FRAMEWORK);
  } else {
    snprintf(path, sizeof(path), "%s", FRAMEWORK);
  }
  void* h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (h == NULL) snprintf(err, errlen, "%s", dlerror());
  return h;
}

/* POSIX: dlsym's object pointer converts to a function pointer. */
#define LOAD(field, name)                                                    \
  do {                                                                       \
    void* sym_ = dlsym(h, name);                                             \
    if (sym_ == NULL) {                                                      \
      snprintf(err, errlen, "%s has no %s: %s", FRAMEWORK, name, dlerror()); \
      return -1;                                                             \
    }                                                                        \
    memcpy(&fn.field, &sym_, sizeof(sym_));                                  \
  } while (0)

int conf_tf_load(const char* dir, char* err, size_t errlen) {
  char why[1024] = "";
  void* h = open_framework(dir, why, sizeof(why));
#ifdef CONF_TF_DIR_DEFAULT
  if (h == NULL && dir == NULL) {
    h = open_framework(CONF_TF_DIR_DEFAULT, why, sizeof(why));
  }
#endif
  if (h == NULL) {
    snprintf(err, errlen,
             "cannot load %s: %s\n"
             "  pass --tf-dir DIR, the tensorflow package directory of the "
             "release your plugin was built for, e.g.\n"
             "  --tf-dir \"$(python -c 'import importlib.util, os; "
             "print(os.path.dirname(importlib.util.find_spec(\"tensorflow\")"
             ".origin))')\"",
             FRAMEWORK, why);
    return -1;
  }
  LOAD(new_status, "TF_NewStatus");
  LOAD(delete_status, "TF_DeleteStatus");
  LOAD(set_status, "TF_SetStatus");
  LOAD(get_code, "TF_GetCode");
  LOAD(message, "TF_Message");
  /* Where it came from, for libtensorflow_cc.so.2 beside it. */
  Dl_info info;
  void* any = dlsym(h, "TF_NewStatus");
  if (dladdr(any, &info) != 0 && info.dli_fname != NULL &&
      realpath(info.dli_fname, tf_dir) != NULL) {
    char* slash = strrchr(tf_dir, '/');
    if (slash != NULL) *slash = '\0';
  }
  return 0;
}

const char* conf_tf_dir(void) {
  return tf_dir;
}

/* Where TF's C API (c_api.h) lives: libtensorflow_cc.so.2 since TF 2.11,
 * the Python extension before (TF 2.10 and older wheels have no
 * libtensorflow_cc.so.2; that one needs libpython, see --preload). */
static const char* const cc_libs[] = {CC,
                                      "python/_pywrap_tensorflow_internal.so"};

/* The first of cc_libs under tf_dir that dlopen(mode) loads, or NULL with
 * every library's dlerror in why (len > 0). */
static void* open_cc(int mode, char* why, size_t len) {
  why[0] = '\0';
  for (size_t i = 0; i < sizeof(cc_libs) / sizeof(cc_libs[0]); i++) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", tf_dir, cc_libs[i]);
    void* h = dlopen(path, mode);
    if (h != NULL) return h;
    size_t used = strlen(why);
    snprintf(why + used, len - used, "%s%s", used ? "; " : "", dlerror());
  }
  return NULL;
}

void* conf_tf_cc_sym(const char* name, char* err, size_t errlen) {
  if (cc_handle == NULL) {
    char why[2048];
    cc_handle = open_cc(RTLD_NOW | RTLD_GLOBAL, why, sizeof(why));
    if (cc_handle == NULL) {
      snprintf(err, errlen, "cannot load TF's C API library: %s", why);
      return NULL;
    }
  }
  void* sym = dlsym(cc_handle, name);
  if (sym == NULL) snprintf(err, errlen, "TF's C API library has no %s", name);
  return sym;
}

/* For registration.imports, before the plugin is loaded: libtensorflow_cc
 * opened RTLD_LOCAL, as TF's Python process has it (Python loads
 * _pywrap_tensorflow_internal.so, which needs it, RTLD_LOCAL), so the
 * plugin's dlopen sees it only through a NEEDED entry of its own. Opened
 * only when a symbol is not in the global scope (libtensorflow_framework,
 * --preload); tried once. */
static void* cc_local;
static char cc_local_err[1024];

int conf_tf_exports(const char* name, char* err, size_t errlen) {
  if (dlsym(RTLD_DEFAULT, name) != NULL) return 1;
  if (cc_local == NULL && cc_local_err[0] == '\0')
    cc_local =
        open_cc(RTLD_NOW | RTLD_LOCAL, cc_local_err, sizeof(cc_local_err));
  if (cc_local == NULL) {
    snprintf(err, errlen, "cannot load TF's C API library: %s", cc_local_err);
    return -1;
  }
  /* A handle's lookup covers the library and its dependencies. */
  return dlsym(cc_local, name) != NULL;
}

/* Called only after conf_tf_load succeeded (main exits otherwise). */
TF_Status* conf_status_new(void) {
  TF_Status* s = fn.new_status();
  if (s == NULL) {
    fprintf(stderr, "%s:%d: TF_NewStatus returned NULL\n", __FILE__, __LINE__);
    abort();
  }
  return s;
}

void conf_status_free(TF_Status* s) {
  fn.delete_status(s);
}

void conf_status_set(TF_Status* s, TF_Code code, const char* msg) {
  fn.set_status(s, code, msg);
}

TF_Code conf_status_code(const TF_Status* s) {
  return fn.get_code(s);
}

const char* conf_status_msg(const TF_Status* s) {
  return fn.message(s);
}
