/*
 * apply.h - the optimizers' element updates (apply_math.c), shared by the
 * dense and the sparse training kernels of apply.c; for this folder only
 * (prefix skv_).
 *
 * One update function per optimizer, over a range of elements: the dense
 * op runs it over the whole variable, the sparse op over the row of each
 * index, in the indices' order (a duplicate index updates its row twice,
 * as TF's CPU kernels do).
 *
 * Numerics: every operation is TF CPU's (Eigen's) operation, in TF's order,
 * rounded to the variable's dtype after each step: computed in double and
 * rounded once to float32 (for + - * / and sqrt that equals float32's own
 * correctly rounded result), then for float16 rounded again to nearest
 * even, as Eigen's half does (float32 arithmetic, rounded per operation).
 * rsqrt(x) is 1 / sqrt(x), two roundings (Eigen's scalar path; its
 * vectorized path may differ by an ulp); pow and exp are libm's powf /
 * expf for float32 and float16 (Eigen's scalar functions; its vectorized
 * ones may differ by an ulp), pow / exp for float64.
 *
 * Thread contract: skv_apply_prep and skv_apply_range run on the stream
 * worker (and sim_parallel_for's helpers, on disjoint ranges); they touch
 * only the memory the skv_apply names.
 */
#ifndef SIMDEV_KERNELS_VARIABLES_APPLY_H_
#define SIMDEV_KERNELS_VARIABLES_APPLY_H_

#include <stdbool.h>
#include <stdint.h>

#include "kernels/framework/sk.h"

typedef enum skv_opt {
  SKV_GRADIENT_DESCENT,
  SKV_MOMENTUM,
  SKV_KERAS_MOMENTUM,
  SKV_ADAM,
  SKV_AMSGRAD,
  SKV_ADAMAX,
  SKV_RMSPROP,
  SKV_CENTERED_RMSPROP,
  SKV_ADAGRAD,
  SKV_ADAGRAD_V2,
  SKV_ADADELTA,
  SKV_PROXIMAL_ADAGRAD,
  SKV_FTRL,
  SKV_FTRL_V2,
  SKV_ADDSIGN,
  SKV_POWERSIGN,
} skv_opt;

/* The most variables an update touches (var and its slots) and scalar
 * hyperparameters it reads (the derived ones follow them in skv_hp). */
#define SKV_MAX_VARS 4
#define SKV_MAX_SCALARS 6
#define SKV_HP 16

/* The attributes that change an update. */
enum {
  SKV_NESTEROV = 1,     /* use_nesterov */
  SKV_UPDATE_SLOTS = 2, /* update_slots (Adagrad) */
  SKV_MULTIPLY_LR = 4,  /* multiply_linear_by_lr (Ftrl) */
};

/* One update, as queued on the stream (copied by sk_work_now). */
typedef struct skv_apply {
  skv_opt opt;
  TF_DataType dt; /* TF_HALF, TF_FLOAT or TF_DOUBLE */
  unsigned flags;
  int nvars, nscalars;
  void* x[SKV_MAX_VARS];                /* var first, then its slots */
  const void* g;                        /* the gradient */
  const void* scalars[SKV_MAX_SCALARS]; /* device memory: read on the stream */
  /* Sparse: the rows to update, in order (host memory), NULL for dense. */
  const void* indices;
  TF_DataType index_dt;
  int64_t nindices, inner; /* sparse: N and the elements of a row */
  int64_t n;               /* dense: the elements */
} skv_apply;

/* The hyperparameters as values of the dtype (h[0..nscalars) the op's
 * scalars in input order), then the derived ones the update needs
 * (Adam's alpha, 1 - beta1, ...), each rounded as TF rounds it. */
typedef struct skv_hp {
  double h[SKV_HP];
} skv_hp;

/* Reads a's scalars (device memory; on the stream) and derives the rest. */
void skv_apply_prep(const skv_apply* a, skv_hp* hp);

/* The update of elements [xo, xo + n) of the variables with gradient
 * elements [go, go + n). */
void skv_apply_range(const skv_apply* a, const skv_hp* hp, int64_t xo,
                     int64_t go, int64_t n);

#endif /* SIMDEV_KERNELS_VARIABLES_APPLY_H_ */
