/*
 * shape.c - the kernel framework's shapes (sk.h, "shapes"): a tensor's shape,
 * the rank limit, and the checks every shape a kernel computes passes before
 * TF sees it (arith/dims.h has the rule), plus dtype names for messages.
 *
 * Thread contract: the functions that take an sk_launch fail it, so they run
 * where sk_fail may (the compute function, or the run function); the others
 * are pure.
 */
#include <stdio.h>

#include "kernels/framework/sk_internal.h"

/* ---- shapes ------------------------------------------------------------ */

bool sk_rank_ok(sk_launch* l, int64_t rank, const char* what) {
  if (rank <= SK_MAX_DIMS) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          "simdev kernels support tensors of rank <= %d, got rank %lld%s%s%s",
          SK_MAX_DIMS, (long long)rank, what ? " (" : "", what ? what : "",
          what ? ")" : "");
  return false;
}

bool sk_shape_of(sk_launch* l, const TF_Tensor* t, sk_shape* out) {
  int nd = TF_NumDims(t);
  if (!sk_rank_ok(l, nd, NULL)) return false;
  out->nd = nd;
  out->n = 1;
  for (int i = 0; i < nd; i++) {
    out->d[i] = TF_Dim(t, i);
    out->n *= out->d[i];
  }
  return true;
}

bool sk_shape_from_tensor(sk_launch* l, const TF_Tensor* t, const char* what,
                          sk_shape* o) {
  int64_t k = TF_TensorElementCount(t);
  if (what != NULL) {
    sk_shape ts;
    char b[SK_MAX_DIMS * 24 + 8];
    if (!sk_shape_of(l, t, &ts)) return false;
    if (ts.nd != 1) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "%s must be a vector of {int32,int64}, got shape %s", what,
              sk_shape_str(&ts, b, sizeof(b)));
      return false;
    }
  }
  if (!sk_rank_ok(l, k, "the requested shape")) return false;
  o->nd = (int)k;
  for (int i = 0; i < o->nd; i++) {
    o->d[i] = sk_index_at(t, i);
    if (o->d[i] < 0) { /* TF's wording for a requested shape */
      sk_fail(l, TF_INVALID_ARGUMENT, "Dimension %lld must be >= 0",
              (long long)o->d[i]);
      return false;
    }
  }
  return sk_shape_count(l, o); /* TF's wording for too many elements */
}

const char* sk_shape_str(const sk_shape* s, char* buf, size_t len) {
  return sa_dims_str(s->d, s->nd, buf, len);
}

bool sk_shape_eq(const sk_shape* a, const sk_shape* b) {
  if (a->nd != b->nd) return false;
  for (int i = 0; i < a->nd; i++)
    if (a->d[i] != b->d[i]) return false;
  return true;
}

/* The one check of a shape before TF sees it (sk.h): rank, dims, element
 * count, bytes (elsize 0: not checked), and the kernel's own count. */
bool sk_shape_check(sk_launch* l, const sk_shape* s, size_t elsize) {
  if (s->nd < 0 || !sk_rank_ok(l, s->nd, NULL)) {
    if (sk_ok(l)) sk_fail(l, TF_INTERNAL, "simdev: shape of rank %d", s->nd);
    return false;
  }
  char msg[480];
  int64_t n = 0;
  int rc = sa_dims_check(s->d, s->nd, elsize, &n, msg, sizeof(msg));
  if (rc != SIM_OK) {
    sk_fail(l, rc == SIM_ENOMEM ? TF_RESOURCE_EXHAUSTED : TF_INVALID_ARGUMENT,
            "%s", msg);
    return false;
  }
  if (n != s->n) {
    char b[SK_MAX_DIMS * 24 + 8];
    sk_fail(l, TF_INTERNAL,
            "simdev: a kernel counted %lld elements in shape %s, not %lld",
            (long long)s->n, sk_shape_str(s, b, sizeof(b)), (long long)n);
    return false;
  }
  return true;
}

bool sk_shape_count(sk_launch* l, sk_shape* s) {
  if (!sk_ok(l)) return false;
  char msg[480];
  int64_t n = 0;
  int rc = sa_dims_check(s->d, s->nd, 0, &n, msg, sizeof(msg));
  if (rc != SIM_OK) {
    sk_fail(l, TF_INVALID_ARGUMENT, "%s", msg);
    return false;
  }
  s->n = n;
  return true;
}

static bool size_op(sk_launch* l, bool ok, int64_t a, int64_t b, char op,
                    const char* what) {
  if (ok) return true;
  sk_fail(l, TF_INVALID_ARGUMENT, "%s: %lld %c %lld overflows int64",
          what ? what : "size", (long long)a, op, (long long)b);
  return false;
}

bool sk_size_add(sk_launch* l, int64_t a, int64_t b, int64_t* out,
                 const char* what) {
  if (!sk_ok(l)) return false;
  return size_op(l, sa_add_ok(a, b, out), a, b, '+', what);
}

bool sk_size_mul(sk_launch* l, int64_t a, int64_t b, int64_t* out,
                 const char* what) {
  if (!sk_ok(l)) return false;
  return size_op(l, sa_mul_ok(a, b, out), a, b, '*', what);
}

const char* sk_dtype_name(TF_DataType t) {
  switch (t) {
    case TF_FLOAT: return "float32";
    case TF_DOUBLE: return "float64";
    case TF_HALF: return "float16";
    case TF_BFLOAT16: return "bfloat16";
    case TF_INT8: return "int8";
    case TF_INT16: return "int16";
    case TF_INT32: return "int32";
    case TF_INT64: return "int64";
    case TF_UINT8: return "uint8";
    case TF_UINT16: return "uint16";
    case TF_UINT32: return "uint32";
    case TF_UINT64: return "uint64";
    case TF_BOOL: return "bool";
    case TF_COMPLEX64: return "complex64";
    case TF_COMPLEX128: return "complex128";
    default: return "other dtype";
  }
}

void sk_index_string(const sk_shape* s, int64_t p, char* buf, size_t len) {
  int64_t idx[SK_MAX_DIMS];
  for (int i = s->nd - 1; i >= 0; i--) {
    idx[i] = s->d[i] ? p % s->d[i] : 0;
    p = s->d[i] ? p / s->d[i] : 0;
  }
  size_t n = (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < s->nd && n < len; i++)
    n += (size_t)snprintf(buf + n, len - n, i ? ",%lld" : "%lld",
                          (long long)idx[i]);
  if (n < len) snprintf(buf + n, len - n, "]");
}
