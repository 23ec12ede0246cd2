/*
 * einsum.c - Einsum with two operands (float32, float64) as one batched
 * gemm between transposes.
 *
 * Every label of "A,B->C" is one of
 *   batch  in A, B and C       -> the gemm's batch
 *   m      in A and C only     -> the gemm's rows
 *   n      in B and C only     -> the gemm's columns
 *   k      in A and B, not C   -> contracted
 * A is copied, transposed, to [batch, m, k] and B to [batch, k, n] (no copy
 * when an operand already is in that order), one gemm per batch entry gives
 * [batch, m, n], and a last transpose writes C's order (no copy when C is
 * [batch, m, n]). Labels are ordered as C lists them (k: as A does). This is
 * every equation Keras's EinsumDense and MultiHeadAttention use
 * ("abc,cd->abd", "abc,cde->abde", "aecd,abcd->acbe", "acbe,aecd->abcd",
 * ...). Equations outside it - one or three operands, an ellipsis, a label
 * repeated in one operand (a diagonal), a label summed out of only one
 * operand, operand dimensions that differ for one label (broadcasting) -
 * fail with InvalidArgument on TF's thread, never with a wrong answer.
 *
 * Determinism: each gemm computes one whole batch entry, whatever the
 * thread split, and the transposes are copies.
 *
 * Thread contract: ein_create at construction, ein_compute on TF's thread
 * (parses nothing: the plan comes from the equation parsed at
 * construction, checked against the shapes here), ein_run and helpers on
 * the stream worker, reading only an ein_args.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/framework/sk.h"

#define EIN_MAX 16 /* labels per operand (SK_MAX_DIMS) */

typedef struct ein_state {
  char eq[128];
  int na, nb, nc; /* ranks of A, B, C */
  char la[EIN_MAX], lb[EIN_MAX], lc[EIN_MAX];
  /* Labels of each role in plan order. */
  int nbat, nm, nn, nk;
  char bat[EIN_MAX], m[EIN_MAX], n[EIN_MAX], k[EIN_MAX];
} ein_state;

/* A transpose: dst[i] = src[permuted index i]. */
typedef struct ein_perm {
  int nd;
  int64_t dd[EIN_MAX];  /* dst dims */
  int64_t sst[EIN_MAX]; /* src stride of each dst dim */
  int64_t n;
  bool identity;
} ein_perm;

typedef struct ein_args {
  TF_DataType dt;
  size_t es;
  const void *a, *b;
  void* c;
  void *ta, *tb, *tc; /* transposed copies (NULL: not needed) */
  ein_perm pa, pb, pc;
  int64_t batch, m, n, k;
} ein_args;

/* ---- worker ------------------------------------------------------------- */

typedef struct perm_job {
  const ein_perm* p;
  const char* src;
  char* dst;
  size_t es;
} perm_job;

/* Rows [lo, hi) of dst viewed as [rows, last dim]. */
static void perm_rows(void* arg, int64_t lo, int64_t hi) {
  const perm_job* j = arg;
  const ein_perm* p = j->p;
  int last = p->nd - 1;
  int64_t inner = p->dd[last], st = p->sst[last];
  for (int64_t r = lo; r < hi; r++) {
    int64_t off = 0, q = r;
    for (int d = last - 1; d >= 0; d--) {
      off += (q % p->dd[d]) * p->sst[d];
      q /= p->dd[d];
    }
    char* dst = j->dst + (size_t)(r * inner) * j->es;
    if (j->es == 4) {
      const float* s = (const float*)j->src + off;
      for (int64_t i = 0; i < inner; i++) ((float*)dst)[i] = s[i * st];
    } else {
      const double* s = (const double*)j->src + off;
      for (int64_t i = 0; i < inner; i++) ((double*)dst)[i] = s[i * st];
    }
  }
}

static void permute(const ein_perm* p, const void* src, void* dst, size_t es) {
  perm_job j = {p, src, dst, es};
  int64_t inner = p->dd[p->nd - 1];
  int64_t rows = inner ? p->n / inner : 0;
  int64_t grain = inner >= 16384 ? 1 : 16384 / (inner ? inner : 1);
  sim_parallel_for(rows, grain, perm_rows, &j);
}

typedef struct gemm_job {
  const ein_args* a;
  const char *x, *y;
  char* z;
} gemm_job;

static void gemm_range(void* arg, int64_t lo, int64_t hi) {
  const gemm_job* j = arg;
  const ein_args* a = j->a;
  size_t xs = (size_t)(a->m * a->k) * a->es, ys = (size_t)(a->k * a->n) * a->es;
  size_t zs = (size_t)(a->m * a->n) * a->es;
  for (int64_t i = lo; i < hi; i++)
    sa_gemm(sk_sa_dtype(a->dt), false, false, a->m, a->n, a->k, j->x + i * xs,
            a->k, j->y + i * ys, a->n, 0., j->z + i * zs, a->n, NULL);
}

