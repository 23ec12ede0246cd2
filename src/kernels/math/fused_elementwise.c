/*
 * fused_elementwise.c - the plugin-defined op `_SimdevFusedElementwise`
 * (defined here with TF_OpDefinitionBuilder, before its kernel is registered)
 * and its SIMDEV kernel, which runs an elementwise expression program
 * (ewprog.h) in one pass over memory. The graph optimizer's elementwise pass
 * writes these nodes; the op can also be run directly (eager execute) by its
 * name.
 *
 *   _SimdevFusedElementwise(x: N * T) -> y: T
 *     T: {float, double}; N: int >= 1 (<= 16); program: string
 *
 * Kernel construction parses the program once: a bad one fails there with
 * InvalidArgument naming the token, so no launch ever sees it. Each launch
 * broadcasts the N input shapes (InvalidArgument "Incompatible shapes: ..."
 * as TF's binary ops), reuses an input buffer of the output's shape for the
 * output when TF allows (as the binary ops do), and splits the output over
 * sim_parallel_for; every range runs the evaluator of ewprog.c.
 *
 * Shape inference (C API of tensorflow/c/ops.h): the broadcast shape when the
 * input ranks are known, dimension by dimension: a known dimension other than
 * 1 wins (two different ones are InvalidArgument), a single unknown
 * dimension against 1s is that dimension, several unknown ones give an
 * unknown dimension. Any input of unknown rank gives an unknown shape. The C
 * API has no "unknown dimension" constructor; Vector(-1) makes one
 * (InferenceContext's kUnknownDim is -1, and TF_ShapeInferenceContext-
 * VectorFromSize hands its size_t to Vector as int64).
 *
 * Thread contract: construction and compute on TF's threads; the kernel
 * state is read-only after construction; the run function reads only its
 * argument block (a copy of the program and the plan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/ewprog.h"
#include "kernels/framework/sk.h"

/* TF 2.21's ops.h declares these as bare structs and then uses them without
 * `struct`, which only compiles as C++; in C the typedefs must come first. */
typedef struct TF_DimensionHandle TF_DimensionHandle;
typedef struct TF_OpDefinitionBuilder TF_OpDefinitionBuilder;
typedef struct TF_ShapeHandle TF_ShapeHandle;
typedef struct TF_ShapeInferenceContext TF_ShapeInferenceContext;
#include "tensorflow/c/ops.h"

#define EW_OP "_SimdevFusedElementwise"

_Static_assert(SA_EWPROG_MAX_DIMS == SK_MAX_DIMS,
               "ewprog's rank limit must be the kernels' limit");

/* Elements per sim_parallel_for grain for one op (as cheap elementwise
 * kernels, SK_CW_GRAIN); a program of k ops gets 1/k of it. */
#define EW_GRAIN (1 << 15)

typedef struct ew_state {
  sa_ewprog prog;
} ew_state;

typedef struct ew_args {
  TF_DataType dt;
  sa_ewprog prog;
  sa_ewprog_plan plan;
  const void* in[SA_EWPROG_MAX_INPUTS];
  void* out;
} ew_args;

/* ---- the kernel ------------------------------------------------------ */

static void ew_range(void* arg, int64_t b, int64_t e) {
  const ew_args* a = arg;
  if (a->dt == TF_FLOAT)
    sa_ewprog_eval_f32(&a->prog, &a->plan, (const float* const*)a->in, a->out,
                       b, e);
  else
    sa_ewprog_eval_f64(&a->prog, &a->plan, (const double* const*)a->in, a->out,
                       b, e);
}

static void ew_run(sk_launch* l, void* args) {
  ew_args* a = args;
  int64_t grain = EW_GRAIN / (a->prog.nops > 0 ? a->prog.nops : 1);
  if (grain < 4 * SA_EWPROG_BLOCK) grain = 4 * SA_EWPROG_BLOCK;
  sim_parallel_for(a->plan.n, grain, ew_range, a);
}

