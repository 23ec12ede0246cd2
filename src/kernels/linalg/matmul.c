/*
 * matmul.c - MatMul and BatchMatMulV2 (float32, float64; float16 and
 * bfloat16 through float32) on OpenBLAS.
 *
 * Both ops are one kernel: a (possibly broadcast) batch of row-major matrix
 * products C[b] = op(A[b]) x op(B[b]), where op transposes or not (the
 * matrices are real, so adjoint = transpose). MatMul is the batch of one.
 *
 * How the batch runs (the run function, on the stream worker):
 *   - one gemm for the whole batch when B is a single matrix shared by every
 *     batch entry and A is not transposed: the A matrices are then rows of one
 *     tall [batch*M, K] matrix (the common "dense layer on a sequence" case);
 *   - otherwise one gemm per batch entry; small products (where OpenBLAS
 *     stays single-threaded anyway) are spread over sim_parallel_for. Every
 *     entry is computed by one gemm call whatever the split, so results do
 *     not depend on the thread count.
 * A product with K == 0 is all zeros (then the epilogue): sa_gemm writes
 * them, as BLAS need not. Empty outputs never reach the stream.
 *
 * _FusedMatMul (TF's op for MatMul + BiasAdd [+ activation], written by the
 * graph optimizer's remapper) is MatMul with fused.h's epilogue handed to
 * sa_gemm, which applies it to each block of rows right after the
 * block's product. Its OpDef allows float32 (and 16-bit floats, which
 * SIMDEV does not fuse), not float64.
 *
 * Thread contract: compute functions run on TF's thread and validate
 * everything; mm_run and its helpers run on the worker and read only mm_args.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/f16.h"
#include "kernels/framework/fused.h"
#include "kernels/framework/sk.h"

/* Per-product multiply-adds below which sa_gemm keeps a product on one
 * thread: batches of such products are spread over the cores instead. */
#define MM_SMALL_MNK (4 * 65536)

typedef struct mm_attrs {
  bool ta, tb; /* transpose_a/b (MatMul) or adj_x/y (BatchMatMulV2) */
  bool fused;  /* _FusedMatMul: input 2 is the bias, fx the epilogue */
  skf_attrs fx;
} mm_attrs;

typedef struct mm_args {
  TF_DataType dt;
  const void* a;
  const void* b;
  void* c;
  bool ta, tb;
  int64_t m, n, k;
  /* Batch: nb output matrices; output batch dims and, per dim, how far the
   * A / B matrix index moves (0 where that operand is broadcast). */
  int64_t nb;
  int nbd;
  int64_t bdim[SK_MAX_DIMS];
  int64_t astr[SK_MAX_DIMS], bstr[SK_MAX_DIMS];
  /* float16 / bfloat16 (t16 != 0): a, b, c above are float32 scratch; the
   * operands are widened from a16 / b16 first and c is rounded (to nearest
   * even) into c16 last. na, nbe, nc: element counts. */
  TF_DataType t16;
  const void *a16, *b16;
  void* c16;
  int64_t na, nbe, nc;
  const sa_epi* ep; /* _FusedMatMul (points at epi; never with t16) */
  sa_epi epi;
} mm_args;

/* ---- the arithmetic (worker) ------------------------------------------- */

static void gemm(TF_DataType dt, bool ta, bool tb, int64_t m, int64_t n,
                 int64_t k, const void* a, const void* b, void* c,
                 const sa_epi* ep) {
  sa_gemm(sk_sa_dtype(dt), ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n, 0., c,
          n, ep);
}

/* Matrix indices of A and B for output matrix i of the batch. */
static void batch_index(const mm_args* a, int64_t i, int64_t* ia, int64_t* ib) {
  *ia = *ib = 0;
  for (int d = a->nbd - 1; d >= 0; d--) {
    int64_t q = i % a->bdim[d];
    i /= a->bdim[d];
    *ia += q * a->astr[d];
    *ib += q * a->bstr[d];
  }
}

