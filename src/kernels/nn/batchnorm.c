/*
 * batchnorm.c - FusedBatchNorm, FusedBatchNormV2, FusedBatchNormV3 and their
 * gradients FusedBatchNormGrad{,V2,V3}: x of rank 4 or 5, channels last
 * (NHWC, NDHWC) or first (NCHW, NCDHW); T float32 (V1), float32 / float16 /
 * bfloat16 (V2, V3) with U = float32 statistics.
 *
 * What the outputs hold, as on TF's CPU:
 *   training   y = (x - m) / sqrt(v + eps) * scale + offset with the batch
 *              mean m and biased variance v; batch_mean / batch_variance =
 *              the running statistics: (1 - f) old + f new with the batch
 *              variance corrected by n / (n - 1) (n > 1), f =
 *              exponential_avg_factor (f == 1: just the batch's);
 *              reserve_space_1 = m, reserve_space_2 = v (the biased
 *              variance: the gradient reads them back); V3's
 *              reserve_space_3 is a float32 scalar 0.
 *   inference  y with the given mean and variance, which batch_mean and
 *              batch_variance return; reserve spaces 1 and 2 are zeros.
 *   empty x    batch_mean and batch_variance are NaN (training reserve
 *              spaces too); TF's CPU leaves its reserve spaces unwritten.
 * The gradient (training) with mean m = reserve_space_1, v =
 * reserve_space_2, r = 1 / sqrt(v + eps), xc = x - m:
 *   dx = scale r (dy - mean(dy) - xc r^2 mean(dy xc)),
 *   dscale = r sum(dy xc), doffset = sum(dy);
 * inference: dx = dy scale r. Its reserve_space_4/5 outputs are empty.
 *
 * Arithmetic in float64. x is viewed as [outer, C, inner] (channels last:
 * inner = 1). Per-channel sums are taken over fixed chunks of `outer` rows
 * (the chunking depends only on the shape), each chunk's partial sums go
 * to their own scratch row, and the partials are added in chunk order: the
 * results are bit-identical whatever the thread count. Means and variances
 * take two passes (mean, then the centred squares).
 *
 * Thread contract: create functions at construction; compute functions on
 * TF's thread; *_run and helpers on the stream worker, reading a bn_args.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/f16.h"
#include "kernels/framework/sk.h"

typedef struct bn_state {
  float eps, factor;
  bool training, cfirst;
  int version; /* 1, 2, 3 */
} bn_state;

enum bn_pass { BN_SUM_X, BN_SUM_XC2, BN_SUM_GRAD };

typedef struct bn_args {
  TF_DataType dt;
  int64_t outer, c, inner;
  int64_t chunk, nchunks; /* rows of `outer` per chunk */
  bool training, grad;
  double eps, factor;
  const void *x, *dy, *scale, *offset, *mean_in, *var_in;
  void *y, *o_mean, *o_var, *r1, *r2;
  float* r3;     /* V3's scalar reserve_space_3, or NULL */
  double* part;  /* [nchunks][2][C] partial sums */
  double* stats; /* [4][C]: mean, var, per-channel coefficients a, b */
  enum bn_pass pass;
} bn_args;

/* ---- worker ------------------------------------------------------------- */

static void sums_range(void* arg, int64_t lo, int64_t hi) {
  const bn_args* a = arg;
  int64_t C = a->c;
  const double* mean = a->stats;
  for (int64_t k = lo; k < hi; k++) {
    double* s0 = a->part + k * 2 * C;
    double* s1 = s0 + C;
    for (int64_t c = 0; c < C; c++) s0[c] = s1[c] = 0;
    int64_t r1 = (k + 1) * a->chunk < a->outer ? (k + 1) * a->chunk : a->outer;
    for (int64_t r = k * a->chunk; r < r1; r++) {
      for (int64_t c = 0; c < C; c++) {
        int64_t base = (r * C + c) * a->inner;
        for (int64_t i = 0; i < a->inner; i++) {
          double x = skh_load(a->dt, a->x, base + i);
          if (a->pass == BN_SUM_X) {
            s0[c] += x;
          } else if (a->pass == BN_SUM_XC2) {
            s0[c] += (x - mean[c]) * (x - mean[c]);
          } else {
            double g = skh_load(a->dt, a->dy, base + i);
            s0[c] += g;
            s1[c] += g * (x - mean[c]);
          }
        }
      }
    }
  }
}

