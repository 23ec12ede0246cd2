/*
 * ewprog.c - the table of fusable elementwise ops, the program parser, the
 * N-input broadcast plan and the blockwise evaluator (ewprog.h says what a
 * program is). No TensorFlow and no device_sim: the kernel
 * (fused_elementwise.c) splits the output over threads and calls the evaluator
 * on each range.
 *
 * Evaluation. The output range is cut into blocks of SA_EWPROG_BLOCK
 * elements; for each block the program runs instruction by instruction over
 * the whole block, each value on the stack a block of T. A push of an input
 * laid out like the output is a pointer into the input (no copy); any other
 * push gathers the block's elements through the input's broadcast strides.
 * The last instruction writes straight into the output. So every input of
 * the output's size and the output cross memory once (a broadcast input is
 * re-read, from cache when it is small), and the intermediates stay in the
 * thread's cache (16 blocks of 256 doubles: 32 KiB, on the thread's stack).
 *
 * The table is arith/ewops.h's rows, the rows cwise.c and cwise_binary.c
 * generate the unfused kernels from. Each op's block loop applies the op's
 * sa_cws_* function (arith/scalar.h), the one the unfused SIMDEV kernel
 * uses, in T: fused == unfused bit for bit.
 *
 * Thread contract: reentrant; the table is constant.
 */
#include "arith/ewprog.h"

#include <stdio.h>
#include <string.h>

/* Vectorize the block loops even at -O2, as cwise.h does for the unfused
 * loops (before the scalar functions, so both are compiled alike). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-loop-vectorize", "vect-cost-model=dynamic")
#endif

#include "arith/dims.h"
#include "arith/ewops.h"
#include "arith/scalar.h"

/* ---- block loops ----------------------------------------------------- */

/* z[i] = op(x[i]) or op(x[i], y[i]) for i < n; z may be x or y. */
typedef void (*ew_f32)(const float* x, const float* y, float* z, int n);
typedef void (*ew_f64)(const double* x, const double* y, double* z, int n);

#define EW_UNARY(op)                                                         \
  static void op##_u32(const float* x, const float* y, float* z, int n) {    \
    (void)y;                                                                 \
    for (int i = 0; i < n; i++) z[i] = sa_cws_##op##_f32(x[i]);              \
  }                                                                          \
  static void op##_u64(const double* x, const double* y, double* z, int n) { \
    (void)y;                                                                 \
    for (int i = 0; i < n; i++) z[i] = sa_cws_##op##_f64(x[i]);              \
  }

#define EW_BINARY(op)                                                        \
  static void op##_u32(const float* x, const float* y, float* z, int n) {    \
    for (int i = 0; i < n; i++) z[i] = sa_cws_##op##_f32(x[i], y[i]);        \
  }                                                                          \
  static void op##_u64(const double* x, const double* y, double* z, int n) { \
    for (int i = 0; i < n; i++) z[i] = sa_cws_##op##_f64(x[i], y[i]);        \
  }

/* One block loop pair per row of ewops.h (gradients are binary ops here). */
#define EW_U_LOOPS(Op, stem, ints) EW_UNARY(stem)
#define EW_B_LOOPS(Op, stem, ints) EW_BINARY(stem)
#define EW_G_LOOPS(Op, stem, shape, in0, in1) EW_BINARY(stem)
SA_EWOPS(EW_U_LOOPS, EW_B_LOOPS, EW_G_LOOPS)

/* ---- the table ------------------------------------------------------- */

typedef struct ew_entry {
  const char* name; /* TF's op name */
  int arity;
  ew_f32 f32;
  ew_f64 f64;
} ew_entry;

/* Every row of ewops.h, in its order: the float ops of cwise.c and
 * cwise_binary.c that are pure functions of their operands. Both kernel
 * files generate their kernels from the same rows, so the unfused kernel
 * of each exists on SIMDEV for float and double by construction
 * (tests/tf/test_kernels_fused_elementwise.py checks the registry). */
