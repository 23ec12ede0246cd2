/*
 * conv.c - 2-D convolution as im2col + GEMM: sa_conv_fwd, sa_conv_bp_input,
 * sa_conv_bp_filter, and the geometry they share (sa_conv_window,
 * sa_conv_plan). TF's Conv2D family (src/kernels/nn/conv*.c) and the XLA
 * handlers (src/xla) run these functions; the callers validate and report.
 *
 * im2col turns the input patches of a run of output pixels into the rows of
 * a [pixels, KH*KW*Cg] matrix ("col"), so that
 *   forward         y[pixels, O]  = col x filter[K, O]
 *   filter gradient dW[K, O]     += col^T x dy[pixels, O]
 *   input gradient  col           = dy x filter^T, then col2im adds each col
 *                                   entry back to the input pixel it came
 *                                   from
 * col is scratch of at most SA_CONV_SCRATCH_BYTES, which the caller
 * allocates (sa_conv_plan says how much): the output is processed in chunks
 * of whole output rows (n, oh), one gemm per chunk (and group), so scratch
 * stays bounded and gemm stays large. 4 MiB keeps gemm's M in the thousands
 * for common layers (1792 for 56x56x64 with a 3x3 filter) while col stays
 * cache-resident; measured as fast as or faster than 16 and 64 MiB chunks.
 * When col would be the input itself (1x1 filter, stride 1, no padding; or
 * a filter covering the whole unpadded input) no scratch is used and the
 * whole convolution is a single gemm.
 *
 * Determinism: chunks depend only on shapes; im2col and col2im are spread
 * over sim_parallel_for by disjoint output rows, and col2im gathers (each
 * input row of dx is summed by one task, in a fixed kh, kw order), so results
 * are bit-identical run to run whatever the thread count.
 *
 * Thread contract: sa_conv_window, sa_conv_sizes_ok and sa_conv_plan are
 * plain functions (any thread: the callers use them on TF's or XLA's
 * thread); the rest runs on a stream worker (sa.h) and reads only its
 * sa_conv.
 */
#include <string.h>

#include "arith/sa.h"
#include "device_sim/sim.h"

/* ---- im2col (worker) --------------------------------------------------- */

typedef struct conv_job {
  const sa_conv* a;
  int64_t r0;    /* first output row (n * OH + oh) of the chunk */
  int64_t group; /* channel group */
} conv_job;

/* col rows of output row r = (n, oh) for channel group `grp`. */
static void im2col_row(const sa_conv* a, int64_t r, int64_t grp, char* dst) {
  const sa_conv_geom* g = &a->g;
  size_t es = a->es, cb = (size_t)g->kc * es;
  int64_t n = r / g->oh, oh = r % g->oh;
  const char* img = (const char*)a->x + (size_t)(n * g->h * g->w * g->c) * es;
  bool whole = g->kc == g->c && g->dw == 1;
  for (int64_t ow = 0; ow < g->ow; ow++) {
    int64_t iw0 = ow * g->sw - g->pl;
    for (int64_t kh = 0; kh < g->kh; kh++, dst += (size_t)g->kw * cb) {
      int64_t ih = oh * g->sh - g->pt + kh * g->dh;
      if (ih < 0 || ih >= g->h) {
        memset(dst, 0, (size_t)g->kw * cb);
        continue;
      }
      const char* src = img + (size_t)((ih * g->w) * g->c + grp * g->kc) * es;
      if (whole && iw0 >= 0 && iw0 + g->kw <= g->w) {
        memcpy(dst, src + (size_t)(iw0 * g->c) * es, (size_t)g->kw * cb);
        continue;
      }
      for (int64_t kw = 0; kw < g->kw; kw++) {
        int64_t iw = iw0 + kw * g->dw;
        char* d = dst + (size_t)kw * cb;
        if (iw < 0 || iw >= g->w)
          memset(d, 0, cb);
        else
          memcpy(d, src + (size_t)(iw * g->c) * es, cb);
      }
    }
  }
}

