/*
 * cwise_select.c - Select and SelectV2: out = condition ? t : e, elementwise.
 *
 * Three operands, so not the two-operand driver of cwise_binary.c: the plan
 * here pads all three shapes to the output's rank with per-dimension
 * element strides (0 where an operand is broadcast) and walks the output in
 * runs along the last dimension, like the driver. Values are moved as raw
 * elements of the dtype's size (1, 4 or 8 bytes), so one loop serves every
 * registered dtype.
 *
 * Shapes, as TF's CPU kernels check them (messages reproduced):
 *   SelectV2  condition, t and e broadcast together (NumPy rules).
 *   Select    t and e have the same shape; condition is a scalar, the same
 *             shape as t, or (t of rank >= 2) a vector over t's first
 *             dimension.
 *
 * int32 runs with every argument in host memory (as TF's GPU build
 * registers it); the other dtypes on the device.
 *
 * Thread contract: plans are built on TF's thread; sel_range runs on the
 * stream worker and its helpers on disjoint output ranges of its args.
 */
#include <string.h>

#include "kernels/math/cwise.h"

#define SEL_OPS 3 /* condition, t, e */

typedef struct sel_args {
  int nd;
  int64_t n;
  size_t es;
  int64_t d[SK_MAX_DIMS];
  int64_t s[SEL_OPS][SK_MAX_DIMS]; /* element strides, 0 = broadcast */
  const char* p[SEL_OPS];
  char* z;
} sel_args;

#define SEL_RUN(T)                                       \
  do {                                                   \
    const T* t = (const T*)(a->p[1] + o[1] * sizeof(T)); \
    const T* e = (const T*)(a->p[2] + o[2] * sizeof(T)); \
    const bool* c = (const bool*)a->p[0] + o[0];         \
    T* z = (T*)a->z + i;                                 \
    for (int64_t j = 0; j < cnt; j++)                    \
      z[j] = c[j * cs] ? t[j * ts] : e[j * es];          \
  } while (0)

/* Output elements [b, e): runs along the last dimension. */
static void sel_range(void* arg, int64_t b, int64_t end) {
  const sel_args* a = arg;
  const int last = a->nd - 1;
  int64_t idx[SK_MAX_DIMS], o[SEL_OPS] = {0, 0, 0}, rem = b;
  for (int k = last; k >= 0; k--) {
    idx[k] = rem % a->d[k];
    rem /= a->d[k];
    for (int q = 0; q < SEL_OPS; q++) o[q] += idx[k] * a->s[q][k];
  }
  const int64_t cs = a->s[0][last], ts = a->s[1][last], es = a->s[2][last];
  for (int64_t i = b; i < end;) {
    int64_t cnt = a->d[last] - idx[last];
    if (cnt > end - i) cnt = end - i;
    if (a->es == 8)
      SEL_RUN(uint64_t);
    else if (a->es == 4)
      SEL_RUN(uint32_t);
    else
      SEL_RUN(uint8_t);
    i += cnt;
    if (i >= end) break;
    for (int q = 0; q < SEL_OPS; q++) o[q] -= idx[last] * a->s[q][last];
    idx[last] = 0;
    for (int k = last - 1; k >= 0; k--) {
      idx[k]++;
      for (int q = 0; q < SEL_OPS; q++) o[q] += a->s[q][k];
      if (idx[k] < a->d[k]) break;
      for (int q = 0; q < SEL_OPS; q++) o[q] -= a->d[k] * a->s[q][k];
      idx[k] = 0;
    }
  }
}

static void sel_run(sk_launch* l, void* args) {
  (void)l;
  sel_args* a = args;
  sim_parallel_for(a->n, SK_CW_GRAIN, sel_range, a);
}

/* Fills a's dims and strides for operands of shapes in[] (each already
 * padded to out's rank, dimensions equal to out's or 1) and queues it. */
static void sel_launch(sk_launch* l, TF_Tensor* const in[SEL_OPS],
                       const sk_shape in_s[SEL_OPS], const sk_shape* out,
                       const char* label) {
  TF_Tensor* z = sk_output(l, 0, out);
  if (z == NULL || out->n == 0) return;
  sel_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  a->nd = out->nd > 0 ? out->nd : 1;
  a->n = out->n;
  a->es = TF_DataTypeSize(TF_TensorType(z));
  for (int k = 0; k < a->nd; k++) a->d[k] = out->nd > 0 ? out->d[k] : 1;
  for (int q = 0; q < SEL_OPS; q++) {
    int64_t stride = 1;
    for (int k = a->nd - 1; k >= 0; k--) {
      bool full = out->nd > 0 && in_s[q].d[k] != 1;
      a->s[q][k] = full ? stride : 0;
      if (full) stride *= a->d[k];
    }
    a->p[q] = sk_data(in[q]);
  }
  a->z = sk_mdata(z);
  sk_work(l, sel_run, label);
}

