/*
 * cwise_bias.c - BiasAdd and BiasAddGrad (float32, float64; NHWC and NCHW).
 *
 * Both view the value as [outer, C, inner] around its channel dimension: the
 * last one for NHWC and for rank-2 inputs in either format (as TF's CPU
 * kernel does), dimension 1 for NCHW inputs of rank >= 3.
 *
 * BiasAdd is AddV2 with the bias broadcast along that view, through the
 * shared elementwise driver (cwise.h).
 *
 * BiasAddGrad sums over outer and inner for each channel. It must give
 * bit-identical results run to run, whatever the thread count or timing, so
 * the split is fixed by the shape alone: work items of about ITEM_ELEMS
 * elements (a block of outer indices x a block of inner indices x a chunk of
 * channels) each write their own row of double partial sums in a scratch
 * buffer; a second pass adds the rows in index order per channel. Sums are
 * accumulated in double for both dtypes.
 */
#include <string.h>

#include "kernels/math/cwise.h"

#define ITEM_ELEMS ((int64_t)1 << 16) /* elements per reduction item */
#define CHUNK_C ((int64_t)4096)       /* channels per item */
#define BLOCK_S ((int64_t)1 << 16)    /* inner indices per item */
#define MAX_PART ((int64_t)1 << 22)   /* partial sums kept, at most */

static const bool kNCHW = true, kNHWC = false;

/* [outer, C, inner] of a value of rank >= 2; [0, C, 0] for an empty one,
 * whose dims' products need not fit int64 ([0, 3, 2**62, 4]: arith/dims.h).
 * For a value with an element every product divides s->n and fits. */
static void channel_view(const sk_shape* s, bool nchw, int64_t v[3]) {
  int cd = nchw && s->nd >= 3 ? 1 : s->nd - 1;
  v[1] = s->d[cd];
  if (s->n == 0) {
    v[0] = v[2] = 0;
    return;
  }
  v[0] = v[2] = 1;
  for (int k = 0; k < cd; k++) v[0] *= s->d[k];
  v[1] = s->d[cd];
  for (int k = cd + 1; k < s->nd; k++) v[2] *= s->d[k];
}

static bool at_least_2d(sk_launch* l, const sk_shape* s) {
  char b[400];
  if (s->nd >= 2) return true;
  sk_fail(l, TF_INVALID_ARGUMENT, "Input tensor must be at least 2D: %s",
          sk_shape_str(s, b, sizeof(b)));
  return false;
}

/* ---- BiasAdd ----------------------------------------------------------- */

static void bias_add_compute(sk_launch* l, void* state) {
  const bool nchw = *(const bool*)state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* bias = sk_input(l, 1);
  sk_shape xs, bs;
  if (x == NULL || bias == NULL || !sk_shape_of(l, x, &xs) ||
      !sk_shape_of(l, bias, &bs) || !at_least_2d(l, &xs))
    return;
  char a[400], b[400];
  if (bs.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "Biases must be 1D: %s",
            sk_shape_str(&bs, a, sizeof(a)));
    return;
  }
  int64_t v[3];
  channel_view(&xs, nchw, v);
  if (bs.d[0] != v[1]) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Must provide as many biases as the last dimension of the input "
            "tensor: %s vs. %s",
            sk_shape_str(&bs, a, sizeof(a)), sk_shape_str(&xs, b, sizeof(b)));
    return;
  }
  TF_DataType dt = TF_TensorType(x);
  sk_cw_loop loop = sk_cw_pick(l, &sk_cw_add_loops, dt, "BiasAdd");
  TF_Tensor* z = sk_output(l, 0, &xs);
  if (loop == NULL || z == NULL) return;
  sk_shape out3 = {3, {v[0], v[1], v[2]}, xs.n};
  sk_shape bias3 = {3, {1, v[1], 1}, v[1]};
  sk_cw_bcast plan;
  sk_cw_bcast_plan(&out3, &out3, &bias3, &plan);
  sk_cw_launch(l, loop, dt, x, bias, z, &plan, "BiasAdd");
}