static void im2col_range(void* arg, int64_t lo, int64_t hi) {
  const conv_job* j = arg;
  const sa_conv_geom* g = &j->a->g;
  size_t row_bytes = (size_t)(g->ow * g->kh * g->kw * g->kc) * j->a->es;
  for (int64_t i = lo; i < hi; i++)
    im2col_row(j->a, j->r0 + i, j->group, (char*)j->a->col + i * row_bytes);
}

/* Grain (in output rows) giving each task ~32K elements of copying. */
static int64_t row_grain(const sa_conv_geom* g, int64_t k) {
  int64_t per_row = g->ow * k;
  return per_row >= 32768 ? 1 : 32768 / (per_row ? per_row : 1);
}

void sa_conv_im2col(const sa_conv* a, int64_t r0, int64_t rows, int64_t grp) {
  conv_job j = {a, r0, grp};
  const sa_conv_geom* g = &a->g;
  sim_parallel_for(rows, row_grain(g, g->kh * g->kw * g->kc), im2col_range, &j);
}

/* ---- geometry (any thread) ---------------------------------------------- */

/* Checked steps: each sets *r and is true when the result fits int64. */
static bool add_ok(int64_t a, int64_t b, int64_t* r) {
  return !__builtin_add_overflow(a, b, r);
}
static bool sub_ok(int64_t a, int64_t b, int64_t* r) {
  return !__builtin_sub_overflow(a, b, r);
}

enum sa_window sa_conv_window(enum sa_pad pad, int64_t in, int64_t k,
                              int64_t dil, int64_t stride,
                              const int64_t pads[2], int64_t* out,
                              int64_t* before) {
  int64_t eff, t; /* t: the numerator of *out = t / stride */
  if (!sub_ok(k, 1, &eff) || __builtin_mul_overflow(eff, dil, &eff) ||
      !add_ok(eff, 1, &eff))
    return SA_WINDOW_OVERFLOW;
  switch (pad) {
    case SA_PAD_VALID:
      if (!sub_ok(in, eff, &t) || !add_ok(t, stride, &t))
        return SA_WINDOW_OVERFLOW;
      *before = 0;
      break;
    case SA_PAD_SAME: {
      if (!add_ok(in, stride - 1, &t)) return SA_WINDOW_OVERFLOW;
      /* (t / stride - 1) * stride lies in [-stride, in - 1]: it fits. */
      int64_t need;
      if (!add_ok((t / stride - 1) * stride, eff, &need) ||
          !sub_ok(need, in, &need))
        return SA_WINDOW_OVERFLOW;
      *before = need > 0 ? need / 2 : 0;
      break;
    }
    case SA_PAD_EXPLICIT:
      if (!add_ok(in, pads[0], &t) || !add_ok(t, pads[1], &t) ||
          !sub_ok(t, eff, &t) || !add_ok(t, stride, &t))
        return SA_WINDOW_OVERFLOW;
      *before = pads[0];
      break;
    default: return SA_WINDOW_OVERFLOW; /* not an sa_pad */
  }
  *out = t / stride;
  return *out >= 0 ? SA_WINDOW_OK : SA_WINDOW_NEGATIVE;
}

/* Whether im2col of the input would be the input itself. */
static bool is_direct(const sa_conv_geom* g) {
  if (g->groups != 1 || g->pt != 0 || g->pl != 0) return false;
  bool one = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 &&
             g->oh == g->h && g->ow == g->w;
  bool whole = g->kh == g->h && g->kw == g->w && g->oh == 1 && g->ow == 1 &&
               (g->dh == 1 || g->kh == 1) && (g->dw == 1 || g->kw == 1);
  return one || whole;
}

