/* pool.c - placeholder until the pool kernel family lands: registers nothing. */
#include "kernels/sk.h"

bool sk_register_pool(char* msg, size_t len) {
  (void)msg;
  (void)len;
  return true;
}
