/* misc.c - placeholder until the misc kernel family lands: registers nothing. */
#include "kernels/sk.h"

bool sk_register_misc(char* msg, size_t len) {
  (void)msg;
  (void)len;
  return true;
}
