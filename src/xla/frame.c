/*
 * frame.c - reading XLA's call frame: the metadata handshake, arity and
 * stage, buffers and their checks, attributes by name, and the errors
 * handlers return.
 *
 * Everything here runs on the thread that called the handler (XLA's), except
 * sx_error_msg, which the stream worker uses too. Nothing keeps state.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sx_internal.h"

/* ---- the handshake and the frame ---------------------------------------- */

bool sx_metadata(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Extension_Base* ext = frame->extension_start;
  if (ext == NULL || ext->type != XLA_FFI_Extension_Metadata) return false;
  /* XLA's metadata frame: answer with the API version this library was
   * compiled against and touch nothing else (traits and the state type id
   * stay XLA's zeros: no command buffers, no state). A too-small extension
   * or metadata struct gets no answer: XLA then sees version 0.0 and
   * refuses the registration with its own message. */
  XLA_FFI_Metadata_Extension* me = (XLA_FFI_Metadata_Extension*)ext;
  if (ext->struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE ||
      me->metadata == NULL ||
      me->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return true;
  me->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  me->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  return true;
}

XLA_FFI_Error* sx_begin(sx_call* c, XLA_FFI_CallFrame* frame,
                        const char* target, int64_t nargs, int64_t nrets) {
  *c = (sx_call){frame, frame->api, target};
  /* A frame smaller than the header's says XLA is not the one this library
   * was built for. Only a partial check: the header's STRUCT_SIZE ends at
   * `attrs`, so it cannot tell whether `future` (which sx_launch writes)
   * exists; the version handshake at registration is what guarantees it
   * (XLA refuses a handler whose API version it does not speak). */
  if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "call frame of %zu bytes, expected at least %zu (not the "
                    "XLA FFI this library was built for)",
                    frame->struct_size, (size_t)XLA_FFI_CallFrame_STRUCT_SIZE);
  /* Registered for the execute stage only; XLA calls no other. */
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "called for execution stage %d, expected execute (%d)",
                    (int)frame->stage, (int)XLA_FFI_ExecutionStage_EXECUTE);
  if (frame->args.size != nargs || frame->rets.size != nrets)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "expected %" PRId64 " operand%s and %" PRId64
                    " result%s, got %" PRId64 " and %" PRId64,
                    nargs, nargs == 1 ? "" : "s", nrets, nrets == 1 ? "" : "s",
                    frame->args.size, frame->rets.size);
  for (int64_t i = 0; i < nargs; i++)
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER ||
        frame->args.args[i] == NULL)
      return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "operand %" PRId64 " is not a buffer", i);
  for (int64_t i = 0; i < nrets; i++)
    if (frame->rets.types[i] != XLA_FFI_RetType_BUFFER ||
        frame->rets.rets[i] == NULL)
      return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "result %" PRId64 " is not a buffer", i);
  return NULL;
}

XLA_FFI_Buffer* sx_arg(const sx_call* c, int64_t i) {
  return c->frame->args.args[i];
}
XLA_FFI_Buffer* sx_ret(const sx_call* c, int64_t i) {
  return c->frame->rets.rets[i];
}

/* ---- errors -------------------------------------------------------------- */

XLA_FFI_Error* sx_error_msg(const XLA_FFI_Api* api, XLA_FFI_Error_Code code,
                            const char* msg) {
  XLA_FFI_Error_Create_Args args = {
      .struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE,
      .message = msg,
      .errc = code,
  };
  return api->XLA_FFI_Error_Create(&args);
}

XLA_FFI_Error* sx_error(const sx_call* c, XLA_FFI_Error_Code code,
                        const char* fmt, ...) {
  char msg[640];
  int n = snprintf(msg, sizeof(msg), "%s: ", c->target);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
  va_end(ap);
  return sx_error_msg(c->api, code, msg);
}

XLA_FFI_Error* sx_no_memory(const sx_call* c) {
  return sx_error(c, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                  "out of host memory for the work item");
}

/* ---- buffers ------------------------------------------------------------- */