#define EW_U_ROW(Op, stem, ints) {#Op, 1, stem##_u32, stem##_u64},
#define EW_B_ROW(Op, stem, ints) {#Op, 2, stem##_u32, stem##_u64},
#define EW_G_ROW(Op, stem, shape, in0, in1) {#Op, 2, stem##_u32, stem##_u64},
static const ew_entry kTable[] = {SA_EWOPS(EW_U_ROW, EW_B_ROW, EW_G_ROW)};
#define EW_COUNT ((int)(sizeof(kTable) / sizeof(kTable[0])))

static int find_op(const char* s, size_t len) {
  for (int i = 0; i < EW_COUNT; i++)
    if (strlen(kTable[i].name) == len && memcmp(kTable[i].name, s, len) == 0)
      return i;
  return -1;
}

int sa_ewprog_arity(const char* tf_op) {
  if (tf_op == NULL) return -1;
  int i = find_op(tf_op, strlen(tf_op));
  return i < 0 ? -1 : kTable[i].arity;
}

int sa_ewprog_count(void) {
  return EW_COUNT;
}

const char* sa_ewprog_name(int i) {
  return i >= 0 && i < EW_COUNT ? kTable[i].name : NULL;
}

/* ---- parsing --------------------------------------------------------- */

/* "$k": k decimal without sign or leading zero; -1 if not of that form. */
static int parse_input(const char* s, size_t len) {
  if (len < 2 || len > 6 || s[0] != '$') return -1;
  if (s[1] == '0' && len > 2) return -1;
  int k = 0;
  for (size_t i = 1; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    k = k * 10 + (s[i] - '0');
  }
  return k;
}

bool sa_ewprog_parse(const char* program, int n_inputs, sa_ewprog* out,
                     char* err, size_t errlen) {
#define FAIL(...)                       \
  do {                                  \
    snprintf(err, errlen, __VA_ARGS__); \
    return false;                       \
  } while (0)
  if (errlen > 0) err[0] = '\0';
  memset(out, 0, sizeof(*out));
  if (n_inputs < 1 || n_inputs > SA_EWPROG_MAX_INPUTS)
    FAIL("N = %d inputs, must be in [1, %d]", n_inputs, SA_EWPROG_MAX_INPUTS);
  out->ninputs = n_inputs;
  size_t total = strlen(program);
  if (total == 0) FAIL("empty program");
  if (total > SA_EWPROG_MAX_LEN)
    FAIL("program of %zu bytes, longer than the limit of %d", total,
         SA_EWPROG_MAX_LEN);
  int depth = 0, tok = 0;
  const char* p = program;
  for (;;) {
    const char* sp = strchr(p, ' ');
    size_t len = sp != NULL ? (size_t)(sp - p) : strlen(p);
    long pos = (long)(p - program);
    if (len == 0)
      FAIL("empty token %d at byte %ld (tokens are separated by one space)",
           tok, pos);
    if (out->nins == SA_EWPROG_MAX_INS)
      FAIL("token %d '%.*s' at byte %ld: more than %d tokens", tok, (int)len, p,
           pos, SA_EWPROG_MAX_INS);
    sa_ewprog_ins* in = &out->ins[out->nins];
    if (p[0] == '$') {
      int k = parse_input(p, len);
      if (k < 0)
        FAIL("token %d '%.*s' at byte %ld: not an input ($k, k a number)", tok,
             (int)len, p, pos);
      if (k >= n_inputs)
        FAIL("token %d '%.*s' at byte %ld: input %d out of range (N = %d)", tok,
             (int)len, p, pos, k, n_inputs);
      if (depth == SA_EWPROG_MAX_STACK)
        FAIL("token %d '%.*s' at byte %ld: stack deeper than %d", tok, (int)len,
             p, pos, SA_EWPROG_MAX_STACK);
      in->op = -1;
      in->arg = (int16_t)k;
      depth++;
    } else {
      int op = find_op(p, len);
      if (op < 0)
        FAIL(
            "token %d '%.*s' at byte %ld: unknown op (not in simdev's fusable "
            "op table)",
            tok, (int)len, p, pos);
      if (depth < kTable[op].arity)
        FAIL(
            "token %d '%.*s' at byte %ld: stack underflow (needs %d operands, "
            "has %d)",
            tok, (int)len, p, pos, kTable[op].arity, depth);
      if (out->nops == SA_EWPROG_MAX_OPS)
        FAIL("token %d '%.*s' at byte %ld: more than %d ops", tok, (int)len, p,
             pos, SA_EWPROG_MAX_OPS);
      in->op = (int16_t)op;
      in->arg = 0;
      depth -= kTable[op].arity - 1;
      out->nops++;
    }
    out->nins++;
    if (depth > out->max_depth) out->max_depth = depth;
    tok++;
    if (sp == NULL) break;
    p = sp + 1;
  }
  if (depth != 1)
    FAIL("program leaves %d values on the stack, must leave 1", depth);
  return true;
#undef FAIL
}