/* ---- BiasAddGrad ------------------------------------------------------- */

typedef struct bgrad_args {
  TF_DataType dt;
  const void* x;
  void* out;
  double* part;                       /* nb * sb rows of c partial sums */
  int64_t n, c, s;                    /* the [outer, C, inner] view */
  int64_t nbsz, nb, sbsz, sb, cw, cc; /* block sizes and counts */
} bgrad_args;

/* p[c] += sum of x[n, c, s] for n in [n0,n1), c in [c0,c1), s in [s0,s1).
 * Four accumulators along inner, combined in a fixed order. */
#define BGRAD_SUM(name, T)                                                 \
  static void name(const bgrad_args* a, double* p, int64_t n0, int64_t n1, \
                   int64_t c0, int64_t c1, int64_t s0, int64_t s1) {       \
    const T* x = a->x;                                                     \
    const int64_t C = a->c, S = a->s;                                      \
    for (int64_t n = n0; n < n1; n++) {                                    \
      if (S == 1) {                                                        \
        const T* row = x + n * C;                                          \
        for (int64_t c = c0; c < c1; c++) p[c] += row[c];                  \
        continue;                                                          \
      }                                                                    \
      for (int64_t c = c0; c < c1; c++) {                                  \
        const T* r = x + (n * C + c) * S;                                  \
        double acc[4] = {0, 0, 0, 0};                                      \
        int64_t s = s0;                                                    \
        for (; s + 4 <= s1; s += 4) {                                      \
          acc[0] += r[s];                                                  \
          acc[1] += r[s + 1];                                              \
          acc[2] += r[s + 2];                                              \
          acc[3] += r[s + 3];                                              \
        }                                                                  \
        for (; s < s1; s++) acc[0] += r[s];                                \
        p[c] += (acc[0] + acc[1]) + (acc[2] + acc[3]);                     \
      }                                                                    \
    }                                                                      \
  }
BGRAD_SUM(bgrad_sum_f32, float)
BGRAD_SUM(bgrad_sum_f64, double)

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Items [b, e): item i is (outer block, inner block, channel chunk). */
static void bgrad_items(void* arg, int64_t b, int64_t e) {
  const bgrad_args* a = arg;
  for (int64_t i = b; i < e; i++) {
    int64_t ci = i % a->cc, rest = i / a->cc;
    int64_t si = rest % a->sb, ni = rest / a->sb;
    int64_t c0 = ci * a->cw, c1 = min64(a->c, c0 + a->cw);
    int64_t s0 = si * a->sbsz, s1 = min64(a->s, s0 + a->sbsz);
    int64_t n0 = ni * a->nbsz, n1 = min64(a->n, n0 + a->nbsz);
    double* p = a->part + (ni * a->sb + si) * a->c;
    for (int64_t c = c0; c < c1; c++) p[c] = 0;
    if (a->dt == TF_FLOAT)
      bgrad_sum_f32(a, p, n0, n1, c0, c1, s0, s1);
    else
      bgrad_sum_f64(a, p, n0, n1, c0, c1, s0, s1);
  }
}

/* Channels [b, e): adds the partial rows into row 0 in row order, then
 * converts to the output type. */
static void bgrad_finish(void* arg, int64_t b, int64_t e) {
  const bgrad_args* a = arg;
  double* p0 = a->part;
  int64_t rows = a->nb * a->sb;
  for (int64_t r = 1; r < rows; r++) {
    const double* pr = a->part + r * a->c;
    for (int64_t c = b; c < e; c++) p0[c] += pr[c];
  }
  if (a->dt == TF_FLOAT) {
    float* out = a->out;
    for (int64_t c = b; c < e; c++) out[c] = (float)p0[c];
  } else {
    double* out = a->out;
    for (int64_t c = b; c < e; c++) out[c] = p0[c];
  }
}

