/*
 * fail.c - a launch's failure (sk.h, "launches"): the first sk_fail wins,
 * and whoever completes the launch (launch.c) hands it to TF as the op's
 * status. The TF_Status a launch's own TF calls report into is moved here
 * too, with the name of the call.
 *
 * Thread contract (sk.h): sk_fail runs on TF's thread in the compute
 * function or on the stream worker in the run function, never both at once.
 */
#include <stdarg.h>
#include <stdio.h>

#include "kernels/framework/sk_internal.h"

void sk_fail(sk_launch* l, TF_Code code, const char* fmt, ...) {
  if (l->code != TF_OK) return; /* the first failure wins */
  l->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->msg, sizeof(l->msg), fmt, ap);
  va_end(ap);
}

/* Copies a TF_Status failure into the launch ("what: message"). */
bool sk_status_move(sk_launch* l, TF_Status* st, const char* what) {
  if (TF_GetCode(st) == TF_OK) return true;
  sk_fail(l, TF_GetCode(st), "%s: %s", what, TF_Message(st));
  return false;
}

bool sk_ok(const sk_launch* l) {
  return l->code == TF_OK;
}
TF_OpKernelContext* sk_context(sk_launch* l) {
  return l->ctx;
}
TF_Status* sk_status(sk_launch* l) {
  return l->st;
}
bool sk_status_ok(sk_launch* l, const char* what) {
  return sk_status_move(l, l->st, what);
}