/* ---- broadcasting ---------------------------------------------------- */

bool sa_ewprog_broadcast(int nin, const int* rank,
                         const int64_t (*dims)[SA_EWPROG_MAX_DIMS],
                         int* out_rank, int64_t* out_dims, sa_ewprog_plan* plan,
                         int* bad_a, int* bad_b) {
  int nd = 0;
  for (int k = 0; k < nin; k++)
    if (rank[k] > nd) nd = rank[k];
  /* full[j]: bit k set when input k is not broadcast along output dim j. */
  uint32_t full[SA_EWPROG_MAX_DIMS];
  for (int j = 0; j < nd; j++) {
    int64_t d = 1;
    int from = -1; /* the input that set d != 1 */
    for (int k = 0; k < nin; k++) {
      int i = j - (nd - rank[k]);
      int64_t dk = i >= 0 ? dims[k][i] : 1;
      if (dk == 1) continue;
      if (from >= 0 && dk != d) {
        *bad_a = from;
        *bad_b = k;
        return false;
      }
      d = dk;
      from = k;
    }
    out_dims[j] = d;
    full[j] = 0;
    for (int k = 0; k < nin; k++) {
      int i = j - (nd - rank[k]);
      if (i >= 0 && dims[k][i] == d) full[j] |= 1u << k;
    }
  }
  *out_rank = nd;
  /* The element count by TF's rule, kept in one place (arith/dims.h): a
   * partial product that overflows refuses the shape, whatever follows. No
   * dim is negative here (the caller's shapes came from TF). */
  int64_t n;
  if (sa_dims_check(out_dims, nd, 0, &n, NULL, 0) != 0) n = -1;
  /* More than 2**63 - 1 elements (n = -1), or none: no plan. An empty
   * output's merged dims and strides below are products that need not fit
   * int64 ([0, 2**62, 4]: arith/dims.h), and nothing walks them. */
  if (n <= 0) {
    plan->nin = nin;
    plan->nd = 1;
    plan->n = n;
    plan->d[0] = 0;
    for (int k = 0; k < nin; k++) {
      plan->s[k][0] = 0;
      plan->direct[k] = false;
    }
    return true;
  }
  /* Collapse: size-1 dims vanish, neighbours with one pattern merge. */
  int m = 0;
  uint32_t pat[SA_EWPROG_MAX_DIMS];
  for (int j = 0; j < nd; j++) {
    if (out_dims[j] == 1) continue;
    if (m > 0 && pat[m - 1] == full[j]) {
      plan->d[m - 1] *= out_dims[j];
      continue;
    }
    plan->d[m] = out_dims[j];
    pat[m] = full[j];
    m++;
  }
  if (m == 0) { /* one element (or none: n == 0 only via a 0 dim) */
    plan->d[0] = 1;
    pat[0] = (1u << nin) - 1;
    m = 1;
  }
  plan->nin = nin;
  plan->nd = m;
  plan->n = n;
  for (int k = 0; k < nin; k++) {
    int64_t stride = 1;
    bool direct = true;
    for (int j = m - 1; j >= 0; j--) {
      bool f = (pat[j] >> k) & 1;
      plan->s[k][j] = f ? stride : 0;
      if (f) stride *= plan->d[j];
      direct = direct && f;
    }
    plan->direct[k] = direct;
  }
  return true;
}

/* ---- evaluation ------------------------------------------------------ */