const char* sx_dtype_name(XLA_FFI_DataType dt) {
  switch (dt) {
    case XLA_FFI_DataType_PRED: return "pred";
    case XLA_FFI_DataType_S1: return "s1";
    case XLA_FFI_DataType_S2: return "s2";
    case XLA_FFI_DataType_S4: return "s4";
    case XLA_FFI_DataType_S8: return "s8";
    case XLA_FFI_DataType_S16: return "s16";
    case XLA_FFI_DataType_S32: return "s32";
    case XLA_FFI_DataType_S64: return "s64";
    case XLA_FFI_DataType_U1: return "u1";
    case XLA_FFI_DataType_U2: return "u2";
    case XLA_FFI_DataType_U4: return "u4";
    case XLA_FFI_DataType_U8: return "u8";
    case XLA_FFI_DataType_U16: return "u16";
    case XLA_FFI_DataType_U32: return "u32";
    case XLA_FFI_DataType_U64: return "u64";
    case XLA_FFI_DataType_F16: return "f16";
    case XLA_FFI_DataType_F32: return "f32";
    case XLA_FFI_DataType_F64: return "f64";
    case XLA_FFI_DataType_BF16: return "bf16";
    case XLA_FFI_DataType_C64: return "c64";
    case XLA_FFI_DataType_C128: return "c128";
    case XLA_FFI_DataType_TOKEN: return "token";
    case XLA_FFI_DataType_F8E5M2: return "f8e5m2";
    case XLA_FFI_DataType_F8E3M4: return "f8e3m4";
    case XLA_FFI_DataType_F8E4M3: return "f8e4m3";
    case XLA_FFI_DataType_F8E4M3FN: return "f8e4m3fn";
    case XLA_FFI_DataType_F8E4M3B11FNUZ: return "f8e4m3b11fnuz";
    case XLA_FFI_DataType_F8E5M2FNUZ: return "f8e5m2fnuz";
    case XLA_FFI_DataType_F8E4M3FNUZ: return "f8e4m3fnuz";
    case XLA_FFI_DataType_F4E2M1FN: return "f4e2m1fn";
    case XLA_FFI_DataType_F8E8M0FNU: return "f8e8m0fnu";
    case XLA_FFI_DataType_INVALID: break;
  }
  return "an invalid dtype";
}

static XLA_FFI_DataType xla_dtype(sa_dtype dt) {
  return dt == SA_F32 ? XLA_FFI_DataType_F32 : XLA_FFI_DataType_F64;
}

void sx_fmt_dims(char* buf, size_t len, const int64_t* dims, int64_t rank) {
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int64_t i = 0; i < rank && n < len; i++)
    n +=
        (size_t)snprintf(buf + n, len - n, "%s%" PRId64, i ? "," : "", dims[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}

int64_t sx_prod(const int64_t* dims, int64_t n) {
  int64_t p = 1;
  for (int64_t i = 0; i < n; i++) p *= dims[i];
  return p;
}

XLA_FFI_Error* sx_buffer(const sx_call* c, const char* what,
                         const XLA_FFI_Buffer* b, sa_dtype* dt,
                         const char* other, sx_buf* out) {
  const XLA_FFI_Error_Code inval = XLA_FFI_Error_Code_INVALID_ARGUMENT;
  if (*dt == 0) {
    if (b->dtype == XLA_FFI_DataType_F32)
      *dt = SA_F32;
    else if (b->dtype == XLA_FFI_DataType_F64)
      *dt = SA_F64;
    else
      return sx_error(c, inval, "%s must be float32 or float64, got %s", what,
                      sx_dtype_name(b->dtype));
  } else if (b->dtype != xla_dtype(*dt)) {
    return sx_error(c, inval, "%s must be %s%s%s, got %s", what,
                    sx_dtype_name(xla_dtype(*dt)), other ? " like " : "",
                    other ? other : "", sx_dtype_name(b->dtype));
  }
  if (b->rank < 0 || b->rank > SX_MAX_RANK)
    return sx_error(c, b->rank < 0 ? inval : XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "%s has rank %" PRId64 "; simdev takes 0 to %d", what,
                    b->rank, SX_MAX_RANK);
  if (b->rank > 0 && b->dims == NULL)
    return sx_error(c, inval, "%s has rank %" PRId64 " but no dims", what,
                    b->rank);
  /* The byte size must fit in int64 (and so in size_t): offsets are
   * computed in int64 everywhere. */
  int64_t elems = 1, bytes;
  for (int64_t i = 0; i < b->rank; i++) {
    if (b->dims[i] < 0)
      return sx_error(c, inval,
                      "%s has a negative dim %" PRId64 " (axis %" PRId64 ")",
                      what, b->dims[i], i);
    if (__builtin_mul_overflow(elems, b->dims[i], &elems))
      return sx_error(c, inval, "%s has more elements than int64 counts", what);
  }
  if (__builtin_mul_overflow(elems, (int64_t)sa_dtype_size(*dt), &bytes))
    return sx_error(c, inval, "%s has more bytes than int64 counts", what);
  if (elems > 0 && b->data == NULL)
    return sx_error(c, inval, "%s has %" PRId64 " elements but no data", what,
                    elems);
  *out = (sx_buf){what, b->data, b->rank, b->dims, elems};
  return NULL;
}

XLA_FFI_Error* sx_rank(const sx_call* c, const sx_buf* b, int64_t rank,
                       const char* why) {
  if (b->rank == rank) return NULL;
  return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "%s must have rank %" PRId64 "%s, got %" PRId64, b->what,
                  rank, why, b->rank);
}

