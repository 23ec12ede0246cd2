/*
 * kernels.c - TF_InitKernel: registers every simdev kernel for device type
 * SIMDEV through the kernel C API. One registration function per kernel
 * family (sk.h); each family's file owns its op table.
 *
 * TF_InitKernel has no status: a failed registration is printed and the
 * remaining families still register, so the failure shows up as an op that
 * SIMDEV refuses (soft placement off) rather than a dead process.
 */
#include <stdio.h>

#include "kernels/sk.h"

/* Looked up by TensorFlow with dlsym after SE_InitPlugin. */
__attribute__((visibility("default"))) void TF_InitKernel(void);

typedef bool (*register_fn)(char* msg, size_t len);

void TF_InitKernel(void) {
  char msg[512] = "";
  if (!sk_launch_init()) return; /* no device: no kernels either */
  static const struct {
    const char* family;
    register_fn fn;
  } families[] = {
      {"matmul", sk_register_matmul}, {"conv", sk_register_conv},
      {"pool", sk_register_pool},     {"cwise", sk_register_cwise},
      {"reduce", sk_register_reduce}, {"softmax", sk_register_softmax},
      {"misc", sk_register_misc},     {"dlpack", sk_register_dlpack},
  };
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    msg[0] = '\0';
    if (!families[i].fn(msg, sizeof(msg)))
      fprintf(stderr, "simdev: %s kernels not registered: %s\n",
              families[i].family, msg);
  }
}
