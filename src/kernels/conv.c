/* conv.c - placeholder until the conv kernel family lands: registers nothing. */
#include "kernels/sk.h"

bool sk_register_conv(char* msg, size_t len) {
  (void)msg;
  (void)len;
  return true;
}
