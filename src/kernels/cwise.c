/* cwise.c - elementwise kernels (work in progress: Relu only). */
#include "kernels/sk.h"

typedef struct relu_args {
  TF_DataType dt;
  const void* x;
  void* y;
  int64_t n;
} relu_args;

static void relu_range(void* arg, int64_t b, int64_t e) {
  relu_args* a = arg;
  if (a->dt == TF_FLOAT) {
    const float* x = a->x;
    float* y = a->y;
    for (int64_t i = b; i < e; i++) y[i] = x[i] > 0.f ? x[i] : 0.f;
  } else {
    const double* x = a->x;
    double* y = a->y;
    for (int64_t i = b; i < e; i++) y[i] = x[i] > 0. ? x[i] : 0.;
  }
}

static void relu_run(sk_launch* l, void* args) {
  (void)l;
  relu_args* a = args;
  sim_parallel_for(a->n, 1 << 15, relu_range, a);
}

static void relu_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  TF_Tensor* y = sk_output(l, 0, &s);
  relu_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || s.n == 0) return;
  a->dt = TF_TensorType(x);
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->n = s.n;
  sk_work(l, relu_run, "Relu");
}

static void* relu_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, relu_compute, NULL, NULL);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};

static const sk_op kOps[] = {
    {"Relu", relu_create, "T", kFloatTypes, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