static void mm_range(void* arg, int64_t lo, int64_t hi) {
  const mm_args* a = arg;
  size_t es = a->dt == TF_FLOAT ? 4 : 8;
  size_t asz = (size_t)(a->m * a->k) * es, bsz = (size_t)(a->k * a->n) * es;
  size_t csz = (size_t)(a->m * a->n) * es;
  for (int64_t i = lo; i < hi; i++) {
    int64_t ia, ib;
    batch_index(a, i, &ia, &ib);
    gemm(a->dt, a->ta, a->tb, a->m, a->n, a->k,
         (const char*)a->a + (size_t)ia * asz,
         (const char*)a->b + (size_t)ib * bsz, (char*)a->c + (size_t)i * csz,
         a->ep);
  }
}

static bool b_shared(const mm_args* a) {
  for (int d = 0; d < a->nbd; d++)
    if (a->bstr[d] != 0) return false;
  return true;
}

typedef struct cvt_job {
  TF_DataType t16;
  const void* src;
  void* dst;
  bool widen; /* t16 -> float32, else float32 -> t16 */
} cvt_job;

static void cvt_range(void* arg, int64_t lo, int64_t hi) {
  const cvt_job* j = arg;
  for (int64_t i = lo; i < hi; i++) {
    if (j->widen)
      ((float*)j->dst)[i] = (float)skh_load(j->t16, j->src, i);
    else
      skh_store(j->t16, j->dst, i, ((const float*)j->src)[i]);
  }
}

static void convert(TF_DataType t16, const void* src, void* dst, int64_t n,
                    bool widen) {
  cvt_job j = {t16, src, dst, widen};
  sim_parallel_for(n, 65536, cvt_range, &j);
}

static void mm_products(mm_args* a);

static void mm_run(sk_launch* l, void* args) {
  (void)l;
  mm_args* a = args;
  if (a->t16 == 0) {
    mm_products(a);
    return;
  }
  convert(a->t16, a->a16, (void*)a->a, a->na, true);
  convert(a->t16, a->b16, (void*)a->b, a->nbe, true);
  mm_products(a);
  convert(a->t16, a->c, a->c16, a->nc, false);
}

static void mm_products(mm_args* a) {
  if (a->k == 0) { /* sa_gemm writes zeros (then ep) for an empty sum */
    gemm(a->dt, false, false, a->nb * a->m, a->n, 0, NULL, NULL, a->c, a->ep);
    return;
  }
  if (a->nb > 1 && !a->ta && b_shared(a)) {
    gemm(a->dt, false, a->tb, a->nb * a->m, a->n, a->k, a->a, a->b, a->c,
         a->ep);
    return;
  }
  int64_t mnk = a->m * a->n * a->k;
  if (a->nb > 1 && mnk <= MM_SMALL_MNK)
    sim_parallel_for(a->nb, MM_SMALL_MNK / mnk, mm_range, a);
  else
    mm_range(a, 0, a->nb);
}

/* ---- validation and launch (TF thread) ---------------------------------- */

static bool blas_dims_ok(sk_launch* l, int64_t m, int64_t n, int64_t k) {
  if (m <= INT_MAX && n <= INT_MAX && k <= INT_MAX) return true;
  sk_fail(l, TF_INVALID_ARGUMENT,
          "simdev: matrix dimensions [%lld,%lld,%lld] exceed the BLAS "
          "interface's int range",
          (long long)m, (long long)n, (long long)k);
  return false;
}

/* Fills the output batch of `a` from the batch dims of x and y (all but the
 * last two); numpy broadcasting. */