/* The gather of elements [start, start + m) of the output from input k (not
 * direct) into buf, walking its broadcast strides; the stride along the last
 * collapsed dimension is 1 or 0 (a run or a repeated element). */
#define EW_GATHER(name, T)                                                    \
  static void name(const sa_ewprog_plan* p, int k, const T* x, int64_t start, \
                   int m, T* buf) {                                           \
    const int last = p->nd - 1;                                               \
    const int64_t* s = p->s[k];                                               \
    int64_t idx[SA_EWPROG_MAX_DIMS], off = 0, rem = start;                    \
    for (int j = last; j >= 0; j--) {                                         \
      idx[j] = rem % p->d[j];                                                 \
      rem /= p->d[j];                                                         \
      off += idx[j] * s[j];                                                   \
    }                                                                         \
    int done = 0;                                                             \
    while (done < m) {                                                        \
      int64_t run = p->d[last] - idx[last];                                   \
      int cnt = run < m - done ? (int)run : m - done;                         \
      if (s[last] != 0) {                                                     \
        memcpy(buf + done, x + off, (size_t)cnt * sizeof(T));                 \
      } else {                                                                \
        const T v = x[off];                                                   \
        for (int i = 0; i < cnt; i++) buf[done + i] = v;                      \
      }                                                                       \
      done += cnt;                                                            \
      if (done >= m) break;                                                   \
      off -= idx[last] * s[last];                                             \
      idx[last] = 0;                                                          \
      for (int j = last - 1; j >= 0; j--) {                                   \
        idx[j]++;                                                             \
        off += s[j];                                                          \
        if (idx[j] < p->d[j]) break;                                          \
        off -= p->d[j] * s[j];                                                \
        idx[j] = 0;                                                           \
      }                                                                       \
    }                                                                         \
  }

/* The evaluator for one type. val[i] points at the block of stack slot i:
 * its buffer, or the input itself for a direct push. */
#define EW_EVAL(name, T, FN, GATHER)                                        \
  void name(const sa_ewprog* prog, const sa_ewprog_plan* plan,              \
            const T* const* in, T* out, int64_t begin, int64_t end) {       \
    T buf[SA_EWPROG_MAX_STACK][SA_EWPROG_BLOCK];                            \
    const T* val[SA_EWPROG_MAX_STACK];                                      \
    const int last = prog->nins - 1;                                        \
    for (int64_t b = begin; b < end; b += SA_EWPROG_BLOCK) {                \
      int m = end - b < SA_EWPROG_BLOCK ? (int)(end - b) : SA_EWPROG_BLOCK; \
      T* z = out + b;                                                       \
      int sp = 0;                                                           \
      for (int i = 0; i <= last; i++) {                                     \
        const sa_ewprog_ins* ins = &prog->ins[i];                           \
        if (ins->op < 0) {                                                  \
          int k = ins->arg;                                                 \
          if (plan->direct[k]) {                                            \
            val[sp] = in[k] + b;                                            \
          } else {                                                          \
            GATHER(plan, k, in[k], b, m, buf[sp]);                          \
            val[sp] = buf[sp];                                              \
          }                                                                 \
          sp++;                                                             \
          continue;                                                         \
        }                                                                   \
        const ew_entry* e = &kTable[ins->op];                               \
        int top = sp - e->arity; /* slot of the result */                   \
        T* dst = i == last ? z : buf[top];                                  \
        e->FN(val[top], e->arity == 2 ? val[top + 1] : NULL, dst, m);       \
        val[top] = dst;                                                     \
        sp = top + 1;                                                       \
      }                                                                     \
      /* A program without ops ("$k"): the pushed value is the result. */   \
      if (prog->nops == 0 && val[0] != z)                                   \
        memcpy(z, val[0], (size_t)m * sizeof(T));                           \
    }                                                                       \
  }

EW_GATHER(gather_f32, float)
EW_GATHER(gather_f64, double)
EW_EVAL(sa_ewprog_eval_f32, float, f32, gather_f32)
EW_EVAL(sa_ewprog_eval_f64, double, f64, gather_f64)
