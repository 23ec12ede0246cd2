/*
 * fill_cast.c - the array kernel family's metadata op Bitcast (the output
 * aliases the input buffer, nothing runs on the stream), fills (Fill,
 * ZerosLike, OnesLike) and Cast; shape_ops.c holds the ops that reorder or
 * replicate data, with the helpers of array.h.
 *
 * Cast follows TF's CPU kernel bit for bit where TF is deterministic:
 *   - TF runs its CPU kernels with denormals flushed (MXCSR FTZ and DAZ on
 *     x86), so float32 -> float64 turns a denormal into 0 and float64 ->
 *     float32 flushes denormal results. simdev's device threads run in the
 *     same mode (device_sim sets it when they start), so the loops need
 *     nothing of their own.
 *   - float/double -> integer truncates toward zero; NaN and out-of-range
 *     values give INT_MIN / INT64_MIN (x86's cvtt result, which TF returns).
 *   - float -> uint8 goes through int32 and saturates to [0, 255], as TF's
 *     vectorised path does (TF's scalar tail wraps instead, so for values
 *     outside [0, 256) TF itself depends on the element's position).
 *   - half, bfloat16, integer and double sources reach half/bfloat16 through
 *     float (Eigen's conversions): round to nearest even, twice if needed.
 *   - float -> half keeps NaN payloads (F16C); float -> bfloat16 makes every
 *     NaN 0x7fc0 (TF's vectorised path; other sources keep the NaN's sign);
 *     half/bfloat16 -> bool tests the bits (a bfloat16 denormal is true).
 *   - Truncate=true zeroes the dropped mantissa bits of non-NaN inputs first,
 *     for the pairs TF truncates: float->half, float->bfloat16,
 *     double->float, double->half.
 *
 * Thread contract: compute functions run on TF's thread; run/range functions
 * on the stream worker and the pool helpers, and touch only their args.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/array/array.h"

/* ---- Bitcast ------------------------------------------------------------ */

typedef struct bitcast_state {
  TF_DataType in, out;
  size_t in_size, out_size;
} bitcast_state;

static void bitcast_compute(sk_launch* l, void* state) {
  const bitcast_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  sk_shape o = s;
  if (st->in_size > st->out_size) {
    if (!sk_rank_ok(l, s.nd + 1, "the output of Bitcast")) return;
    o.d[o.nd++] = (int64_t)(st->in_size / st->out_size);
  } else if (st->in_size < st->out_size) {
    if (s.nd == 0 || s.d[s.nd - 1] != (int64_t)(st->out_size / st->in_size)) {
      char b[256];
      /* TF's CPU message prints the DataType enum values. */
      sk_fail(l, TF_INVALID_ARGUMENT,
              "Cannot bitcast from %d to %d: shape %s (the last dimension "
              "must be %zu)",
              (int)st->in, (int)st->out, sk_shape_str(&s, b, sizeof(b)),
              st->out_size / st->in_size);
      return;
    }
    o.nd--;
  }
  o.n = 1;
  for (int i = 0; i < o.nd; i++) o.n *= o.d[i];
  sk_output_alias(l, 0, x, st->out, &o);
}

static void* bitcast_create(TF_OpKernelConstruction* c) {
  bitcast_state* st = sk_state_new(c, sizeof(*st));
  if (st == NULL) return NULL;
  if (!sk_attr_type(c, "T", &st->in) || !sk_attr_type(c, "type", &st->out)) {
    free(st);
    return NULL;
  }
  st->in_size = TF_DataTypeSize(st->in);
  st->out_size = TF_DataTypeSize(st->out);
  if (st->in_size == 0 || st->out_size == 0) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Cannot bitcast from %d to %d: one of the types has "
                         "no fixed size",
                         (int)st->in, (int)st->out);
    free(st);
    return NULL;
  }
  return sk_kernel_new(c, bitcast_compute, st, free);
}

/* ---- Fill, ZerosLike, OnesLike ------------------------------------------- */

typedef struct fill_args {
  size_t es;
  const void* value; /* Fill: the device scalar; else NULL: use pattern */
  uint64_t pattern;  /* OnesLike's one, ZerosLike's zero */
  void* y;
  int64_t n;
} fill_args;