XLA_FFI_Error* sx_min_rank(const sx_call* c, const sx_buf* b, int64_t min) {
  if (b->rank >= min) return NULL;
  return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "%s must have rank >= %" PRId64 ", got %" PRId64, b->what,
                  min, b->rank);
}

XLA_FFI_Error* sx_shape(const sx_call* c, const sx_buf* b,
                        const int64_t* dims) {
  /* rank 0: XLA may pass dims NULL, which memcmp must not get */
  if (b->rank == 0 ||
      memcmp(b->dims, dims, (size_t)b->rank * sizeof(int64_t)) == 0)
    return NULL;
  char want[256], got[256];
  sx_fmt_dims(want, sizeof(want), dims, b->rank);
  sx_fmt_dims(got, sizeof(got), b->dims, b->rank);
  return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "%s must have shape %s, got %s", b->what, want, got);
}

XLA_FFI_Error* sx_batch(const sx_call* c, const sx_buf* b, const sx_buf* ref,
                        int64_t nb) {
  if (nb == 0 || memcmp(b->dims, ref->dims, (size_t)nb * sizeof(int64_t)) == 0)
    return NULL;
  char want[256], got[256];
  sx_fmt_dims(want, sizeof(want), ref->dims, nb);
  sx_fmt_dims(got, sizeof(got), b->dims, nb);
  return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                  "%s must have the batch dims %s of %s, got %s", b->what, want,
                  ref->what, got);
}

/* ---- attributes ---------------------------------------------------------- */

static int name_cmp(const XLA_FFI_ByteSpan* a, const char* b) {
  size_t bl = strlen(b), n = a->len < bl ? a->len : bl;
  int r = n ? memcmp(a->ptr, b, n) : 0;
  if (r != 0) return r;
  return a->len < bl ? -1 : a->len > bl ? 1 : 0;
}

/* Index of attribute name, or -1. XLA hands attributes sorted by name
 * (c_api.h promises it), so a binary search finds it. */
static int64_t attr_find(const sx_call* c, const char* name) {
  const XLA_FFI_Attrs* at = &c->frame->attrs;
  int64_t lo = 0, hi = at->size;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int r = name_cmp(at->names[mid], name);
    if (r == 0) return mid;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

XLA_FFI_Error* sx_attrs_known(const sx_call* c, const char* const* names,
                              int n) {
  const XLA_FFI_Attrs* at = &c->frame->attrs;
  for (int64_t i = 0; i < at->size; i++) {
    bool known = false;
    for (int j = 0; j < n && !known; j++)
      known = name_cmp(at->names[i], names[j]) == 0;
    if (!known)
      return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "unexpected attribute '%.*s'", (int)at->names[i]->len,
                      at->names[i]->ptr);
  }
  return NULL;
}

