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

/* Each dtype's names: NumPy's / Python's, and TF's DataTypeString (what
 * TF's C++ kernels print in their messages). */
static const struct {
  TF_DataType t;
  const char *py, *tf;
} kDtypeNames[] = {
    {TF_FLOAT, "float32", "float"},
    {TF_DOUBLE, "float64", "double"},
    {TF_HALF, "float16", "half"},
    {TF_BFLOAT16, "bfloat16", "bfloat16"},
    {TF_INT8, "int8", "int8"},
    {TF_INT16, "int16", "int16"},
    {TF_INT32, "int32", "int32"},
    {TF_INT64, "int64", "int64"},
    {TF_UINT8, "uint8", "uint8"},
    {TF_UINT16, "uint16", "uint16"},
    {TF_UINT32, "uint32", "uint32"},
    {TF_UINT64, "uint64", "uint64"},
    {TF_BOOL, "bool", "bool"},
    {TF_COMPLEX64, "complex64", "complex64"},
    {TF_COMPLEX128, "complex128", "complex128"},
    {TF_STRING, NULL, "string"},
    {TF_RESOURCE, NULL, "resource"},
    {TF_VARIANT, NULL, "variant"},
};

static const char* dtype_name(TF_DataType t, bool tf) {
  for (size_t i = 0; i < sizeof(kDtypeNames) / sizeof(kDtypeNames[0]); i++)
    if (kDtypeNames[i].t == t) {
      const char* n = tf ? kDtypeNames[i].tf : kDtypeNames[i].py;
      if (n != NULL) return n;
    }
  return tf ? "unknown dtype" : "other dtype";
}

const char* sk_dtype_name(TF_DataType t) {
  return dtype_name(t, false);
}
const char* sk_dtype_tf_name(TF_DataType t) {
  return dtype_name(t, true);
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
