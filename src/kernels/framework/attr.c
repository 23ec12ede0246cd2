/*
 * attr.c - kernel construction (sk.h, "kernels and their registration"):
 * failing a construction, the op's state, and the attribute readers, each of
 * which reports a missing or ill-typed attribute to TF with TF's message and
 * returns false, so a create function is a row of reads and one check.
 *
 * Thread contract: TF calls create functions on its own threads, any number
 * at once; these touch only their arguments.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/framework/sk.h"

void sk_construction_fail(TF_OpKernelConstruction* c, TF_Code code,
                          const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  TF_Status* st = TF_NewStatus();
  TF_SetStatus(st, code, msg);
  TF_OpKernelConstruction_Failure(c, st);
  TF_DeleteStatus(st);
}

void* sk_state_new(TF_OpKernelConstruction* c, size_t size) {
  void* state = calloc(1, size ? size : 1);
  if (state == NULL)
    sk_construction_fail(c, TF_RESOURCE_EXHAUSTED, "simdev: out of memory");
  return state;
}

/* Moves a construction-time TF_Status failure to c. */
static bool attr_status(TF_OpKernelConstruction* c, TF_Status* st) {
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok) TF_OpKernelConstruction_Failure(c, st);
  TF_DeleteStatus(st);
  return ok;
}

bool sk_attr_type(TF_OpKernelConstruction* c, const char* name,
                  TF_DataType* out) {
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrType(c, name, out, st);
  return attr_status(c, st);
}

bool sk_attr_types(TF_OpKernelConstruction* c, const char* name,
                   TF_DataType* out, int n) {
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrTypeList(c, name, out, n, st);
  return attr_status(c, st);
}

bool sk_attr_strings(TF_OpKernelConstruction* c, const char* name, char** vals,
                     size_t* lens, int n, char* storage, size_t storage_size) {
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrStringList(c, name, vals, lens, n, storage,
                                            storage_size, st);
  return attr_status(c, st);
}

bool sk_attr_bool(TF_OpKernelConstruction* c, const char* name, bool* out) {
  TF_Status* st = TF_NewStatus();
  TF_Bool v = 0;
  TF_OpKernelConstruction_GetAttrBool(c, name, &v, st);
  *out = v != 0;
  return attr_status(c, st);
}

bool sk_attr_int(TF_OpKernelConstruction* c, const char* name, int64_t* out) {
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrInt64(c, name, out, st);
  return attr_status(c, st);
}

bool sk_attr_float(TF_OpKernelConstruction* c, const char* name, float* out) {
  TF_Status* st = TF_NewStatus();
  TF_OpKernelConstruction_GetAttrFloat(c, name, out, st);
  return attr_status(c, st);
}

bool sk_attr_size(TF_OpKernelConstruction* c, const char* name,
                  int32_t* list_size, int32_t* total_size) {
  TF_Status* st = TF_NewStatus();
  int32_t n = 0, total = 0;
  TF_OpKernelConstruction_GetAttrSize(c, name, &n, &total, st);
  if (list_size != NULL) *list_size = n;
  if (total_size != NULL) *total_size = total;
  return attr_status(c, st);
}

bool sk_attr_string(TF_OpKernelConstruction* c, const char* name, char* buf,
                    size_t len) {
  int32_t total = 0;
  if (!sk_attr_size(c, name, NULL, &total)) return false;
  TF_Status* st = TF_NewStatus();
  if (total < 0 || (size_t)total >= len)
    TF_SetStatus(st, TF_INVALID_ARGUMENT, "attribute string too long");
  if (TF_GetCode(st) == TF_OK) {
    TF_OpKernelConstruction_GetAttrString(c, name, buf, (size_t)total, st);
    buf[total] = '\0';
  }
  return attr_status(c, st);
}

bool sk_attr_ints(TF_OpKernelConstruction* c, const char* name, int64_t* out,
                  int max, int* count) {
  int32_t list_size = 0;
  if (!sk_attr_size(c, name, &list_size, NULL)) return false;
  TF_Status* st = TF_NewStatus();
  if (list_size < 0 || list_size > max)
    TF_SetStatus(st, TF_INVALID_ARGUMENT, "attribute list too long");
  if (TF_GetCode(st) == TF_OK) {
    TF_OpKernelConstruction_GetAttrInt64List(c, name, out, list_size, st);
    *count = list_size;
  }
  return attr_status(c, st);
}

bool sk_attr_int32s(TF_OpKernelConstruction* c, const char* name, int64_t* out,
                    int max, int* count) {
  if (!sk_attr_ints(c, name, out, max, count)) return false;
  for (int i = 0; i < *count; i++) {
    if (out[i] >= INT32_MIN && out[i] <= INT32_MAX) continue;
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Attr %s has value %lld out of range for an int32",
                         name, (long long)out[i]);
    return false;
  }
  return true;
}
