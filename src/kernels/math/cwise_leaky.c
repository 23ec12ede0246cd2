/*
 * cwise_leaky.c - LeakyRelu and LeakyReluGrad, the activations with an
 * attribute (alpha), which the shared elementwise driver's loops (cwise.h:
 * no per-kernel parameter) cannot carry; so they run their own flat loop.
 *
 * Numerics as TF's CPU functors: LeakyRelu(x) = x > 0 ? x : alpha * x (for
 * alpha <= 1 TF writes max(x, alpha x), the same values except for signs of
 * zero); LeakyReluGrad(g, x) = x > 0 ? g : g * alpha. alpha (a float attribute)
 * is converted to the tensor's dtype first, as TF does. Input shapes of the
 * gradient must match (TF's ValidateSameShape, message reproduced).
 *
 * Thread contract: the attribute is read at construction; leaky_range runs
 * on the stream worker and its helpers on disjoint ranges of its args.
 */
#include <stdlib.h>

#include "kernels/math/cwise.h"

typedef struct leaky_state {
  float alpha;
  bool grad; /* LeakyReluGrad */
} leaky_state;

typedef struct leaky_args {
  TF_DataType dt;
  bool grad;
  float alpha;
  int64_t n;
  const void* g; /* gradients (LeakyReluGrad only) */
  const void* x; /* features */
  void* z;
} leaky_args;

/* The forward op through arith/scalar.h's sa_cws_leakyrelu, which the fused
 * ops' epilogue (src/arith/epi.c) also uses: the same bits fused or not. */
#define LEAKY_LOOP(T, SUF)                                                     \
  do {                                                                         \
    const T* x = a->x;                                                         \
    const T* g = a->g;                                                         \
    T* z = a->z;                                                               \
    const T al = (T)a->alpha;                                                  \
    if (a->grad)                                                               \
      for (int64_t i = b; i < e; i++) z[i] = x[i] > 0 ? g[i] : g[i] * al;      \
    else                                                                       \
      for (int64_t i = b; i < e; i++) z[i] = sa_cws_leakyrelu_##SUF(x[i], al); \
  } while (0)

static void leaky_range(void* arg, int64_t b, int64_t e) {
  const leaky_args* a = arg;
  if (a->dt == TF_FLOAT)
    LEAKY_LOOP(float, f32);
  else
    LEAKY_LOOP(double, f64);
}

static void leaky_run(sk_launch* l, void* args) {
  (void)l;
  leaky_args* a = args;
  sim_parallel_for(a->n, SK_CW_GRAIN, leaky_range, a);
}

/* TF thread. LeakyRelu(features); LeakyReluGrad(gradients, features). */
static void leaky_compute(sk_launch* l, void* state) {
  const leaky_state* st = state;
  const char* name = st->grad ? "LeakyReluGrad" : "LeakyRelu";
  TF_Tensor* x = sk_input(l, st->grad ? 1 : 0);
  TF_Tensor* g = st->grad ? sk_input(l, 0) : NULL;
  sk_shape xs, gs;
  if (x == NULL || !sk_shape_of(l, x, &xs)) return;
  if (st->grad) {
    char a[400], b[400];
    if (g == NULL || !sk_shape_of(l, g, &gs)) return;
    if (!sk_shape_eq(&gs, &xs)) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Inputs to operation %s of type %s must have the same size and "
              "shape.  Input 0: %s != input 1: %s",
              name, name, sk_shape_str(&gs, a, sizeof(a)),
              sk_shape_str(&xs, b, sizeof(b)));
      return;
    }
  }
  const TF_DataType dt = TF_TensorType(x);
  if (dt != TF_FLOAT && dt != TF_DOUBLE) {
    sk_fail(l, TF_UNIMPLEMENTED, "simdev: %s has no %s kernel", name,
            sk_dtype_name(dt));
    return;
  }
  TF_Tensor* z = sk_output(l, 0, &xs);
  if (z == NULL || xs.n == 0) return;
  leaky_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  a->dt = dt;
  a->grad = st->grad;
  a->alpha = st->alpha;
  a->n = xs.n;
  a->g = g != NULL ? sk_data(g) : NULL;
  a->x = sk_data(x);
  a->z = sk_mdata(z);
  sk_work(l, leaky_run, name);
}

static void* leaky_create(TF_OpKernelConstruction* c, bool grad) {
  leaky_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->grad = grad;
  if (!sk_attr_float(c, "alpha", &st->alpha)) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, leaky_compute, st, free);
}

static void* leakyrelu_create(TF_OpKernelConstruction* c) {
  return leaky_create(c, false);
}
static void* leakyrelugrad_create(TF_OpKernelConstruction* c) {
  return leaky_create(c, true);
}

static const sk_op kOps[] = {
    {"LeakyRelu", leakyrelu_create, "T", sk_cw_float_types, NULL},
    {"LeakyReluGrad", leakyrelugrad_create, "T", sk_cw_float_types, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise_leaky(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