static void fill_range(void* arg, int64_t b, int64_t e) {
  const fill_args* a = arg;
  if (a->value == NULL && a->pattern == 0) { /* ZerosLike */
    memset((char*)a->y + (size_t)b * a->es, 0, (size_t)(e - b) * a->es);
    return;
  }
  uint64_t v = a->pattern;
  if (a->value != NULL) memcpy(&v, a->value, a->es);
  switch (a->es) {
    case 1: memset((uint8_t*)a->y + b, (int)(uint8_t)v, (size_t)(e - b)); break;
    case 2:
      for (int64_t i = b; i < e; i++) ((uint16_t*)a->y)[i] = (uint16_t)v;
      break;
    case 4:
      for (int64_t i = b; i < e; i++) ((uint32_t*)a->y)[i] = (uint32_t)v;
      break;
    default:
      for (int64_t i = b; i < e; i++) ((uint64_t*)a->y)[i] = v;
      break;
  }
}

static void fill_run(sk_launch* l, void* args) {
  (void)l;
  fill_args* a = args;
  sim_parallel_for(a->n, SKA_GRAIN, fill_range, a);
}

/* Allocates output 0 of shape s and queues the fill (value or pattern). */
static void fill_launch(sk_launch* l, const sk_shape* s, const void* value,
                        uint64_t pattern, const char* label) {
  TF_Tensor* y = sk_output(l, 0, s);
  fill_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || s->n == 0) return;
  a->es = TF_DataTypeSize(TF_TensorType(y));
  a->value = value;
  a->pattern = pattern;
  a->y = sk_mdata(y);
  a->n = s->n;
  sk_work(l, fill_run, label);
}

static void fill_compute(sk_launch* l, void* state) {
  (void)state;
  TF_Tensor* dims = sk_input(l, 0);
  TF_Tensor* value = sk_input(l, 1);
  sk_shape ds, vs;
  if (dims == NULL || value == NULL || !sk_shape_of(l, dims, &ds) ||
      !sk_shape_of(l, value, &vs))
    return;
  char b[256];
  if (ds.nd > 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "dims must represent a vector, got shape %s",
            sk_shape_str(&ds, b, sizeof(b)));
    return;
  }
  if (vs.n != 1 || vs.nd > 1) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "value must represent a scalar, got shape %s",
            sk_shape_str(&vs, b, sizeof(b)));
    return;
  }
  sk_shape s;
  if (sk_shape_from_tensor(l, dims, NULL, &s))
    fill_launch(l, &s, sk_data(value), 0, "Fill");
}

/* The bits of one in each OnesLike type. */
static uint64_t one_bits(TF_DataType t) {
  switch (t) {
    case TF_FLOAT: return 0x3f800000u;
    case TF_DOUBLE: return 0x3ff0000000000000ull;
    case TF_HALF: return 0x3c00u;
    case TF_BFLOAT16: return 0x3f80u;
    default: return 1; /* integers */
  }
}

/* OnesLike's kernel state: any non-NULL pointer means "ones". */
static int ones_marker;

static void like_compute(sk_launch* l, void* state) {
  bool ones = state == &ones_marker;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  fill_launch(l, &s, NULL, ones ? one_bits(TF_TensorType(x)) : 0,
              ones ? "OnesLike" : "ZerosLike");
}

static void* fill_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, fill_compute, NULL, NULL);
}
static void* zeros_like_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, like_compute, NULL, NULL);
}
static void* ones_like_create(TF_OpKernelConstruction* c) {
  return sk_kernel_new(c, like_compute, &ones_marker, NULL);
}

/* ---- Cast: scalar conversions --------------------------------------------
 * Every source is read as float (float32, half, bfloat16), double, or
 * int64 (the integer types and bool), then converted to the destination. */

static inline float f32_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

