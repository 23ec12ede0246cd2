/*
 * cwise_binary.c - broadcasting binary elementwise ops (AddV2, Sub, Mul,
 * RealDiv, DivNoNan, the legacy Add, Maximum, Minimum, Pow, SquaredDifference)
 * and the elementwise driver all cwise kernels share (see cwise.h for the plan
 * format). The float ops are the B rows of arith/ewops.h: their loops, op
 * structs, kernels and registration rows are generated from those rows; the
 * int64 loops of the rows marked I64 and the legacy Add are this file's.
 *
 * Broadcasting follows NumPy/TF: shapes are right-aligned, each dimension
 * pair must be equal or contain a 1, and a 0 against a 1 gives 0. Unlike
 * TF's CPU kernels (which stop at 8 collapsed dimensions) any rank up to
 * SK_MAX_DIMS is accepted.
 *
 * Numerics follow TF's CPU kernels: Maximum/Minimum propagate NaN from
 * either side and otherwise return x on ties (so max(-0, +0) is -0, as in
 * std::max); DivNoNan is 0 wherever y == 0, even for x NaN; int64 add, sub
 * and mul wrap around in two's complement.
 */
#include <math.h>
#include <string.h>

#include "kernels/math/cwise.h"

const TF_DataType sk_cw_float_types[] = {TF_FLOAT, TF_DOUBLE, 0};
const TF_DataType sk_cw_float_i64_types[] = {TF_FLOAT, TF_DOUBLE, TF_INT64, 0};
const TF_DataType sk_cw_real_types[] = {TF_FLOAT, TF_DOUBLE, TF_HALF,
                                        TF_BFLOAT16, 0};
const TF_DataType sk_cw_real_i64_types[] = {TF_FLOAT,    TF_DOUBLE, TF_HALF,
                                            TF_BFLOAT16, TF_INT64,  0};

/* ---- half and bfloat16 --------------------------------------------------- */

/* How 16-bit floats reach the float32 loops: converted to float in chunks,
 * and the float results rounded to nearest even on the way back. Half uses
 * the compiler's _Float16 (IEEE binary16; its conversions round to nearest
 * even and keep NaN); bfloat16 is the top half of a float32. */
#define CW_CHUNK 256

int sk_cw_conv(TF_DataType dt) {
  return dt == TF_HALF ? SK_CW_HALF : dt == TF_BFLOAT16 ? SK_CW_BF16 : 0;
}

void sk_cw_load16(int cv, const uint16_t* in, float* out, int64_t n) {
  if (cv == SK_CW_HALF) {
    for (int64_t i = 0; i < n; i++) {
      _Float16 h;
      memcpy(&h, &in[i], sizeof(h));
      out[i] = (float)h;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)in[i] << 16;
      memcpy(&out[i], &u, sizeof(u));
    }
  }
}