/* Per-channel sums of `pass` into sum0 / sum1, in chunk order. */
static void channel_sums(bn_args* a, enum bn_pass pass, double* sum0,
                         double* sum1) {
  a->pass = pass;
  sim_parallel_for(a->nchunks, 1, sums_range, a);
  int64_t C = a->c;
  for (int64_t c = 0; c < C; c++) sum0[c] = sum1[c] = 0;
  for (int64_t k = 0; k < a->nchunks; k++) {
    const double* s0 = a->part + k * 2 * C;
    for (int64_t c = 0; c < C; c++) {
      sum0[c] += s0[c];
      sum1[c] += s0[C + c];
    }
  }
}

/* out = x * A[c] + B[c] (forward: x is x; gradient: x is dy, plus
 * D[c] * (x - mean[c]) for the training gradient). */
static void apply_range(void* arg, int64_t lo, int64_t hi) {
  const bn_args* a = arg;
  int64_t C = a->c;
  const double *mean = a->stats, *A = a->stats + 2 * C, *B = a->stats + 3 * C;
  const double* D = a->stats + C; /* training gradient only */
  for (int64_t r = lo; r < hi; r++) {
    for (int64_t c = 0; c < C; c++) {
      int64_t base = (r * C + c) * a->inner;
      for (int64_t i = 0; i < a->inner; i++) {
        double v;
        if (!a->grad) {
          v = skh_load(a->dt, a->x, base + i) * A[c] + B[c];
        } else {
          double g = skh_load(a->dt, a->dy, base + i);
          v = g * A[c] + B[c];
          if (a->training)
            v -= D[c] * (skh_load(a->dt, a->x, base + i) - mean[c]);
        }
        skh_store(a->dt, a->y, base + i, v);
      }
    }
  }
}

static void apply(bn_args* a) {
  int64_t per = a->c * a->inner;
  int64_t grain = per >= 16384 ? 1 : 16384 / (per ? per : 1);
  sim_parallel_for(a->outer, grain, apply_range, a);
}

static double ldf(const void* p, int64_t i) {
  return ((const float*)p)[i];
}
static void stf(void* p, int64_t i, double v) {
  ((float*)p)[i] = (float)v;
}

static void fwd_run(sk_launch* l, void* args) {
  (void)l;
  bn_args* a = args;
  if (a->r3 != NULL) *a->r3 = 0;
  int64_t C = a->c, n = a->outer * a->inner;
  double *mean = a->stats, *var = a->stats + C;
  double *A = a->stats + 2 * C, *B = a->stats + 3 * C;
  if (a->training) {
    double* tmp = A; /* free until the coefficients are set */
    channel_sums(a, BN_SUM_X, mean, tmp);
    for (int64_t c = 0; c < C; c++) mean[c] /= (double)n;
    channel_sums(a, BN_SUM_XC2, var, tmp);
    for (int64_t c = 0; c < C; c++) var[c] /= (double)n;
  } else {
    for (int64_t c = 0; c < C; c++) {
      mean[c] = ldf(a->mean_in, c);
      var[c] = ldf(a->var_in, c);
    }
  }
  for (int64_t c = 0; c < C; c++) {
    double r = 1.0 / sqrt(var[c] + a->eps);
    A[c] = ldf(a->scale, c) * r;
    B[c] = ldf(a->offset, c) - mean[c] * A[c];
  }
  apply(a);
  for (int64_t c = 0; c < C; c++) {
    if (!a->training) {
      stf(a->o_mean, c, mean[c]);
      stf(a->o_var, c, var[c]);
      stf(a->r1, c, 0);
      stf(a->r2, c, 0);
      continue;
    }
    double unbiased = n > 1 ? var[c] * (double)n / (double)(n - 1) : var[c];
    double f = a->factor, m = mean[c];
    if (f != 1.0) {
      m = (1 - f) * ldf(a->mean_in, c) + f * m;
      unbiased = (1 - f) * ldf(a->var_in, c) + f * unbiased;
    }
    stf(a->o_mean, c, m);
    stf(a->o_var, c, unbiased);
    stf(a->r1, c, mean[c]);
    stf(a->r2, c, var[c]);
  }
}

