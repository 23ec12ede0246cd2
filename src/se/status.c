/*
 * status.c - the one place where sim_err codes become TF_Status values.
 */
#include <stdarg.h>
#include <stdio.h>

#include "se/se_internal.h"

static TF_Code code_of(int err) {
  switch (err) {
    case SIM_OK: return TF_OK;
    case SIM_EINVAL: return TF_INVALID_ARGUMENT;
    case SIM_ENOMEM: return TF_RESOURCE_EXHAUSTED;
    case SIM_ENOTREADY: return TF_FAILED_PRECONDITION;
    case SIM_ESTREAM:
    case SIM_EFAILED:
    case SIM_ESYS:
    default: return TF_INTERNAL;
  }
}

void se_set_status(TF_Status* status, int err, const char* what,
                   const char* detail) {
  if (status == NULL) return;
  if (err == SIM_OK) {
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  char msg[512];
  snprintf(msg, sizeof(msg), "simdev: %s: %s", what,
           detail && detail[0] ? detail : sim_strerror(err));
  TF_SetStatus(status, code_of(err), msg);
}

void se_set_statusf(TF_Status* status, int err, const char* fmt, ...) {
  if (status == NULL) return;
  char msg[512];
  int n = snprintf(msg, sizeof(msg), "simdev: ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  va_end(ap);
  TF_SetStatus(status, code_of(err), err == SIM_OK ? "" : msg);
}