static void ew_compute(sk_launch* l, void* state) {
  const ew_state* s = state;
  const int nin = s->prog.ninputs;
  if (TF_NumInputs(sk_context(l)) != nin) { /* TF checks N: an invariant */
    sk_fail(l, TF_INTERNAL, EW_OP ": %d inputs, N = %d",
            TF_NumInputs(sk_context(l)), nin);
    return;
  }
  sk_shape xs[SA_EWPROG_MAX_INPUTS], zs;
  int rank[SA_EWPROG_MAX_INPUTS];
  int64_t dims[SA_EWPROG_MAX_INPUTS][SA_EWPROG_MAX_DIMS];
  for (int k = 0; k < nin; k++) {
    if (!sk_input_shape(l, k, &xs[k])) return;
    rank[k] = xs[k].nd;
    memcpy(dims[k], xs[k].d, sizeof(int64_t) * (size_t)xs[k].nd);
  }
  ew_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  int bad_a = 0, bad_b = 0;
  if (!sa_ewprog_broadcast(nin, rank,
                           (const int64_t(*)[SA_EWPROG_MAX_DIMS])dims, &zs.nd,
                           zs.d, &a->plan, &bad_a, &bad_b)) {
    char sa[400], sb[400];
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Incompatible shapes: %s vs. %s (inputs %d and %d of " EW_OP ")",
            sk_shape_str(&xs[bad_a], sa, sizeof(sa)),
            sk_shape_str(&xs[bad_b], sb, sizeof(sb)), bad_a, bad_b);
    return;
  }
  zs.n = a->plan.n; /* -1: too many elements, refused by sk_output */
  /* Output before the inputs are held: TF forwards an input buffer only
   * while the executor holds its one reference (sk.h). */
  int cand[SA_EWPROG_MAX_INPUTS], ncand = 0;
  for (int k = 0; k < nin; k++)
    if (sk_shape_eq(&xs[k], &zs)) cand[ncand++] = k;
  TF_Tensor* z = ncand > 0 ? sk_output_forward(l, 0, cand, ncand, &zs)
                           : sk_output(l, 0, &zs);
  if (z == NULL) return;
  for (int k = 0; k < nin; k++) {
    TF_Tensor* x = sk_input(l, k);
    if (x == NULL) return;
    a->in[k] = sk_data(x);
  }
  if (zs.n == 0) return; /* nothing to compute: no work item */
  a->dt = TF_TensorType(z);
  a->prog = s->prog;
  a->out = sk_mdata(z);
  sk_work(l, ew_run, EW_OP);
}

static void* ew_create(TF_OpKernelConstruction* c) {
  int64_t n = 0;
  int32_t total = 0;
  if (!sk_attr_int(c, "N", &n)) return NULL;
  /* TF's GetAttr of an int32 reads the int64 and refuses a value outside
   * int32 with this message; the op's N <= 16 rule is the parser's. */
  if (n < INT32_MIN || n > INT32_MAX) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Attr N has value %lld out of range for an int32",
                         (long long)n);
    return NULL;
  }
  if (!sk_attr_size(c, "program", NULL, &total)) return NULL;
  if (total < 0 || total > SA_EWPROG_MAX_LEN) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         EW_OP
                         ": program of %d bytes, longer than the limit "
                         "of %d",
                         (int)total, SA_EWPROG_MAX_LEN);
    return NULL;
  }
  char program[SA_EWPROG_MAX_LEN + 1];
  if (!sk_attr_string(c, "program", program, sizeof(program))) return NULL;
  if (strlen(program) != (size_t)total) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         EW_OP ": the program contains a NUL byte");
    return NULL;
  }
  ew_state* s = sk_state_new(c, sizeof(*s));
  if (s == NULL) return NULL;
  char err[300];
  if (!sa_ewprog_parse(program, (int)n, &s->prog, err, sizeof(err))) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         EW_OP ": bad program \"%.120s%s\": %s", program,
                         total > 120 ? "..." : "", err);
    free(s);
    return NULL;
  }
  return sk_kernel_new(c, ew_compute, s, free);
}

/* ---- shape inference ------------------------------------------------- */

/* Appends dimension i of input k (a rank-1 slice of it) to *out. */
static bool append_dim_of(TF_ShapeInferenceContext* ctx, TF_ShapeHandle* in,
                          int64_t i, TF_ShapeHandle* out, TF_Status* st) {
  TF_ShapeHandle* d = TF_NewShapeHandle();
  TF_ShapeInferenceContextSubshape(ctx, in, i, i + 1, d, st);
  if (TF_GetCode(st) == TF_OK)
    TF_ShapeInferenceContextConcatenateShapes(ctx, out, d, out, st);
  TF_DeleteShapeHandle(d);
  return TF_GetCode(st) == TF_OK;
}

/* Appends a dimension of size v (-1: unknown; see the file comment). */
static bool append_dim(TF_ShapeInferenceContext* ctx, int64_t v,
                       TF_ShapeHandle* out, TF_Status* st) {
  TF_ShapeHandle* d = TF_ShapeInferenceContextVectorFromSize(ctx, (size_t)v);
  TF_ShapeInferenceContextConcatenateShapes(ctx, out, d, out, st);
  TF_DeleteShapeHandle(d);
  return TF_GetCode(st) == TF_OK;
}