static inline uint32_t bits_of_f32(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

static inline float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  int32_t e = (h >> 10) & 0x1f;
  uint32_t m = h & 0x3ff;
  if (e == 0x1f) /* inf; NaNs come back quiet with their payload */
    return f32_of_bits(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
  if (e == 0) {
    if (m == 0) return f32_of_bits(sign);
    e = 1; /* a denormal half is a normal float: normalise */
    while (!(m & 0x400)) {
      m <<= 1;
      e--;
    }
    m &= 0x3ff;
  }
  return f32_of_bits(sign | (uint32_t)(e + 112) << 23 | m << 13);
}

/* Rounds m / 2^shift to the nearest integer, ties to even (shift >= 1). */
static inline uint32_t round_shift(uint32_t m, int shift) {
  uint32_t q = m >> shift, r = m & ((1u << shift) - 1),
           half = 1u << (shift - 1);
  return q + (r > half || (r == half && (q & 1)));
}

static inline uint16_t f32_to_half(float f) {
  uint32_t u = bits_of_f32(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) /* inf, or NaN keeping the top payload bits */
    return sign | (a == 0x7f800000u ? 0x7c00 : 0x7e00 | ((a >> 13) & 0x3ff));
  int e = (int)(a >> 23) - 127;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  if (e > 15) return sign | 0x7c00;
  if (e >= -14) /* normal half; a rounding carry may reach inf */
    return sign |
           (uint16_t)(((uint32_t)(e + 15) << 10) + round_shift(m, 13) - 0x400u);
  int shift = -(e + 1); /* denormal half, in units of 2^-24 */
  if (shift > 24) return sign;
  return sign | (uint16_t)round_shift(m, shift);
}

static inline float bf16_to_f32(uint16_t b) {
  return f32_of_bits((uint32_t)b << 16);
}

static inline uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of_f32(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 31) ? 0xffc0 : 0x7fc0;
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* float/double -> integer: truncation; NaN and out of range give the
 * minimum (what x86's cvtt instructions return). */
static inline int32_t i32_from_f(float f) {
  return (f >= -2147483648.0f && f < 2147483648.0f) ? (int32_t)f : INT32_MIN;
}
static inline int32_t i32_from_d(double d) {
  return (d > -2147483649.0 && d < 2147483648.0) ? (int32_t)d : INT32_MIN;
}
static inline int32_t i32_from_i(int64_t i) {
  return (int32_t)(uint32_t)i;
}
static inline int64_t i64_from_f(float f) {
  return (f >= -9223372036854775808.0f && f < 9223372036854775808.0f)
             ? (int64_t)f
             : INT64_MIN;
}
static inline int64_t i64_from_d(double d) {
  return (d >= -9223372036854775808.0 && d < 9223372036854775808.0) ? (int64_t)d
                                                                    : INT64_MIN;
}
static inline int64_t i64_from_i(int64_t i) {
  return i;
}
static inline uint8_t u8_sat(int32_t v) {
  return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}
static inline uint8_t u8_from_f(float f) {
  return u8_sat(i32_from_f(f));
}
static inline uint8_t u8_from_d(double d) {
  return u8_sat(i32_from_d(d));
}
static inline uint8_t u8_from_i(int64_t i) {
  return (uint8_t)i;
}

#define TO_F32(v) _Generic((v), float : (v), default : (float)(v))
#define TO_F64(v) ((double)(v))
#define TO_HALF(v) f32_to_half(TO_F32(v))
#define TO_BF16(v) f32_to_bf16(TO_F32(v))
#define TO_BOOL(v) ((v) != 0)
#define TO_I32(v)                \
  _Generic((v), float            \
           : i32_from_f, double  \
           : i32_from_d, default \
           : i32_from_i)(v)
#define TO_I64(v)                \
  _Generic((v), float            \
           : i64_from_f, double  \
           : i64_from_d, default \
           : i64_from_i)(v)
#define TO_U8(v) \
  _Generic((v), float : u8_from_f, double : u8_from_d, default : u8_from_i)(v)

#define LD_F32(x) (x)
#define LD_F64(x) (x)
#define LD_HALF(x) half_to_f32(x)
#define LD_BF16(x) bf16_to_f32(x)
#define LD_INT(x) ((int64_t)(x))

typedef void (*cast_loop_fn)(const void* x, void* y, int64_t b, int64_t e);

/* One loop per (source, destination) pair; the table below indexes them
 * in kCastTypes order. */
#define CAST_LOOP(S, ST, LD, D, DT, TO)                                        \
  static void cast_##S##_##D(const void* xv, void* yv, int64_t b, int64_t e) { \
    const ST* x = xv;                                                          \
    DT* y = yv;                                                                \
    for (int64_t i = b; i < e; i++) y[i] = (DT)TO(LD(x[i]));                   \
  }

#define CAST_DSTS(X, S, ST, LD)      \
  X(S, ST, LD, f32, float, TO_F32)   \
  X(S, ST, LD, f64, double, TO_F64)  \
  X(S, ST, LD, i32, int32_t, TO_I32) \
  X(S, ST, LD, i64, int64_t, TO_I64) \
  X(S, ST, LD, u8, uint8_t, TO_U8)   \
  X(S, ST, LD, b, bool, TO_BOOL)     \
  X(S, ST, LD, h, uint16_t, TO_HALF) \
  X(S, ST, LD, bf, uint16_t, TO_BF16)

#define CAST_SRCS(X, Y)      \
  X(Y, f32, float, LD_F32)   \
  X(Y, f64, double, LD_F64)  \
  X(Y, i32, int32_t, LD_INT) \
  X(Y, i64, int64_t, LD_INT) \
  X(Y, u8, uint8_t, LD_INT)  \
  X(Y, b, bool, LD_INT)      \
  X(Y, h, uint16_t, LD_HALF) \
  X(Y, bf, uint16_t, LD_BF16)

#define CAST_DEFINE_ROW(Y, S, ST, LD) CAST_DSTS(CAST_LOOP, S, ST, LD)
CAST_SRCS(CAST_DEFINE_ROW, _)

#define CAST_ENTRY(S, ST, LD, D, DT, TO) cast_##S##_##D,
#define CAST_TABLE_ROW(Y, S, ST, LD) {CAST_DSTS(CAST_ENTRY, S, ST, LD)},

static const TF_DataType kCastTypes[] = {TF_FLOAT, TF_DOUBLE,   TF_INT32,
                                         TF_INT64, TF_UINT8,    TF_BOOL,
                                         TF_HALF,  TF_BFLOAT16, 0};
enum { kNumCast = 8 };
static const cast_loop_fn kCastLoops[kNumCast][kNumCast] = {
    CAST_SRCS(CAST_TABLE_ROW, _)};

/* half/bfloat16 -> bool looks at the bits, as Eigen does: no denormal
 * flushing (bfloat16 denormals are float denormals). */
static void cast_bits16_bool(const void* xv, void* yv, int64_t b, int64_t e) {
  const uint16_t* x = xv;
  bool* y = yv;
  for (int64_t i = b; i < e; i++) y[i] = (x[i] & 0x7fff) != 0;
}

/* float32 -> bfloat16 makes every NaN 0x7fc0, sign dropped, as TF's
 * vectorised path does (its scalar tail keeps the sign; nothing else
 * differs). */
static void cast_f32_bf_nan(const void* xv, void* yv, int64_t b, int64_t e) {
  const float* x = xv;
  uint16_t* y = yv;
  for (int64_t i = b; i < e; i++)
    y[i] = x[i] != x[i] ? 0x7fc0 : f32_to_bf16(x[i]);
}

/* Truncate=true: the dropped low mantissa bits of non-NaN inputs are zeroed
 * before the (then exact, unless out of range) conversion. */
static void cast_f32_h_trunc(const void* xv, void* yv, int64_t b, int64_t e) {
  const uint32_t* x = xv;
  uint16_t* y = yv;
  for (int64_t i = b; i < e; i++) {
    uint32_t u = x[i];
    if ((u & 0x7fffffffu) <= 0x7f800000u) u &= ~0x1fffu;
    y[i] = f32_to_half(f32_of_bits(u));
  }
}

static void cast_f32_bf_trunc(const void* xv, void* yv, int64_t b, int64_t e) {
  const uint32_t* x = xv;
  uint16_t* y = yv;
  for (int64_t i = b; i < e; i++) {
    uint32_t u = x[i];
    if ((u & 0x7fffffffu) <= 0x7f800000u) u &= 0xffff0000u;
    y[i] = f32_to_bf16(f32_of_bits(u));
  }
}

static inline double f64_zero_low(double d, int bits) {
  uint64_t u;
  memcpy(&u, &d, sizeof(u));
  if ((u & 0x7fffffffffffffffull) <= 0x7ff0000000000000ull)
    u &= ~((1ull << bits) - 1);
  memcpy(&d, &u, sizeof(d));
  return d;
}

static void cast_f64_f32_trunc(const void* xv, void* yv, int64_t b, int64_t e) {
  const double* x = xv;
  float* y = yv;
  for (int64_t i = b; i < e; i++) y[i] = (float)f64_zero_low(x[i], 29);
}

static void cast_f64_h_trunc(const void* xv, void* yv, int64_t b, int64_t e) {
  const double* x = xv;
  uint16_t* y = yv;
  for (int64_t i = b; i < e; i++)
    y[i] = f32_to_half((float)f64_zero_low(x[i], 42));
}

/* ---- Cast: the kernel ---------------------------------------------------- */

typedef struct cast_state {
  TF_DataType src, dst;
  cast_loop_fn loop;
} cast_state;

typedef struct cast_args {
  cast_loop_fn loop;
  const void* x;
  void* y;
  int64_t n;
} cast_args;

static void cast_range(void* arg, int64_t b, int64_t e) {
  const cast_args* a = arg;
  a->loop(a->x, a->y, b, e);
}

static void cast_run(sk_launch* l, void* args) {
  (void)l;
  cast_args* a = args;
  sim_parallel_for(a->n, 1 << 15, cast_range, a);
}

static void cast_compute(sk_launch* l, void* state) {
  const cast_state* st = state;
  TF_Tensor* x = sk_input(l, 0);
  sk_shape s;
  if (x == NULL || !sk_shape_of(l, x, &s)) return;
  if (st->loop == NULL) { /* SrcT == DstT: TF forwards the input */
    sk_output_alias(l, 0, x, st->dst, &s);
    return;
  }
  TF_Tensor* y = sk_output(l, 0, &s);
  cast_args* a = sk_args(l, sizeof(*a));
  if (!sk_ok(l) || s.n == 0) return;
  a->loop = st->loop;
  a->x = sk_data(x);
  a->y = sk_mdata(y);
  a->n = s.n;
  sk_work(l, cast_run, "Cast");
}

static int cast_index(TF_DataType t) {
  for (int i = 0; i < kNumCast; i++)
    if (kCastTypes[i] == t) return i;
  return -1;
}

static cast_loop_fn cast_pick(TF_DataType src, TF_DataType dst, bool truncate) {
  if (truncate) {
    if (src == TF_FLOAT && dst == TF_HALF) return cast_f32_h_trunc;
    if (src == TF_FLOAT && dst == TF_BFLOAT16) return cast_f32_bf_trunc;
    if (src == TF_DOUBLE && dst == TF_FLOAT) return cast_f64_f32_trunc;
    if (src == TF_DOUBLE && dst == TF_HALF) return cast_f64_h_trunc;
  }
  if (src == TF_FLOAT && dst == TF_BFLOAT16) return cast_f32_bf_nan;
  if ((src == TF_HALF || src == TF_BFLOAT16) && dst == TF_BOOL)
    return cast_bits16_bool;
  return kCastLoops[cast_index(src)][cast_index(dst)];
}

static void* cast_create(TF_OpKernelConstruction* c) {
  cast_state* st = sk_state_new(c, sizeof(*st));
  bool truncate = false;
  if (st == NULL) return NULL;
  if (!sk_attr_type(c, "SrcT", &st->src) ||
      !sk_attr_type(c, "DstT", &st->dst) ||
      !sk_attr_bool(c, "Truncate", &truncate)) {
    free(st);
    return NULL;
  }
  if (cast_index(st->src) < 0 || cast_index(st->dst) < 0) {
    /* TF's wording; SIMDEV supports fewer pairs than CPU. */
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "Cast %s to %s is not supported on SIMDEV",
                         sk_dtype_name(st->src), sk_dtype_name(st->dst));
    free(st);
    return NULL;
  }
  if (st->src != st->dst) st->loop = cast_pick(st->src, st->dst, truncate);
  return sk_kernel_new(c, cast_compute, st, free);
}