static void bgrad_run(sk_launch* l, void* args) {
  (void)l;
  bgrad_args* a = args;
  sim_parallel_for(a->nb * a->sb * a->cc, 1, bgrad_items, a);
  sim_parallel_for(a->c, 4096, bgrad_finish, a);
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/* The fixed split of an [n, c, s] view (c > 0); depends on the shape only. */
static void bgrad_blocks(bgrad_args* a) {
  a->cw = min64(a->c, CHUNK_C);
  a->cc = ceil_div(a->c, a->cw);
  a->sbsz = a->s > 0 ? min64(a->s, BLOCK_S) : 1;
  a->sb = a->s > 0 ? ceil_div(a->s, a->sbsz) : 1;
  int64_t per_n = a->cw * a->sbsz;
  a->nbsz = per_n < ITEM_ELEMS ? ITEM_ELEMS / per_n : 1;
  a->nb = a->n > 0 ? ceil_div(a->n, a->nbsz) : 1;
  if (a->nb * a->sb * a->c > MAX_PART) { /* bound the scratch */
    int64_t nb_max = MAX_PART / (a->sb * a->c);
    if (nb_max < 1) nb_max = 1;
    a->nbsz = ceil_div(a->n, nb_max);
    a->nb = ceil_div(a->n, a->nbsz);
  }
}

static void bias_grad_compute(sk_launch* l, void* state) {
  const bool nchw = *(const bool*)state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape xs;
  if (x == NULL || !sk_shape_of(l, x, &xs) || !at_least_2d(l, &xs)) return;
  int64_t v[3];
  channel_view(&xs, nchw, v);
  sk_shape os = {1, {v[1]}, v[1]};
  TF_Tensor* out = sk_output(l, 0, &os);
  bgrad_args* a = sk_args(l, sizeof(*a));
  if (out == NULL || a == NULL || v[1] == 0) return;
  a->dt = TF_TensorType(x);
  if (a->dt != TF_FLOAT && a->dt != TF_DOUBLE) {
    sk_fail(l, TF_UNIMPLEMENTED, "simdev: BiasAddGrad has no %s kernel",
            sk_dtype_name(a->dt));
    return;
  }
  a->x = sk_data(x);
  a->out = sk_mdata(out);
  a->n = v[0];
  a->c = v[1];
  a->s = v[2];
  bgrad_blocks(a);
  int64_t np;
  if (!sk_size_mul(l, a->nb, a->sb, &np, "BiasAddGrad scratch") ||
      !sk_size_mul(l, np, a->c, &np, "BiasAddGrad scratch"))
    return;
  a->part = sk_temp_n(l, np, sizeof(double));
  if (a->part == NULL) return;
  sk_work(l, bgrad_run, "BiasAddGrad");
}

/* ---- registration ------------------------------------------------------ */

static void* bias_create(TF_OpKernelConstruction* c, sk_compute_fn compute) {
  char fmt[16];
  if (!sk_attr_string(c, "data_format", fmt, sizeof(fmt))) return NULL;
  if (strcmp(fmt, "NHWC") != 0 && strcmp(fmt, "NCHW") != 0) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT, "Invalid data format: %s",
                         fmt);
    return NULL;
  }
  const bool* nchw = strcmp(fmt, "NCHW") == 0 ? &kNCHW : &kNHWC;
  return sk_kernel_new(c, compute, (void*)nchw, NULL);
}

static void* bias_add_create(TF_OpKernelConstruction* c) {
  return bias_create(c, bias_add_compute);
}

static void* bias_grad_create(TF_OpKernelConstruction* c) {
  return bias_create(c, bias_grad_compute);
}

static const sk_op kOps[] = {
    {"BiasAdd", bias_add_create, "T", sk_cw_float_types, NULL},
    {"BiasAddGrad", bias_grad_create, "T", sk_cw_float_types, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_cwise_bias(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
