/* reduce.c - placeholder until the reduce kernel family lands: registers nothing. */
#include "kernels/sk.h"

bool sk_register_reduce(char* msg, size_t len) {
  (void)msg;
  (void)len;
  return true;
}