/* in's shape right-aligned to rank nd (leading 1s). */
static void pad_to(const sk_shape* in, int nd, sk_shape* out) {
  out->nd = nd;
  out->n = in->n;
  for (int k = 0; k < nd; k++) {
    int j = k - (nd - in->nd);
    out->d[k] = j >= 0 ? in->d[j] : 1;
  }
}

static bool read3(sk_launch* l, TF_Tensor* in[SEL_OPS], sk_shape s[SEL_OPS]) {
  for (int q = 0; q < SEL_OPS; q++)
    if ((in[q] = sk_input(l, q)) == NULL || !sk_shape_of(l, in[q], &s[q]))
      return false;
  return true;
}

static void selectv2_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* in[SEL_OPS];
  sk_shape s[SEL_OPS], p[SEL_OPS], out;
  if (!read3(l, in, s)) return;
  int nd = 0;
  for (int q = 0; q < SEL_OPS; q++)
    if (s[q].nd > nd) nd = s[q].nd;
  out.nd = nd;
  for (int q = 0; q < SEL_OPS; q++) pad_to(&s[q], nd, &p[q]);
  for (int k = 0; k < nd; k++) {
    int64_t d = 1;
    bool ok = true;
    for (int q = 0; q < SEL_OPS; q++) {
      int64_t dq = p[q].d[k];
      if (dq == 1) continue;
      if (d != 1 && d != dq) ok = false;
      d = dq;
    }
    if (!ok) {
      char a[300], b[300], c[300];
      sk_fail(l, TF_INVALID_ARGUMENT,
              "condition %s, then %s, and else %s must be broadcastable",
              sk_shape_str(&s[0], a, sizeof(a)),
              sk_shape_str(&s[1], b, sizeof(b)),
              sk_shape_str(&s[2], c, sizeof(c)));
      return;
    }
    out.d[k] = d;
  }
  if (!sk_shape_count(l, &out)) return; /* empty inputs can overflow it */
  sel_launch(l, in, p, &out, "SelectV2");
}

static void select_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* in[SEL_OPS];
  sk_shape s[SEL_OPS], p[SEL_OPS];
  char a[300], b[300];
  if (!read3(l, in, s)) return;
  const sk_shape* t = &s[1];
  const bool scalar = s[0].nd == 0, batch = s[0].nd == 1 && t->nd != 1;
  if (!scalar && !batch) { /* elementwise: TF's ValidateInputsAreSameShape */
    for (int q = 1; q < SEL_OPS; q++) {
      if (!sk_shape_eq(&s[0], &s[q])) {
        sk_fail(l, TF_INVALID_ARGUMENT,
                "Inputs to operation Select of type Select must have the "
                "same size and shape.  Input 0: %s != input %d: %s",
                sk_shape_str(&s[0], a, sizeof(a)), q,
                sk_shape_str(&s[q], b, sizeof(b)));
        return;
      }
    }
  } else if (!sk_shape_eq(t, &s[2])) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "'then' and 'else' must have the same size.  but received: %s vs. "
            "%s",
            sk_shape_str(t, a, sizeof(a)), sk_shape_str(&s[2], b, sizeof(b)));
    return;
  }
  p[0] = p[1] = p[2] = *t;
  if (scalar) {
    pad_to(&s[0], t->nd, &p[0]);
  } else if (batch) { /* a condition per element of t's first dimension */
    if (t->nd == 0) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "'then' must be at least a vector, but saw shape: %s",
              sk_shape_str(t, a, sizeof(a)));
      return;
    }
    if (t->d[0] != s[0].d[0]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Number of batches of 'then' must match size of 'cond', but "
              "saw: %lld vs. %lld",
              (long long)t->d[0], (long long)s[0].n);
      return;
    }
    p[0].n = s[0].n;
    for (int k = 1; k < t->nd; k++) p[0].d[k] = 1;
  }
  sel_launch(l, in, p, t, "Select");
}

SK_CW_CREATE(select_create, select_compute, NULL)
SK_CW_CREATE(selectv2_create, selectv2_compute, NULL)

static const TF_DataType kDevTypes[] = {TF_FLOAT, TF_DOUBLE, TF_INT64, TF_BOOL,
                                        0};
static const TF_DataType kI32[] = {TF_INT32, 0};
static const char* const kAllHost[] = {"condition", "t", "e", "output", NULL};
static const sk_op kOps[] = {
    {"Select", select_create, "T", kDevTypes, NULL},
    {"Select", select_create, "T", kI32, kAllHost},
    {"SelectV2", selectv2_create, "T", kDevTypes, NULL},
    {"SelectV2", selectv2_create, "T", kI32, kAllHost},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise_select(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