bool sa_conv_sizes_ok(const sa_conv_geom* g) {
  /* Every product without overflow: callers may pass sizes no buffer has
   * (the im2col row exists only as scratch), and a zero-size dim elsewhere
   * lets the others be anything. */
  int64_t k, p, row;
  return !__builtin_mul_overflow(g->kh, g->kw, &k) &&
         !__builtin_mul_overflow(k, g->kc, &k) &&
         !__builtin_mul_overflow(g->n, g->oh, &p) &&
         !__builtin_mul_overflow(p, g->ow, &p) && k <= SA_BLAS_MAX &&
         p <= SA_BLAS_MAX && g->o <= SA_BLAS_MAX &&
         !__builtin_mul_overflow(g->ow, k, &row) &&
         !__builtin_mul_overflow(row, (int64_t)sizeof(double), &row);
}

size_t sa_conv_plan(sa_conv* a, const sa_conv_geom* g, sa_dtype dt) {
  *a = (sa_conv){.dt = dt, .es = sa_dtype_size(dt), .g = *g};
  a->direct = is_direct(g);
  int64_t rows = g->n * g->oh;
  int64_t k = g->kh * g->kw * g->kc;
  a->zero_only =
      rows == 0 || g->ow == 0 || k == 0 || g->o == 0 || g->groups == 0;
  if (a->direct || a->zero_only) return 0;
  size_t row_bytes = (size_t)(g->ow * k) * a->es;
  int64_t chunk = (int64_t)(SA_CONV_SCRATCH_BYTES / row_bytes);
  a->chunk_rows = chunk < 1 ? 1 : chunk > rows ? rows : chunk;
  return (size_t)a->chunk_rows * row_bytes;
}

/* ---- forward (worker) ---------------------------------------------------- */