static void ein_run(sk_launch* l, void* args) {
  (void)l;
  const ein_args* a = args;
  const void* x = a->a;
  const void* y = a->b;
  if (a->ta != NULL) {
    permute(&a->pa, a->a, a->ta, a->es);
    x = a->ta;
  }
  if (a->tb != NULL) {
    permute(&a->pb, a->b, a->tb, a->es);
    y = a->tb;
  }
  void* z = a->tc != NULL ? a->tc : a->c;
  if (a->k == 0) {
    memset(z, 0, (size_t)(a->batch * a->m * a->n) * a->es);
  } else {
    gemm_job j = {a, x, y, z};
    int64_t mnk = a->m * a->n * a->k;
    int64_t grain = mnk >= 262144 ? 1 : 262144 / mnk;
    sim_parallel_for(a->batch, grain, gemm_range, &j);
  }
  if (a->tc != NULL) permute(&a->pc, a->tc, a->c, a->es);
}

/* ---- planning (TF thread) ----------------------------------------------- */

static int find(const char* s, int n, char c) {
  for (int i = 0; i < n; i++)
    if (s[i] == c) return i;
  return -1;
}

/* The transpose taking an operand with labels `src` (dims sd, `count`
 * elements: the count of a checked shape, as sd's own product in another
 * order need not be computable: arith/dims.h) to the label order `order`
 * (all n labels of src). */
static void plan_perm(ein_perm* p, const char* src, const int64_t* sd, int n,
                      int64_t count, const char* order) {
  int64_t st[EIN_MAX];
  sa_dims_strides(sd, n, st); /* sd: an operand's or the output's dims */
  p->nd = n;
  p->n = count;
  p->identity = true;
  for (int i = 0; i < n; i++) {
    int j = find(src, n, order[i]);
    p->dd[i] = sd[j];
    p->sst[i] = st[j];
    if (j != i) p->identity = false;
  }
  if (n == 0) { /* a scalar: one row of one element */
    p->nd = 1;
    p->dd[0] = 1;
    p->sst[0] = 1;
  }
}

static int64_t label_dim(const ein_state* st, const sk_shape* as,
                         const sk_shape* bs, char c) {
  int i = find(st->la, st->na, c);
  return i >= 0 ? as->d[i] : bs->d[find(st->lb, st->nb, c)];
}

static void ein_compute(sk_launch* l, void* state) {
  const ein_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* y = sk_input(l, 1);
  sk_shape as, bs;
  if (x == NULL || y == NULL || !sk_shape_of(l, x, &as) ||
      !sk_shape_of(l, y, &bs))
    return;
  const sk_shape* sh[2] = {&as, &bs};
  const int ns[2] = {st->na, st->nb};
  for (int i = 0; i < 2; i++) {
    if (sh[i]->nd != ns[i]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Input %d to einsum has rank %d but the equation %s gives it %d "
              "labels",
              i, sh[i]->nd, st->eq, ns[i]);
      return;
    }
  }
  for (int i = 0; i < st->na; i++) {
    int j = find(st->lb, st->nb, st->la[i]);
    if (j >= 0 && as.d[i] != bs.d[j]) {
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Einsum label '%c' has dimension %lld in input 0 and %lld in "
              "input 1 (simdev does not broadcast Einsum operands)",
              st->la[i], (long long)as.d[i], (long long)bs.d[j]);
      return;
    }
  }
  sk_shape cs = {st->nc, {0}, 1};
  for (int i = 0; i < st->nc; i++) cs.d[i] = label_dim(st, &as, &bs, st->lc[i]);
  if (!sk_shape_count(l, &cs)) return;
  /* Products of dims of valid shapes, but not necessarily of leading ones
   * (an empty operand's need not fit int64): an overflow counts as too
   * large for BLAS. */
  int64_t nbat = 1, m = 1, n = 1, k = 1;
  bool big = false;
  for (int i = 0; i < st->nbat; i++)
    big |= !sa_mul_ok(nbat, label_dim(st, &as, &bs, st->bat[i]), &nbat);
  for (int i = 0; i < st->nm; i++)
    big |= !sa_mul_ok(m, label_dim(st, &as, &bs, st->m[i]), &m);
  for (int i = 0; i < st->nn; i++)
    big |= !sa_mul_ok(n, label_dim(st, &as, &bs, st->n[i]), &n);
  for (int i = 0; i < st->nk; i++)
    big |= !sa_mul_ok(k, label_dim(st, &as, &bs, st->k[i]), &k);
  if (big || m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "simdev: Einsum matrix dimensions exceed the BLAS interface's int "
            "range");
    return;
  }
  TF_Tensor* c = sk_output(l, 0, &cs);
  if (!sk_ok(l) || cs.n == 0) return;
  ein_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  a->dt = TF_TensorType(x);
  a->es = a->dt == TF_FLOAT ? 4 : 8;
  a->a = sk_data(x);
  a->b = sk_data(y);
  a->c = sk_mdata(c);
  a->batch = nbat;
  a->m = m;
  a->n = n;
  a->k = k;
  char oa[EIN_MAX * 3], ob[EIN_MAX * 3], oc[EIN_MAX * 3];
  int p = 0;
  memcpy(oa + p, st->bat, st->nbat), p += st->nbat;
  memcpy(oa + p, st->m, st->nm), p += st->nm;
  memcpy(oa + p, st->k, st->nk);
  p = 0;
  memcpy(ob + p, st->bat, st->nbat), p += st->nbat;
  memcpy(ob + p, st->k, st->nk), p += st->nk;
  memcpy(ob + p, st->n, st->nn);
  p = 0;
  memcpy(oc + p, st->bat, st->nbat), p += st->nbat;
  memcpy(oc + p, st->m, st->nm), p += st->nm;
  memcpy(oc + p, st->n, st->nn);
  plan_perm(&a->pa, st->la, as.d, st->na, as.n, oa);
  plan_perm(&a->pb, st->lb, bs.d, st->nb, bs.n, ob);
  /* pc: from the gemm's [batch, m, n] order to C's */
  int64_t gd[EIN_MAX];
  for (int i = 0; i < st->nc; i++) gd[i] = label_dim(st, &as, &bs, oc[i]);
  plan_perm(&a->pc, oc, gd, st->nc, cs.n, st->lc);
  size_t es = a->es;
  if (!a->pa.identity && a->pa.n > 0) a->ta = sk_temp_n(l, a->pa.n, es);
  if (!a->pb.identity && a->pb.n > 0) a->tb = sk_temp_n(l, a->pb.n, es);
  if (!a->pc.identity) a->tc = sk_temp_n(l, cs.n, es);
  if (!sk_ok(l)) return;
  sk_work(l, ein_run, "Einsum");
}

