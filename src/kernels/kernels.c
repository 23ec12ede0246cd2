/*
 * kernels.c - TF_InitKernel: registers every simdev kernel for device type
 * SIMDEV through the kernel C API. One registration function per file with
 * an op table (sk.h), all called from here: the files of a family (conv.c
 * and conv_backprop.c, ...) share code through their family header but
 * never call each other to register.
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
      {"matmul", sk_register_matmul},
      {"conv", sk_register_conv},
      {"conv_backprop", sk_register_conv_backprop},
      {"pooling", sk_register_pooling},
      {"cwise", sk_register_cwise},
      {"cwise_binary", sk_register_cwise_binary},
      {"cwise_bias", sk_register_cwise_bias},
      {"cwise_addn", sk_register_cwise_addn},
      {"cwise_leaky", sk_register_cwise_leaky},
      {"cwise_compare", sk_register_cwise_compare},
      {"cwise_select", sk_register_cwise_select},
      {"reduce", sk_register_reduce},
      {"softmax", sk_register_softmax},
      {"misc", sk_register_misc},
      {"shape_ops", sk_register_shape_ops},
      {"slice", sk_register_slice},
      {"pad", sk_register_pad},
      {"split", sk_register_split},
      {"gather", sk_register_gather},
      {"scatter", sk_register_scatter},
      {"dlpack", sk_register_dlpack},
      {"random", sk_register_random},
      {"depthwise", sk_register_depthwise},
      {"batchnorm", sk_register_batchnorm},
      {"einsum", sk_register_einsum},
      {"resize", sk_register_resize},
      {"ewprog", sk_register_ewprog},
  };
  for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    msg[0] = '\0';
    if (!families[i].fn(msg, sizeof(msg)))
      fprintf(stderr, "simdev: %s kernels not registered: %s\n",
              families[i].family, msg);
  }
}