static bool broadcast_batch(sk_launch* l, const sk_shape* x, const sk_shape* y,
                            mm_args* a, sk_shape* out) {
  int bx = x->nd - 2, by = y->nd - 2;
  int nbd = bx > by ? bx : by;
  int64_t sa = 1, sb = 1; /* matrices per step of the current dim */
  a->nbd = nbd;
  a->nb = 1;
  for (int d = nbd - 1; d >= 0; d--) {
    int dx = d - (nbd - bx), dy = d - (nbd - by);
    int64_t ex = dx >= 0 ? x->d[dx] : 1, ey = dy >= 0 ? y->d[dy] : 1;
    if (ex != ey && ex != 1 && ey != 1) {
      char s1[256], s2[256];
      sk_fail(l, TF_INVALID_ARGUMENT,
              "In[0] and In[1] must have compatible batch dimensions: %s vs. "
              "%s",
              sk_shape_str(x, s1, sizeof(s1)), sk_shape_str(y, s2, sizeof(s2)));
      return false;
    }
    int64_t e = ex == 1 ? ey : ex;
    a->bdim[d] = e;
    a->astr[d] = ex == 1 ? 0 : sa;
    a->bstr[d] = ey == 1 ? 0 : sb;
    /* Unsigned: these may wrap for an empty operand or an output that
     * mm_launch's sk_shape_count then refuses; they are used only when
     * neither happened, and then they fit int64. */
    sa = (int64_t)((uint64_t)sa * (uint64_t)ex);
    sb = (int64_t)((uint64_t)sb * (uint64_t)ey);
    out->d[d] = e;
    a->nb = (int64_t)((uint64_t)a->nb * (uint64_t)e);
  }
  out->nd = nbd + 2;
  return true;
}

/* Shared by both ops once the ranks are known to be >= 2. */
static void mm_launch(sk_launch* l, const mm_attrs* at, TF_Tensor* x,
                      TF_Tensor* y, const sk_shape* xs, const sk_shape* ys,
                      const char* label) {
  mm_args tmp = {0};
  sk_shape out;
  if (!broadcast_batch(l, xs, ys, &tmp, &out)) return;
  int64_t xr = xs->d[xs->nd - 2], xc = xs->d[xs->nd - 1];
  int64_t yr = ys->d[ys->nd - 2], yc = ys->d[ys->nd - 1];
  int64_t kx = at->ta ? xr : xc, ky = at->tb ? yc : yr;
  if (kx != ky) {
    char s1[256], s2[256];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Matrix size-incompatible: In[0]: %s, In[1]: %s",
            sk_shape_str(xs, s1, sizeof(s1)), sk_shape_str(ys, s2, sizeof(s2)));
    return;
  }
  tmp.m = at->ta ? xc : xr;
  tmp.n = at->tb ? yr : yc;
  tmp.k = kx;
  out.d[out.nd - 2] = tmp.m;
  out.d[out.nd - 1] = tmp.n;
  /* The batch dims lead: a valid count makes nb * m fit int64 too. */
  if (!sk_shape_count(l, &out) ||
      !blas_dims_ok(l, tmp.nb * tmp.m, tmp.n, tmp.k))
    return;
  TF_Tensor* c = sk_output(l, 0, &out);
  if (at->fused &&
      !skf_bias(l, 2, tmp.n, &out, &at->fx, TF_TensorType(x), &tmp.epi))
    return;
  if (!sk_ok(l) || out.n == 0) return;
  mm_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  *a = tmp;
  a->ep = at->fused ? &a->epi : NULL;
  a->dt = TF_TensorType(x);
  a->a = sk_data(x);
  a->b = sk_data(y);
  a->c = sk_mdata(c);
  if (a->dt == TF_HALF || a->dt == TF_BFLOAT16) {
    /* GEMM in float32 on widened copies, as TF's CPU kernels do */
    a->t16 = a->dt;
    a->dt = TF_FLOAT;
    a->a16 = a->a;
    a->b16 = a->b;
    a->c16 = a->c;
    a->na = xs->n;
    a->nbe = ys->n;
    a->nc = out.n;
    a->a = sk_temp_n(l, xs->n, 4);
    a->b = sk_temp_n(l, ys->n, 4);
    a->c = sk_temp_n(l, out.n, 4);
    if (!sk_ok(l)) return;
  }
  a->ta = at->ta;
  a->tb = at->tb;
  sk_work(l, mm_run, label);
}