/* ---- the equation (construction) ---------------------------------------- */

static bool unsupported(TF_OpKernelConstruction* c, const char* eq,
                        const char* why) {
  sk_construction_fail(c, TF_INVALID_ARGUMENT,
                       "simdev's Einsum does not support the equation '%s': "
                       "%s",
                       eq, why);
  return false;
}

/* Splits "A,B->C" into the three label strings (spaces dropped). */
static bool parse(TF_OpKernelConstruction* c, ein_state* st) {
  char* part[3] = {st->la, st->lb, st->lc};
  int* len[3] = {&st->na, &st->nb, &st->nc};
  int which = 0;
  const char* eq = st->eq;
  for (const char* s = eq; *s; s++) {
    if (*s == ' ') continue;
    if (*s == ',') {
      if (which != 0)
        return unsupported(c, eq, "only two operands are supported");
      which = 1;
    } else if (s[0] == '-' && s[1] == '>') {
      if (which != 1)
        return unsupported(c, eq, "only two operands are supported");
      which = 2;
      s++;
    } else if (*s == '.') {
      return unsupported(c, eq, "an ellipsis is not supported");
    } else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')) {
      if (*len[which] >= EIN_MAX)
        return unsupported(c, eq, "more than 16 labels in one operand");
      if (find(part[which], *len[which], *s) >= 0)
        return unsupported(c, eq, "a label repeats within one operand");
      part[which][(*len[which])++] = *s;
    } else {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "Invalid character '%c' in Einsum equation '%s'", *s,
                           eq);
      return false;
    }
  }
  if (which != 2)
    return unsupported(c, eq,
                       "an explicit output ('->') and two operands "
                       "are required");
  for (int i = 0; i < st->nc; i++) {
    char x = st->lc[i];
    bool in_a = find(st->la, st->na, x) >= 0,
         in_b = find(st->lb, st->nb, x) >= 0;
    if (!in_a && !in_b) {
      sk_construction_fail(c, TF_INVALID_ARGUMENT,
                           "Einsum output label '%c' of '%s' appears in no "
                           "input",
                           x, eq);
      return false;
    }
    if (in_a && in_b)
      st->bat[st->nbat++] = x;
    else if (in_a)
      st->m[st->nm++] = x;
    else
      st->n[st->nn++] = x;
  }
  for (int i = 0; i < st->na; i++) {
    char x = st->la[i];
    if (find(st->lc, st->nc, x) >= 0) continue;
    if (find(st->lb, st->nb, x) < 0)
      return unsupported(c, eq, "a label is summed out of one operand only");
    st->k[st->nk++] = x;
  }
  for (int i = 0; i < st->nb; i++) {
    char x = st->lb[i];
    if (find(st->lc, st->nc, x) < 0 && find(st->la, st->na, x) < 0)
      return unsupported(c, eq, "a label is summed out of one operand only");
  }
  return true;
}

static void* ein_create(TF_OpKernelConstruction* c) {
  ein_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  if (!sk_attr_string(c, "equation", st->eq, sizeof(st->eq)) || !parse(c, st)) {
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, ein_compute, st, free);
}

static const TF_DataType kFloatTypes[] = {TF_FLOAT, TF_DOUBLE, 0};

static const sk_op kOps[] = {
    {"Einsum", ein_create, "T", kFloatTypes, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_einsum(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