/* Forward with an empty x: the statistics of nothing. */
static void fwd_empty_run(sk_launch* l, void* args) {
  (void)l;
  const bn_args* a = args;
  if (a->r3 != NULL) *a->r3 = 0;
  for (int64_t c = 0; c < a->c; c++) {
    stf(a->o_mean, c, NAN);
    stf(a->o_var, c, NAN);
    stf(a->r1, c, a->training ? NAN : 0);
    stf(a->r2, c, a->training ? NAN : 0);
  }
}

static void grad_run(sk_launch* l, void* args) {
  (void)l;
  bn_args* a = args;
  int64_t C = a->c, n = a->outer * a->inner;
  double *mean = a->stats, *D = a->stats + C;
  double *A = a->stats + 2 * C, *B = a->stats + 3 * C;
  for (int64_t c = 0; c < C; c++) mean[c] = ldf(a->mean_in, c);
  double* sdy = A; /* the sums, until the coefficients replace them */
  double* sdxc = B;
  channel_sums(a, BN_SUM_GRAD, sdy, sdxc);
  for (int64_t c = 0; c < C; c++) {
    double r = 1.0 / sqrt(ldf(a->var_in, c) + a->eps);
    double s = ldf(a->scale, c);
    stf(a->o_mean, c, sdxc[c] * r); /* scale_backprop */
    stf(a->o_var, c, sdy[c]);       /* offset_backprop */
    double mdy = n ? sdy[c] / (double)n : 0, mdxc = n ? sdxc[c] / (double)n : 0;
    A[c] = s * r;
    if (a->training) {
      B[c] = -s * r * mdy;
      D[c] = s * r * r * r * mdxc;
    } else {
      B[c] = 0;
    }
  }
  apply(a);
}

/* ---- validation (TF thread) ---------------------------------------------- */

static bool vec_ok(sk_launch* l, const sk_shape* s, const char* what) {
  if (s->nd == 1) return true;
  char buf[256];
  sk_fail(l, TF_INVALID_ARGUMENT, "%s must be 1-dimensional%s", what,
          sk_shape_str(s, buf, sizeof(buf)));
  return false;
}

static bool x_ok(sk_launch* l, const sk_shape* s) {
  if (s->nd == 4 || s->nd == 5) return true;
  char buf[256];
  sk_fail(l, TF_INVALID_ARGUMENT, "input must be 4 or 5-dimensional%s",
          sk_shape_str(s, buf, sizeof(buf)));
  return false;
}

static bool count_ok(sk_launch* l, const sk_shape* s, int64_t c,
                     const char* prefix, const char* what) {
  if (s->d[0] == c) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          "%s%s must have the same number of elements as the channels of x, "
          "got %lld and %lld",
          prefix, what, (long long)s->d[0], (long long)c);
  return false;
}

/* The [outer, C, inner] view of x and the chunking of `outer`. */
static bn_args* new_args(sk_launch* l, const bn_state* st, const sk_shape* xs,
                         TF_DataType dt) {
  bn_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return NULL;
  a->dt = dt;
  a->eps = st->eps;
  a->factor = st->factor;
  a->training = st->training;
  if (xs->n == 0) {
    /* An empty x as [0, C, 0]: no rows, no chunks. Its dims' products need
     * not fit int64 ([0, 1, 3, 2**62]: TF's rule, arith/dims.h), so none is
     * formed; C (a dim of scale, which exists) is all the runs use. */
    a->c = st->cfirst ? xs->d[1] : xs->d[xs->nd - 1];
    a->outer = a->inner = 0;
  } else if (st->cfirst) {
    /* x has an element: every product of its dims divides n and fits. */
    a->outer = xs->d[0];
    a->c = xs->d[1];
    a->inner = 1;
    for (int i = 2; i < xs->nd; i++) a->inner *= xs->d[i];
  } else {
    a->c = xs->d[xs->nd - 1];
    a->inner = 1;
    a->outer = a->c ? xs->n / a->c : 0;
  }
  /* Chunks of about 16K elements: enough tasks, few partial rows. */
  int64_t per = a->c * a->inner;
  a->chunk = per >= 16384 ? 1 : 16384 / (per ? per : 1);
  a->nchunks = (a->outer + a->chunk - 1) / a->chunk;
  int64_t npart, nstats;
  const char* what = "FusedBatchNorm scratch";
  if (!sk_size_mul(l, a->nchunks, 2 * a->c, &npart, what) ||
      !sk_size_mul(l, 4, a->c, &nstats, what))
    return NULL;
  a->part = sk_temp_n(l, npart, sizeof(double));
  a->stats = sk_temp_n(l, nstats, sizeof(double));
  return sk_ok(l) ? a : NULL;
}