void sa_conv_fwd(const sa_conv* a) {
  const sa_conv_geom* g = &a->g;
  if (a->zero_only) {
    memset(a->y, 0, (size_t)(g->n * g->oh * g->ow * g->o) * a->es);
    sa_epi_apply(a->ep, a->y, g->n * g->oh * g->ow, g->o, g->o, 1);
    return;
  }
  int64_t og = g->o / g->groups, k = g->kh * g->kw * g->kc;
  if (a->direct) {
    sa_gemm(a->dt, false, false, g->n * g->oh * g->ow, g->o, k, a->x, k, a->f,
            g->o, 0., a->y, g->o, a->ep);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    char* y = (char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    for (int64_t grp = 0; grp < g->groups; grp++) {
      /* the group's og output channels take their part of the bias */
      sa_epi ge;
      if (a->ep != NULL) {
        ge = *a->ep;
        ge.bias = (const char*)ge.bias + (size_t)(grp * og) * a->es;
      }
      sa_conv_im2col(a, r0, nr, grp);
      sa_gemm(a->dt, false, false, nr * g->ow, og, k, a->col, k,
              (const char*)a->f + (size_t)(grp * og) * a->es, g->o, 0.,
              y + (size_t)(grp * og) * a->es, g->o, a->ep != NULL ? &ge : NULL);
    }
  }
}

/* ---- backprops (worker) -------------------------------------------------- */

static void add_n(sa_dtype dt, void* d, const void* s, int64_t n) {
  if (dt == SA_F32) {
    float* fd = d;
    const float* fs = s;
    for (int64_t i = 0; i < n; i++) fd[i] += fs[i];
  } else {
    double* dd = d;
    const double* ds = s;
    for (int64_t i = 0; i < n; i++) dd[i] += ds[i];
  }
}

/* Adds into dx row (n, ih) every col entry of output rows [oa, ob) of image
 * n that was copied from it. col row 0 is output row r0. */
static void col2im_row(const sa_conv* a, int64_t r0, int64_t n, int64_t ih,
                       int64_t oa, int64_t ob) {
  const sa_conv_geom* g = &a->g;
  size_t es = a->es;
  int64_t k = g->kh * g->kw * g->c;
  char* dxrow = (char*)a->x + (size_t)((n * g->h + ih) * g->w * g->c) * es;
  for (int64_t kh = 0; kh < g->kh; kh++) {
    int64_t t = ih + g->pt - kh * g->dh;
    if (t < 0) break;
    if (t % g->sh != 0) continue;
    int64_t oh = t / g->sh;
    if (oh < oa || oh >= ob) continue;
    const char* colrow =
        (const char*)a->col + (size_t)((n * g->oh + oh - r0) * g->ow * k) * es;
    for (int64_t iw = 0; iw < g->w; iw++) {
      char* d = dxrow + (size_t)(iw * g->c) * es;
      for (int64_t kw = 0; kw < g->kw; kw++) {
        int64_t u = iw + g->pl - kw * g->dw;
        if (u < 0) break;
        if (u % g->sw != 0 || u / g->sw >= g->ow) continue;
        const char* s =
            colrow + (size_t)((u / g->sw) * k + (kh * g->kw + kw) * g->c) * es;
        add_n(a->dt, d, s, g->c);
      }
    }
  }
}

typedef struct col2im_job {
  const sa_conv* a;
  int64_t r0, r1; /* output rows of the chunk */
  int64_t n0;     /* first image of the chunk */
} col2im_job;

static void col2im_range(void* arg, int64_t lo, int64_t hi) {
  const col2im_job* j = arg;
  const sa_conv_geom* g = &j->a->g;
  for (int64_t t = lo; t < hi; t++) {
    int64_t n = j->n0 + t / g->h, ih = t % g->h;
    int64_t oa = j->r0 - n * g->oh, ob = j->r1 - n * g->oh;
    col2im_row(j->a, j->r0, n, ih, oa < 0 ? 0 : oa, ob > g->oh ? g->oh : ob);
  }
}

static void col2im(const sa_conv* a, int64_t r0, int64_t r1) {
  const sa_conv_geom* g = &a->g;
  int64_t n0 = r0 / g->oh, n1 = (r1 - 1) / g->oh + 1;
  col2im_job j = {a, r0, r1, n0};
  int64_t per_row = g->w * g->c * g->kh * g->kw;
  int64_t grain = per_row >= 32768 ? 1 : 32768 / (per_row ? per_row : 1);
  sim_parallel_for((n1 - n0) * g->h, grain, col2im_range, &j);
}

void sa_conv_bp_input(const sa_conv* a) {
  const sa_conv_geom* g = &a->g;
  int64_t k = g->kh * g->kw * g->c;
  if (a->zero_only || !a->direct)
    memset(a->x, 0, (size_t)(g->n * g->h * g->w * g->c) * a->es);
  if (a->zero_only) return;
  if (a->direct) { /* dx = dy x filter^T */
    sa_gemm(a->dt, false, true, g->n * g->oh * g->ow, k, g->o, a->y, g->o, a->f,
            g->o, 0., a->x, k, NULL);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    const char* dy = (const char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    sa_gemm(a->dt, false, true, nr * g->ow, k, g->o, dy, g->o, a->f, g->o, 0.,
            a->col, k, NULL);
    col2im(a, r0, r0 + nr);
  }
}

void sa_conv_bp_filter(const sa_conv* a) {
  const sa_conv_geom* g = &a->g;
  int64_t k = g->kh * g->kw * g->c;
  if (a->zero_only) {
    memset(a->f, 0, (size_t)(k * g->o) * a->es);
    return;
  }
  if (a->direct) { /* dW = x^T x dy */
    sa_gemm(a->dt, true, false, k, g->o, g->n * g->oh * g->ow, a->x, k, a->y,
            g->o, 0., a->f, g->o, NULL);
    return;
  }
  int64_t rows = g->n * g->oh;
  for (int64_t r0 = 0; r0 < rows; r0 += a->chunk_rows) {
    int64_t nr = rows - r0 < a->chunk_rows ? rows - r0 : a->chunk_rows;
    const char* dy = (const char*)a->y + (size_t)(r0 * g->ow * g->o) * a->es;
    sa_conv_im2col(a, r0, nr, 0);
    sa_gemm(a->dt, true, false, k, g->o, nr * g->ow, a->col, k, dy, g->o,
            r0 == 0 ? 0. : 1., a->f, g->o, NULL);
  }
}