void sk_cw_store16(int cv, const float* in, uint16_t* out, int64_t n) {
  if (cv == SK_CW_HALF) {
    for (int64_t i = 0; i < n; i++) {
      _Float16 h = (_Float16)in[i];
      memcpy(&out[i], &h, sizeof(h));
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      uint32_t u;
      memcpy(&u, &in[i], sizeof(u));
      if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: a quiet NaN, same sign */
        out[i] = (uint16_t)((u >> 16) | 0x0040);
      else
        out[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    }
  }
}

/* ---- plans ------------------------------------------------------------- */

void sk_cw_bcast_plan(const sk_shape* out, const sk_shape* x, const sk_shape* y,
                      sk_cw_bcast* plan) {
  bool fx[SK_MAX_DIMS], fy[SK_MAX_DIMS]; /* operand full (not broadcast) */
  int m = 0;
  /* out is a shape TF accepts (arith/dims.h), so its count, multiplied from
   * the first dim, fits int64. An empty one gets a plan of no element: the
   * merged dims and strides below are products that need not fit then
   * ([0, 2**62, 4]). */
  plan->n = 1;
  for (int k = 0; k < out->nd; k++) plan->n *= out->d[k];
  if (plan->n == 0) {
    *plan = (sk_cw_bcast){.nd = 1, .n = 0};
    return;
  }
  for (int k = 0; k < out->nd; k++) {
    int64_t d = out->d[k];
    if (d == 1) continue; /* no effect on any offset */
    bool bx = x->d[k] != 1, by = y->d[k] != 1;
    if (m > 0 && fx[m - 1] == bx && fy[m - 1] == by) {
      plan->d[m - 1] *= d; /* same pattern as the dimension before: merge */
      continue;
    }
    plan->d[m] = d;
    fx[m] = bx;
    fy[m] = by;
    m++;
  }
  if (m == 0) { /* one element */
    plan->d[0] = 1;
    fx[0] = fy[0] = true;
    m = 1;
  }
  plan->nd = m;
  int64_t stride_x = 1, stride_y = 1;
  for (int k = m - 1; k >= 0; k--) {
    plan->sx[k] = fx[k] ? stride_x : 0;
    plan->sy[k] = fy[k] ? stride_y : 0;
    if (fx[k]) stride_x *= plan->d[k];
    if (fy[k]) stride_y *= plan->d[k];
  }
}

bool sk_cw_bcast_shapes(const sk_shape* x, const sk_shape* y, sk_shape* out,
                        sk_cw_bcast* plan) {
  int nd = x->nd > y->nd ? x->nd : y->nd;
  sk_shape px = {.nd = nd}, py = {.nd = nd};
  out->nd = nd;
  for (int k = 0; k < nd; k++) {
    int ix = k - (nd - x->nd), iy = k - (nd - y->nd);
    int64_t dx = ix >= 0 ? x->d[ix] : 1, dy = iy >= 0 ? y->d[iy] : 1;
    if (dx != dy && dx != 1 && dy != 1) return false;
    px.d[k] = dx;
    py.d[k] = dy;
    out->d[k] = dx == 1 ? dy : dx;
  }
  /* Two empty operands can broadcast to more than 2**63 - 1 elements
   * ([2**32,1,0] and [1,2**32,0]): no plan then, and n = -1, which
   * sk_output refuses with InvalidArgument. */
  if (sa_dims_check(out->d, nd, 0, &out->n, NULL, 0) != SIM_OK) {
    out->n = -1;
    *plan = (sk_cw_bcast){0};
    return true;
  }
  px.n = x->n;
  py.n = y->n;
  sk_cw_bcast_plan(out, &px, &py, plan);
  return true;
}

void sk_cw_bcast_flat(int64_t n, sk_cw_bcast* plan) {
  plan->nd = 1;
  plan->n = n;
  plan->d[0] = n;
  plan->sx[0] = plan->sy[0] = 1;
}

/* ---- the driver (stream worker) ---------------------------------------- */

typedef struct cw_args {
  sk_cw_loop loop;
  int xcv, zcv; /* sk_cw_conv of the operands / the output */
  size_t es;    /* operand element size in bytes */
  size_t zes;   /* output element size in bytes */
  sk_cw_check check;
  int64_t ny; /* y's element count, for check */
  const char* x;
  const char* y;
  char* z;
  sk_cw_bcast plan;
} cw_args;

/* One run of the loop; 16-bit float operands go through float chunks (a
 * scalar operand converted once per chunk). */
static void cw_call(const cw_args* a, const char* x, const char* y, char* z,
                    int64_t cnt, sk_cw_mode mode) {
  if (a->xcv == 0) {
    a->loop(x, y, z, cnt, mode);
    return;
  }
  float xf[CW_CHUNK], yf[CW_CHUNK], zf[CW_CHUNK];
  for (int64_t i = 0; i < cnt; i += CW_CHUNK) {
    int64_t m = cnt - i < CW_CHUNK ? cnt - i : CW_CHUNK;
    const uint16_t* xs = (const uint16_t*)x + (mode == SK_CW_SV ? 0 : i);
    const uint16_t* ys = (const uint16_t*)y + (mode == SK_CW_VS ? 0 : i);
    sk_cw_load16(a->xcv, xs, xf, mode == SK_CW_SV ? 1 : m);
    sk_cw_load16(a->xcv, ys, yf, mode == SK_CW_VS ? 1 : m);
    if (a->zcv == 0) { /* bool results of a comparison */
      a->loop(xf, yf, z + i * a->zes, m, mode);
    } else {
      a->loop(xf, yf, zf, m, mode);
      sk_cw_store16(a->zcv, zf, (uint16_t*)z + i, m);
    }
  }
}

/* Output elements [b, e): walks the plan's index from b, one call of the
 * loop per run along the last dimension. */
static void cw_range(void* arg, int64_t b, int64_t e) {
  const cw_args* a = arg;
  const sk_cw_bcast* p = &a->plan;
  const int last = p->nd - 1;
  int64_t idx[SK_MAX_DIMS];
  int64_t ox = 0, oy = 0, rem = b;
  for (int k = last; k >= 0; k--) {
    idx[k] = rem % p->d[k];
    rem /= p->d[k];
    ox += idx[k] * p->sx[k];
    oy += idx[k] * p->sy[k];
  }
  sk_cw_mode mode = SK_CW_VV;
  if (p->sx[last] == 0 && p->sy[last] != 0) mode = SK_CW_SV;
  if (p->sy[last] == 0 && p->sx[last] != 0) mode = SK_CW_VS;
  for (int64_t i = b; i < e;) {
    int64_t cnt = p->d[last] - idx[last];
    if (cnt > e - i) cnt = e - i;
    cw_call(a, a->x + ox * a->es, a->y + oy * a->es, a->z + i * a->zes, cnt,
            mode);
    i += cnt;
    if (i >= e) break;
    /* Back to the start of this run, then to the next one (with carries). */
    ox -= idx[last] * p->sx[last];
    oy -= idx[last] * p->sy[last];
    idx[last] = 0;
    for (int k = last - 1; k >= 0; k--) {
      idx[k]++;
      ox += p->sx[k];
      oy += p->sy[k];
      if (idx[k] < p->d[k]) break;
      ox -= p->d[k] * p->sx[k];
      oy -= p->d[k] * p->sy[k];
      idx[k] = 0;
    }
  }
}

static void cw_run(sk_launch* l, void* args) {
  cw_args* a = args;
  if (a->check != NULL && !a->check(l, a->y, a->ny)) return;
  sim_parallel_for(a->plan.n, SK_CW_GRAIN, cw_range, a);
}

void sk_cw_launch_checked(sk_launch* l, sk_cw_loop loop, TF_DataType dt,
                          const TF_Tensor* x, const TF_Tensor* y, TF_Tensor* z,
                          const sk_cw_bcast* plan, sk_cw_check check,
                          const char* label) {
  if (!sk_ok(l) || plan->n == 0) return;
  cw_args* a = sk_args(l, sizeof(*a));
  if (a == NULL) return;
  a->loop = loop;
  a->es = TF_DataTypeSize(dt);
  a->zes = TF_DataTypeSize(TF_TensorType(z));
  a->xcv = sk_cw_conv(dt);
  a->zcv = sk_cw_conv(TF_TensorType(z));
  a->check = check;
  a->ny = TF_TensorElementCount(y);
  a->x = sk_data(x);
  a->y = sk_data(y);
  a->z = sk_mdata(z);
  a->plan = *plan;
  sk_work(l, cw_run, label);
}

void sk_cw_launch(sk_launch* l, sk_cw_loop loop, TF_DataType dt,
                  const TF_Tensor* x, const TF_Tensor* y, TF_Tensor* z,
                  const sk_cw_bcast* plan, const char* label) {
  sk_cw_launch_checked(l, loop, dt, x, y, z, plan, NULL, label);
}

sk_cw_loop sk_cw_pick(sk_launch* l, const sk_cw_loops* loops, TF_DataType dt,
                      const char* op) {
  sk_cw_loop f = NULL;
  if (dt == TF_FLOAT || dt == TF_HALF || dt == TF_BFLOAT16) f = loops->f32;
  if (dt == TF_DOUBLE) f = loops->f64;
  if (dt == TF_INT64) f = loops->i64;
  if (dt == TF_BOOL) f = loops->b;
  if (f == NULL)
    sk_fail(l, TF_UNIMPLEMENTED, "simdev: %s has no %s kernel", op,
            sk_dtype_name(dt));
  return f;
}

/* ---- binary ops -------------------------------------------------------- */

/* The float loops of every binary row of arith/ewops.h: the scalar
 * functions of arith/scalar.h (shared with the fused elementwise evaluator,
 * ewprog.c, so fused == unfused bit for bit). */
#define CW_BINARY_LOOPS(Op, stem, ints)                      \
  SK_CW_BINARY(stem##_f32, float, sa_cws_##stem##_f32(a, b)) \
  SK_CW_BINARY(stem##_f64, double, sa_cws_##stem##_f64(a, b))
SA_EWOPS(SA_EWOPS_NONE, CW_BINARY_LOOPS, SA_EWOPS_NONE)

/* The int64 loops of the rows marked I64. int64 arithmetic through uint64:
 * wraps instead of being undefined. */
// clang-format off
#define WRAP(op) ((int64_t)((uint64_t)a op (uint64_t)b))
SK_CW_BINARY(add_i64, int64_t, WRAP(+))
SK_CW_BINARY(sub_i64, int64_t, WRAP(-))
SK_CW_BINARY(mul_i64, int64_t, WRAP(*))
SK_CW_BINARY(max_i64, int64_t, a < b ? b : a)
SK_CW_BINARY(min_i64, int64_t, b < a ? b : a)
// clang-format on

const sk_cw_loops sk_cw_add_loops = {add_f32, add_f64, add_i64};

void sk_cw_binary_compute(sk_launch* l, const sk_cw_op* op,
                          sk_cw_mismatch_fn mismatch) {
  /* Shapes first, output next, inputs last: TF forwards an input's buffer
   * to the output only while nobody but the executor holds it (see
   * sk_output_forward; TF's collective Add requires the forwarding). */
  sk_shape xs, ys, zs;
  sk_cw_bcast plan;
  if (!sk_input_shape(l, 0, &xs) || !sk_input_shape(l, 1, &ys)) return;
  if (!sk_cw_bcast_shapes(&xs, &ys, &zs, &plan)) {
    if (mismatch != NULL) {
      mismatch(l);
      return;
    }
    char a[400], b[400];
    sk_fail(l, TF_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
            sk_shape_str(&xs, a, sizeof(a)), sk_shape_str(&ys, b, sizeof(b)));
    return;
  }
  int cand[2], ncand = 0; /* inputs as large as the output */
  if (sk_shape_eq(&xs, &zs)) cand[ncand++] = 0;
  if (sk_shape_eq(&ys, &zs)) cand[ncand++] = 1;
  TF_Tensor* z = ncand > 0 ? sk_output_forward(l, 0, cand, ncand, &zs)
                           : sk_output(l, 0, &zs);
  TF_Tensor* x = sk_input(l, 0);
  TF_Tensor* y = sk_input(l, 1);
  if (x == NULL || y == NULL || z == NULL) return;
  TF_DataType dt = TF_TensorType(x);
  sk_cw_loop loop = sk_cw_pick(l, &op->loops, dt, op->name);
  if (loop == NULL) return;
  sk_cw_check check = dt == TF_INT64 ? op->int_check : NULL;
  sk_cw_launch_checked(l, loop, dt, x, y, z, &plan, check, op->name);
}

static void binary_compute(sk_launch* l, void* state) {
  sk_cw_binary_compute(l, state, NULL);
}

/* Per binary row: the op (its name is the launch label), its kernel's
 * create function, and its registration row. */
#define CW_BINARY_OP(Op, stem, ints)                              \
  static const sk_cw_op k_##stem = {                              \
      #Op, {stem##_f32, stem##_f64, SK_CW_I64_LOOP(ints, stem)}}; \
  SK_CW_CREATE(stem##_create, binary_compute, &k_##stem)
SA_EWOPS(SA_EWOPS_NONE, CW_BINARY_OP, SA_EWOPS_NONE)

/* Add: the legacy name of AddV2 (TF's ring all-reduce and Grappler still
 * build it); the same loops. Not a row of ewops.h: the fused op knows
 * AddV2 only (the graph pass leaves Add alone). */
static const sk_cw_op kAddLegacy = {"Add", {add_f32, add_f64, add_i64}};
SK_CW_CREATE(add_legacy_create, binary_compute, &kAddLegacy)

#define CW_BINARY_ROW(Op, stem, ints) \
  {#Op, stem##_create, "T", SK_CW_TYPES(ints), NULL},
// clang-format off
static const sk_op kOps[] = {
    SA_EWOPS(SA_EWOPS_NONE, CW_BINARY_ROW, SA_EWOPS_NONE)
    {"Add", add_legacy_create, "T", sk_cw_real_i64_types, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
// clang-format on

bool sk_register_cwise_binary(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