static void fwd_compute(sk_launch* l, void* state) {
  const bn_state* st = state;
  TF_Tensor* in[5];
  sk_shape s[5];
  for (int i = 0; i < 5; i++) {
    in[i] = sk_input(l, i);
    if (in[i] == NULL || !sk_shape_of(l, in[i], &s[i])) return;
  }
  static const char* const names[5] = {"x", "scale", "offset", "estimated_mean",
                                       "estimated_variance"};
  if (!x_ok(l, &s[0])) return;
  for (int i = 1; i < 5; i++)
    if (!vec_ok(l, &s[i], names[i])) return;
  int64_t c = st->cfirst ? s[0].d[1] : s[0].d[s[0].nd - 1];
  if (!count_ok(l, &s[1], c, "", "scale") ||
      !count_ok(l, &s[2], c, "", "offset"))
    return;
  if (!st->training) {
    if (!count_ok(l, &s[3], c, "When is_training=false, ", "mean") ||
        !count_ok(l, &s[4], c, "When is_training=false, ", "variance"))
      return;
  } else if (st->factor != 1.0f) {
    const char* p = "When exponential_avg_factor != 1, ";
    if (!count_ok(l, &s[3], c, p, "mean") ||
        !count_ok(l, &s[4], c, p, "variance"))
      return;
  }
  sk_shape cs = {1, {c}, c};
  TF_Tensor* y = sk_output(l, 0, &s[0]);
  TF_Tensor* out[4];
  for (int i = 0; i < 4; i++) out[i] = sk_output(l, 1 + i, &cs);
  sk_shape scalar = {0, {0}, 1};
  TF_Tensor* r3 = st->version == 3 ? sk_output(l, 5, &scalar) : NULL;
  if (!sk_ok(l)) return;
  bn_args* a = new_args(l, st, &s[0], TF_TensorType(in[0]));
  if (a == NULL) return;
  a->x = sk_data(in[0]);
  a->scale = sk_data(in[1]);
  a->offset = sk_data(in[2]);
  a->mean_in = sk_data(in[3]);
  a->var_in = sk_data(in[4]);
  a->y = sk_mdata(y);
  a->o_mean = sk_mdata(out[0]);
  a->o_var = sk_mdata(out[1]);
  a->r1 = sk_mdata(out[2]);
  a->r2 = sk_mdata(out[3]);
  a->r3 = r3 != NULL ? sk_mdata(r3) : NULL;
  if (s[0].n == 0 || c == 0) { /* c == 0: only reserve_space_3 */
    sk_work(l, fwd_empty_run, "FusedBatchNorm");
    return;
  }
  sk_work(l, fwd_run, "FusedBatchNorm");
}