static bool inputs(sk_launch* l, TF_Tensor** x, TF_Tensor** y, sk_shape* xs,
                   sk_shape* ys) {
  *x = sk_input(l, 0);
  *y = sk_input(l, 1);
  return *x != NULL && *y != NULL && sk_shape_of(l, *x, xs) &&
         sk_shape_of(l, *y, ys);
}

static void matmul_compute(sk_launch* l, void* state) {
  TF_Tensor *x, *y;
  sk_shape xs, ys;
  if (!inputs(l, &x, &y, &xs, &ys)) return;
  /* TF's own CPU MatMul kernel's checks and words (oneDNN's differ). */
  if (xs.nd != ys.nd) {
    char b0[256], b1[256];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "In[0] and In[1] has different ndims: %s vs. %s",
            sk_shape_str(&xs, b0, sizeof(b0)),
            sk_shape_str(&ys, b1, sizeof(b1)));
    return;
  }
  if (xs.nd != 2) {
    sk_fail(l, TF_INVALID_ARGUMENT, "In[0] and In[1] ndims must be == 2: %d",
            xs.nd);
    return;
  }
  mm_launch(l, state, x, y, &xs, &ys,
            ((const mm_attrs*)state)->fused ? "_FusedMatMul" : "MatMul");
}

static void batch_matmul_compute(sk_launch* l, void* state) {
  TF_Tensor *x, *y;
  sk_shape xs, ys;
  if (!inputs(l, &x, &y, &xs, &ys)) return;
  for (int i = 0; i < 2; i++) {
    const sk_shape* s = i ? &ys : &xs;
    if (s->nd < 2) {
      sk_fail(l, TF_INVALID_ARGUMENT, "In[%d] ndims must be >= 2: %d", i,
              s->nd);
      return;
    }
  }
  mm_launch(l, state, x, y, &xs, &ys, "BatchMatMulV2");
}

/* ---- kernels and registration ------------------------------------------- */

static void* create(TF_OpKernelConstruction* c, sk_compute_fn fn,
                    const char* attr_a, const char* attr_b, bool fused) {
  mm_attrs* at = sk_state_new(c, sizeof(*at));
  if (at == NULL) return NULL;
  at->fused = fused;
  if (!sk_attr_bool(c, attr_a, &at->ta) || !sk_attr_bool(c, attr_b, &at->tb) ||
      (fused && !skf_attrs_read(c, "MatMul", &at->fx))) {
    free(at);
    return NULL;
  }
  return sk_kernel_new(c, fn, at, free);
}

static void* matmul_create(TF_OpKernelConstruction* c) {
  return create(c, matmul_compute, "transpose_a", "transpose_b", false);
}

static void* fused_matmul_create(TF_OpKernelConstruction* c) {
  return create(c, matmul_compute, "transpose_a", "transpose_b", true);
}

static void* batch_matmul_create(TF_OpKernelConstruction* c) {
  return create(c, batch_matmul_compute, "adj_x", "adj_y", false);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, TF_HALF,
                                          TF_BFLOAT16, 0};

/* _FusedMatMul's OpDef: bfloat16, half, float; SIMDEV fuses float. */
static const TF_DataType kFusedTypes[] = {TF_FLOAT, 0};

static const sk_op kOps[] = {
    {"MatMul", matmul_create, "T", kFloatTypes, NULL},
    {"BatchMatMulV2", batch_matmul_create, "T", kFloatTypes, NULL},
    {"_FusedMatMul", fused_matmul_create, "T", kFusedTypes, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_matmul(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