static const char* attr_kind(XLA_FFI_AttrType t) {
  switch (t) {
    case XLA_FFI_AttrType_ARRAY: return "an array";
    case XLA_FFI_AttrType_DICTIONARY: return "a dictionary";
    case XLA_FFI_AttrType_SCALAR: return "a scalar";
    case XLA_FFI_AttrType_STRING: return "a string";
  }
  return "an unknown attribute type";
}

/* The attribute `name` of type `type`; an error when missing or of another
 * type (`want` says what it must be). */
static XLA_FFI_Error* attr_get(const sx_call* c, const char* name,
                               XLA_FFI_AttrType type, const char* want,
                               void** out) {
  int64_t i = attr_find(c, name);
  if (i < 0)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' missing", name);
  XLA_FFI_AttrType t = c->frame->attrs.types[i];
  void* a = c->frame->attrs.attrs[i];
  if (t != type) {
    if (t == XLA_FFI_AttrType_SCALAR || t == XLA_FFI_AttrType_ARRAY) {
      XLA_FFI_DataType dt = t == XLA_FFI_AttrType_SCALAR
                                ? ((XLA_FFI_Scalar*)a)->dtype
                                : ((XLA_FFI_Array*)a)->dtype;
      return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "attribute '%s' must be %s, got %s %s", name, want,
                      sx_dtype_name(dt),
                      t == XLA_FFI_AttrType_SCALAR ? "scalar" : "array");
    }
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' must be %s, got %s", name, want,
                    attr_kind(t));
  }
  *out = a;
  return NULL;
}

/* A scalar attribute of dtype dt. */
static XLA_FFI_Error* attr_scalar(const sx_call* c, const char* name,
                                  XLA_FFI_DataType dt, const char* want,
                                  void** value) {
  void* a = NULL;
  XLA_FFI_Error* e = attr_get(c, name, XLA_FFI_AttrType_SCALAR, want, &a);
  if (e) return e;
  XLA_FFI_Scalar* s = a;
  if (s->dtype != dt)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' must be %s, got %s scalar", name, want,
                    sx_dtype_name(s->dtype));
  if (s->value == NULL)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' has no value", name);
  *value = s->value;
  return NULL;
}

XLA_FFI_Error* sx_attr_bool(const sx_call* c, const char* name, bool* out) {
  void* v = NULL;
  XLA_FFI_Error* e =
      attr_scalar(c, name, XLA_FFI_DataType_PRED, "a bool (pred) scalar", &v);
  if (e) return e;
  *out = *(const uint8_t*)v != 0;
  return NULL;
}

XLA_FFI_Error* sx_attr_f32(const sx_call* c, const char* name, float* out) {
  void* v = NULL;
  XLA_FFI_Error* e =
      attr_scalar(c, name, XLA_FFI_DataType_F32, "an f32 scalar", &v);
  if (e) return e;
  memcpy(out, v, sizeof(float));
  return NULL;
}

XLA_FFI_Error* sx_attr_str(const sx_call* c, const char* name, const char** s,
                           size_t* len) {
  void* a = NULL;
  XLA_FFI_Error* e = attr_get(c, name, XLA_FFI_AttrType_STRING, "a string", &a);
  if (e) return e;
  const XLA_FFI_ByteSpan* span = a;
  *s = span->ptr;
  *len = span->len;
  return NULL;
}

XLA_FFI_Error* sx_attr_i64s(const sx_call* c, const char* name, size_t n,
                            int64_t* out) {
  void* a = NULL;
  XLA_FFI_Error* e =
      attr_get(c, name, XLA_FFI_AttrType_ARRAY, "an s64 array", &a);
  if (e) return e;
  const XLA_FFI_Array* arr = a;
  if (arr->dtype != XLA_FFI_DataType_S64)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' must be an s64 array, got %s array", name,
                    sx_dtype_name(arr->dtype));
  if (arr->size != n)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' must have %zu elements, got %zu", name, n,
                    arr->size);
  if (arr->data == NULL)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute '%s' has no data", name);
  memcpy(out, arr->data, n * sizeof(int64_t));
  return NULL;
}
