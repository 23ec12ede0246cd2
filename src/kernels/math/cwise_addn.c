/*
 * cwise_addn.c - AddN: the elementwise sum of N same-shape tensors.
 *
 * One pass over memory: each output block reads its slice of every input and
 * writes the sum once, instead of N - 1 binary AddV2 launches each reading
 * and writing the whole output (Grappler's AddOpsRewrite and the gradient
 * aggregation of every Keras model build AddN with many inputs).
 *
 * Numerics: float sums run left to right in the dtype (input 0 + input 1 +
 * ...), i.e. N - 1 roundings (half and bfloat16: in float32, rounded to
 * nearest even once at the end); TF's CPU kernel groups inputs by eight, which
 * is within the same gamma(N - 1) bound. int64 wraps in two's complement.
 * Shapes must be equal (TF's message for a mismatch is reproduced).
 *
 * Thread contract: validation on TF's thread; addn_range runs on the stream
 * worker and its sim_parallel_for helpers on disjoint output ranges and
 * touches only its args (the held inputs' data pointers and the output).
 */
#include <stdlib.h>

#include "kernels/math/cwise.h"

typedef struct addn_args {
  TF_DataType dt;
  int count;
  int64_t n;
  void* z;
  const void* x[]; /* count input pointers */
} addn_args;

/* z[b, e) = the sum of the inputs, a block at a time so that the partial
 * sums stay in cache while the inputs stream through. */
#define ADDN_BLOCK 2048
#define ADDN_LOOP(T, ADD)                                           \
  do {                                                              \
    T* z = a->z;                                                    \
    for (int64_t i0 = b; i0 < e; i0 += ADDN_BLOCK) {                \
      const int64_t i1 = i0 + ADDN_BLOCK < e ? i0 + ADDN_BLOCK : e; \
      const T* x0 = a->x[0];                                        \
      for (int64_t i = i0; i < i1; i++) z[i] = x0[i];               \
      for (int k = 1; k < a->count; k++) {                          \
        const T* xk = a->x[k];                                      \
        for (int64_t i = i0; i < i1; i++) z[i] = (ADD);             \
      }                                                             \
    }                                                               \
  } while (0)

/* half / bfloat16: a float sum per block, rounded once on store. */
static void addn_range16(const addn_args* a, int64_t b, int64_t e) {
  const int cv = sk_cw_conv(a->dt);
  float acc[ADDN_BLOCK], t[ADDN_BLOCK];
  uint16_t* z = a->z;
  for (int64_t i0 = b; i0 < e; i0 += ADDN_BLOCK) {
    const int64_t m = i0 + ADDN_BLOCK < e ? ADDN_BLOCK : e - i0;
    sk_cw_load16(cv, (const uint16_t*)a->x[0] + i0, acc, m);
    for (int k = 1; k < a->count; k++) {
      sk_cw_load16(cv, (const uint16_t*)a->x[k] + i0, t, m);
      for (int64_t i = 0; i < m; i++) acc[i] += t[i];
    }
    sk_cw_store16(cv, acc, z + i0, m);
  }
}

static void addn_range(void* arg, int64_t b, int64_t e) {
  const addn_args* a = arg;
  if (sk_cw_conv(a->dt) != 0)
    addn_range16(a, b, e);
  else if (a->dt == TF_FLOAT)
    ADDN_LOOP(float, z[i] + xk[i]);
  else if (a->dt == TF_DOUBLE)
    ADDN_LOOP(double, z[i] + xk[i]);
  else /* TF_INT64, wrapping */
    ADDN_LOOP(int64_t, (int64_t)((uint64_t)z[i] + (uint64_t)xk[i]));
}

static void addn_run(sk_launch* l, void* args) {
  (void)l;
  addn_args* a = args;
  sim_parallel_for(a->n, SK_CW_GRAIN, addn_range, a);
}

/* TF thread: checks that every input has input 0's shape. */
static void addn_compute(sk_launch* l, void* state) {
  (void)state;
  const int count = TF_NumInputs(sk_context(l));
  TF_Tensor* x0 = sk_input(l, 0);
  sk_shape s0, s;
  char b0[400], b1[400];
  if (x0 == NULL || !sk_shape_of(l, x0, &s0)) return;
  const TF_DataType dt = TF_TensorType(x0);
  if (dt != TF_FLOAT && dt != TF_DOUBLE && dt != TF_INT64 &&
      sk_cw_conv(dt) == 0) {
    sk_fail(l, TF_UNIMPLEMENTED, "simdev: AddN has no %s kernel",
            sk_dtype_name(dt));
    return;
  }
  addn_args* a = sk_args(l, sizeof(*a) + (size_t)count * sizeof(a->x[0]));
  if (a == NULL) return;
  a->x[0] = sk_data(x0);
  for (int k = 1; k < count; k++) {
    TF_Tensor* xk = sk_input(l, k);
    if (xk == NULL || !sk_shape_of(l, xk, &s)) return;
    if (!sk_shape_eq(&s0, &s)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Inputs to operation AddN of type AddN must have the same size "
              "and shape.  Input 0: %s != input %d: %s",
              sk_shape_str(&s0, b0, sizeof(b0)), k,
              sk_shape_str(&s, b1, sizeof(b1)));
      return;
    }
    a->x[k] = sk_data(xk);
  }
  TF_Tensor* z = sk_output(l, 0, &s0);
  if (z == NULL || s0.n == 0) return;
  a->dt = dt;
  a->count = count;
  a->n = s0.n;
  a->z = sk_mdata(z);
  sk_work(l, addn_run, "AddN");
}

SK_CW_CREATE(addn_create, addn_compute, NULL)

static const sk_op kOps[] = {
    {"AddN", addn_create, "T", sk_cw_real_i64_types, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise_addn(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