/* ---- registration ---------------------------------------------------------
 */

/* No Reshape or Identity here: TF 2.21 registers DEVICE_DEFAULT kernels for
 * both, for every type, and they serve SIMDEV already, without a copy (the
 * output shares the input's buffer). A SIMDEV kernel would duplicate them
 * (tests/sweep/registry.py refuses that). */
static const char* const kFillHost[] = {"dims", NULL};

/* No int32: TF serves int32 Fill, ZerosLike and OnesLike with host-memory
 * DEVICE_DEFAULT kernels. */
static const TF_DataType kFillTypes[] = {TF_FLOAT, TF_DOUBLE,   TF_INT64,
                                         TF_HALF,  TF_BFLOAT16, 0};

static const sk_op kOps[] = {
    /* Any pair of types the op allows: no data moves. */
    {"Bitcast", bitcast_create, NULL, NULL, NULL},
    {"Fill", fill_create, "T", kFillTypes, kFillHost},
    {"ZerosLike", zeros_like_create, "T", kFillTypes, NULL},
    {"OnesLike", ones_like_create, "T", kFillTypes, NULL},
    /* DstT is checked when the kernel is built (Unimplemented). */
    {"Cast", cast_create, "SrcT", kCastTypes, NULL, "DstT", kCastTypes},
    {NULL, NULL, NULL, NULL, NULL},
};

bool sk_register_fill_cast(char* msg, size_t len) {
  return sk_register_ops(kOps, msg, len);
}