static void ew_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  int64_t nin = TF_ShapeInferenceContextNumInputs(ctx);
  if (nin < 1 || nin > SA_EWPROG_MAX_INPUTS) {
    TF_SetStatus(st, TF_INVALID_ARGUMENT, EW_OP ": N must be in [1, 16]");
    return;
  }
  TF_ShapeHandle* in[SA_EWPROG_MAX_INPUTS] = {NULL};
  int64_t rank[SA_EWPROG_MAX_INPUTS];
  TF_ShapeHandle* out = NULL;
  int64_t nd = 0;
  bool unknown_rank = false;
  for (int64_t k = 0; k < nin; k++) {
    in[k] = TF_NewShapeHandle();
    TF_ShapeInferenceContextGetInput(ctx, (int)k, in[k], st);
    if (TF_GetCode(st) != TF_OK) goto done;
    if (!TF_ShapeInferenceContextRankKnown(ctx, in[k])) {
      unknown_rank = true;
      continue;
    }
    rank[k] = TF_ShapeInferenceContextRank(ctx, in[k]);
    if (rank[k] > nd) nd = rank[k];
  }
  if (unknown_rank) {
    TF_ShapeInferenceContextSetUnknownShape(ctx, st);
    goto done;
  }
  out = TF_ShapeInferenceContextScalar(ctx);
  TF_DimensionHandle* dh = TF_NewDimensionHandle();
  for (int64_t j = 0; j < nd; j++) {
    int64_t known = 1; /* a known dimension other than 1, or 1 */
    int nunknown = 0, unknown_k = -1;
    for (int64_t k = 0; k < nin; k++) {
      int64_t i = j - (nd - rank[k]);
      if (i < 0) continue;
      TF_ShapeInferenceContextDim(ctx, in[k], i, dh);
      if (!TF_DimensionHandleValueKnown(dh)) {
        nunknown++;
        unknown_k = (int)k;
        continue;
      }
      int64_t v = TF_DimensionHandleValue(dh);
      if (v == 1) continue;
      if (known != 1 && v != known) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "Incompatible shapes: dimension %lld is %lld in one input "
                 "and %lld in input %lld of " EW_OP,
                 (long long)j, (long long)known, (long long)v, (long long)k);
        TF_SetStatus(st, TF_INVALID_ARGUMENT, msg);
        break;
      }
      known = v;
    }
    if (TF_GetCode(st) != TF_OK) break;
    bool ok;
    if (known != 1 || nunknown == 0)
      ok = append_dim(ctx, known, out, st);
    else if (nunknown == 1)
      ok = append_dim_of(ctx, in[unknown_k], j - (nd - rank[unknown_k]), out,
                         st);
    else
      ok = append_dim(ctx, -1, out, st);
    if (!ok) break;
  }
  TF_DeleteDimensionHandle(dh);
  if (TF_GetCode(st) == TF_OK)
    TF_ShapeInferenceContextSetOutput(ctx, 0, out, st);
done:
  if (out != NULL) TF_DeleteShapeHandle(out);
  for (int64_t k = 0; k < nin; k++)
    if (in[k] != NULL) TF_DeleteShapeHandle(in[k]);
}

/* ---- op definition and registration ---------------------------------- */

static bool define_op(char* msg, size_t len) {
  TF_OpDefinitionBuilder* b = TF_NewOpDefinitionBuilder(EW_OP);
  TF_OpDefinitionBuilderAddInput(b, "x: N * T");
  TF_OpDefinitionBuilderAddOutput(b, "y: T");
  TF_OpDefinitionBuilderAddAttr(b, "T: {float, double}");
  TF_OpDefinitionBuilderAddAttr(b, "N: int >= 1");
  TF_OpDefinitionBuilderAddAttr(b, "program: string");
  TF_OpDefinitionBuilderSetShapeInferenceFunction(b, ew_shape);
  TF_Status* st = TF_NewStatus();
  TF_RegisterOpDefinition(b, st); /* takes b */
  bool ok = TF_GetCode(st) == TF_OK;
  if (!ok) snprintf(msg, len, "defining op " EW_OP ": %s", TF_Message(st));
  TF_DeleteStatus(st);
  return ok;
}

bool sk_register_fused_elementwise(char* msg, size_t len) {
  if (!define_op(msg, len)) return false;
  static const TF_DataType types[] = {TF_FLOAT, TF_DOUBLE, 0};
  static const sk_op ops[] = {
      {EW_OP, ew_create, "T", types, NULL},
      {NULL},
  };
  return sk_register_ops(ops, msg, len);
}