static void grad_compute(sk_launch* l, void* state) {
  const bn_state* st = state;
  TF_Tensor* in[5];
  sk_shape s[5];
  for (int i = 0; i < 5; i++) {
    in[i] = sk_input(l, i);
    if (in[i] == NULL || !sk_shape_of(l, in[i], &s[i])) return;
  }
  if (!x_ok(l, &s[0]) || !x_ok(l, &s[1]) || !vec_ok(l, &s[2], "scale") ||
      !vec_ok(l, &s[3], "saved mean") || !vec_ok(l, &s[4], "saved variance"))
    return;
  if (!sk_shape_eq(&s[0], &s[1])) {
    char b0[256], b1[256];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "x and y_backprop must have same shape, but x has shape %s and "
            "y_backprop has shape %s",
            sk_shape_str(&s[1], b0, sizeof(b0)),
            sk_shape_str(&s[0], b1, sizeof(b1)));
    return;
  }
  int64_t c = st->cfirst ? s[1].d[1] : s[1].d[s[1].nd - 1];
  if (!count_ok(l, &s[2], c, "", "scale") ||
      !count_ok(l, &s[3], c, "", "reserve_space_1") ||
      !count_ok(l, &s[4], c, "", "reserve_space_2"))
    return;
  sk_shape cs = {1, {c}, c}, none = {1, {0}, 0};
  TF_Tensor* dx = sk_output(l, 0, &s[1]);
  TF_Tensor* dscale = sk_output(l, 1, &cs);
  TF_Tensor* doffset = sk_output(l, 2, &cs);
  sk_output(l, 3, &none);
  sk_output(l, 4, &none);
  if (!sk_ok(l) || c == 0) return;
  bn_args* a = new_args(l, st, &s[1], TF_TensorType(in[1]));
  if (a == NULL) return;
  a->grad = true;
  a->dy = sk_data(in[0]);
  a->x = sk_data(in[1]);
  a->scale = sk_data(in[2]);
  a->mean_in = sk_data(in[3]);
  a->var_in = sk_data(in[4]);
  a->y = sk_mdata(dx);
  a->o_mean = sk_mdata(dscale);
  a->o_var = sk_mdata(doffset);
  sk_work(l, grad_run, "FusedBatchNormGrad");
}

/* ---- attributes and registration (construction) ------------------------ */

static void* create(TF_OpKernelConstruction* c, int version, bool grad) {
  bn_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  st->version = version;
  char fmt[16];
  st->factor = 1.0f;
  bool ok = sk_attr_float(c, "epsilon", &st->eps) &&
            (grad || sk_attr_float(c, "exponential_avg_factor", &st->factor)) &&
            sk_attr_bool(c, "is_training", &st->training) &&
            sk_attr_string(c, "data_format", fmt, sizeof(fmt));
  if (ok) {
    if (strcmp(fmt, "NCHW") == 0 || strcmp(fmt, "NCDHW") == 0) {
      st->cfirst = true;
    } else if (strcmp(fmt, "NHWC") != 0 && strcmp(fmt, "NDHWC") != 0) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT, "Invalid data format");
      ok = false;
    }
  }
  if (!ok) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, grad ? grad_compute : fwd_compute, st, free);
}

static void* fwd1(TF_OpKernelConstruction* c) {
  return create(c, 1, false);
}
static void* fwd2(TF_OpKernelConstruction* c) {
  return create(c, 2, false);
}
static void* fwd3(TF_OpKernelConstruction* c) {
  return create(c, 3, false);
}
static void* grad1(TF_OpKernelConstruction* c) {
  return create(c, 1, true);
}
static void* grad2(TF_OpKernelConstruction* c) {
  return create(c, 2, true);
}
static void* grad3(TF_OpKernelConstruction* c) {
  return create(c, 3, true);
}

static const TF_DataType kFloat[] = {TF_FLOAT, 0};
static const TF_DataType kT[] = {TF_FLOAT, TF_HALF, TF_BFLOAT16, 0};

static const sk_op kOps[] = {
    {"FusedBatchNorm", fwd1, "T", kFloat, NULL},
    {"FusedBatchNormV2", fwd2, "T", kT, NULL, "U", kFloat},
    {"FusedBatchNormV3", fwd3, "T", kT, NULL, "U", kFloat},
    {"FusedBatchNormGrad", grad1, "T", kFloat, NULL},
    {"FusedBatchNormGradV2", grad2, "T", kT, NULL, "U", kFloat},
    {"FusedBatchNormGradV3", grad3, "T", kT, NULL, "U", kFloat},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_batchnorm(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
