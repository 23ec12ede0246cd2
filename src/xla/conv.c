/*
 * conv.c - simdev_conv2d and its two backprops: 2-D convolution as im2col +
 * GEMM through src/arith (sa_conv_*, the code TF's Conv2D kernels run).
 *
 * Layouts (row-major, *B the leading batch dims, equal everywhere):
 *   simdev_conv2d(x, w) -> y
 *     x [*B, N, H, W, C] (NHWC), w [*B, KH, KW, C/g, O] (HWIO),
 *     y [*B, N, OH, OW, O]; g = C / w's input depth must divide C and O.
 *   simdev_conv2d_backprop_input(dy, w) -> dx: the result's shape gives
 *     the input size; groups 1.
 *   simdev_conv2d_backprop_filter(x, dy) -> dw: the result's shape gives
 *     the filter size; groups 1.
 * Attributes, all required: strides, dilations: s64 arrays [h, w] (>= 1);
 * padding: SAME | VALID | EXPLICIT (XLA's output size: sa_conv_window,
 * and 0 where the padded input is smaller than the dilated filter);
 * explicit_paddings: s64 array [top, bottom, left, right] (>= 0; all zeros
 * unless EXPLICIT).
 *
 * Handlers run on the thread XLA calls them from (XLA's, or simdev0-s0
 * when a simdev call precedes them in the program); cv_run on the stream
 * worker, which takes the im2col scratch from the device region: when it does
 * not fit, the call fails with RESOURCE_EXHAUSTED through its future.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sx_internal.h"

typedef enum { CV_FWD, CV_BP_INPUT, CV_BP_FILTER } cv_kind;

static const char* const cv_targets[] = {"simdev_conv2d",
                                         "simdev_conv2d_backprop_input",
                                         "simdev_conv2d_backprop_filter"};

typedef struct cv_job {
  sx_job job; /* first */
  cv_kind kind;
  sa_conv plan; /* geometry and type; buffers set per batch element */
  size_t scratch;
  int64_t batch;      /* product of *B */
  char *x, *f, *y;    /* first batch element's x, filter, y (roles as in
                         sa_conv: the gradient sits in its forward slot) */
  int64_t xn, fn, yn; /* elements per batch element */
} cv_job;

static XLA_FFI_Error_Code cv_run(sx_job* j, sim_device* dev, char* msg,
                                 size_t len) {
  const cv_job* g = (const cv_job*)j;
  void* col = NULL; /* device memory: freed as it came */
  if (g->scratch > 0) {
    col = sim_mem_alloc(dev, g->scratch);
    if (col == NULL) {
      sim_mem_stats st;
      sim_mem_get_stats(dev, &st);
      snprintf(msg, len,
               "device memory exhausted: %zu bytes of im2col scratch do not "
               "fit in simdev device 0 (SIMDEV_MEMORY_MB=%llu, %llu bytes in "
               "use)",
               g->scratch, (unsigned long long)(st.bytes_limit >> 20),
               (unsigned long long)st.bytes_in_use);
      return XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
    }
  }
  size_t es = g->plan.es;
  for (int64_t i = 0; i < g->batch; i++) {
    sa_conv a = g->plan;
    a.x = g->x + (size_t)(i * g->xn) * es;
    a.f = g->f + (size_t)(i * g->fn) * es;
    a.y = g->y + (size_t)(i * g->yn) * es;
    a.col = sim_mem_alias(col); /* the bytes, on a discrete device too */
    a.ep = NULL;
    switch (g->kind) {
      case CV_FWD: sa_conv_fwd(&a); break;
      case CV_BP_INPUT: sa_conv_bp_input(&a); break;
      case CV_BP_FILTER: sa_conv_bp_filter(&a); break;
    }
  }
  sim_mem_free(dev, col);
  return XLA_FFI_Error_Code_OK;
}

/* The four attributes, checked. */
typedef struct cv_attrs {
  int64_t strides[2], dilations[2], pads[4];
  enum sa_pad pad;
  const char* pad_name;
} cv_attrs;

static XLA_FFI_Error* all_at_least(const sx_call* c, const char* name,
                                   const int64_t* v, int n, int64_t min) {
  for (int i = 0; i < n; i++)
    if (v[i] < min) {
      char got[128];
      sx_fmt_dims(got, sizeof(got), v, n);
      return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "attribute '%s' must be >= %" PRId64 ", got %s", name,
                      min, got);
    }
  return NULL;
}

static XLA_FFI_Error* cv_attrs_decode(const sx_call* c, cv_attrs* at) {
  static const char* const names[] = {"dilations", "explicit_paddings",
                                      "padding", "strides"};
  static const struct {
    const char* name;
    enum sa_pad pad;
  } pads[] = {{"SAME", SA_PAD_SAME},
              {"VALID", SA_PAD_VALID},
              {"EXPLICIT", SA_PAD_EXPLICIT}};
  XLA_FFI_Error* e;
  const char* s;
  size_t len;
  if ((e = sx_attrs_known(c, names, 4)) ||
      (e = sx_attr_i64s(c, "strides", 2, at->strides)) ||
      (e = sx_attr_i64s(c, "dilations", 2, at->dilations)) ||
      (e = sx_attr_str(c, "padding", &s, &len)) ||
      (e = sx_attr_i64s(c, "explicit_paddings", 4, at->pads)))
    return e;
  at->pad_name = NULL;
  for (int i = 0; i < 3; i++)
    if (strlen(pads[i].name) == len && memcmp(pads[i].name, s, len) == 0) {
      at->pad = pads[i].pad;
      at->pad_name = pads[i].name;
    }
  if (at->pad_name == NULL)
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute 'padding' must be SAME, VALID or EXPLICIT, got "
                    "'%.*s'",
                    (int)(len > 64 ? 64 : len), s);
  if ((e = all_at_least(c, "strides", at->strides, 2, 1)) ||
      (e = all_at_least(c, "dilations", at->dilations, 2, 1)) ||
      (e = all_at_least(c, "explicit_paddings", at->pads, 4, 0)))
    return e;
  if (at->pad != SA_PAD_EXPLICIT &&
      (at->pads[0] | at->pads[1] | at->pads[2] | at->pads[3]) != 0) {
    char got[128];
    sx_fmt_dims(got, sizeof(got), at->pads, 4);
    return sx_error(c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "attribute 'explicit_paddings' must be all zeros unless "
                    "padding is EXPLICIT, got %s with %s",
                    got, at->pad_name);
  }
  return NULL;
}

/* One spatial axis's output size and padding before. Sizes and attribute
 * values past INT32_MAX are refused first, so that sa_conv_window's sums
 * and products cannot overflow. A padded input smaller than the dilated
 * filter gives an empty output, as in XLA (lax.conv_general_dilated):
 * sa_conv_window follows TF, whose Conv2D refuses a negative size. */
static XLA_FFI_Error* window(const sx_call* c, const cv_attrs* at, int axis,
                             int64_t in, int64_t k, int64_t* out,
                             int64_t* before) {
  const char* dim = axis ? "width" : "height";
  const int64_t* p = at->pads + 2 * axis;
  int64_t s = at->strides[axis], d = at->dilations[axis];
  if (in > INT32_MAX || k > INT32_MAX || s > INT32_MAX || d > INT32_MAX ||
      p[0] > INT32_MAX || p[1] > INT32_MAX)
    return sx_error(c, XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "input %s %" PRId64 ", filter %s %" PRId64
                    ", stride %" PRId64 ", dilation %" PRId64
                    " or padding %" PRId64 "/%" PRId64
                    ": simdev takes values up to %d",
                    dim, in, dim, k, s, d, p[0], p[1], INT32_MAX);
  /* The bounds above leave no overflow; a negative size is XLA's empty. */
  if (sa_conv_window(at->pad, in, k, d, s, p, out, before) != SA_WINDOW_OK)
    *out = 0;
  return NULL;
}

static XLA_FFI_Error* conv(XLA_FFI_CallFrame* frame, cv_kind kind) {
  if (sx_metadata(frame)) return NULL;
  sx_call c;
  XLA_FFI_Error* e = sx_begin(&c, frame, cv_targets[kind], 2, 1);
  if (e) return e;
  /* img: [N, H, W, C]; fil: [KH, KW, KC, O]; out: [N, OH, OW, O]. Which
   * of them are operands and which is the result depends on kind. */
  sx_buf img, fil, out;
  sx_buf* bufs[3][3] = {{&img, &fil, &out},  /* x, w -> y */
                        {&out, &fil, &img},  /* dy, w -> dx */
                        {&img, &out, &fil}}; /* x, dy -> dw */
  static const char* const what[3][3] = {
      {"operand x", "operand w", "result y"},
      {"operand dy", "operand w", "result dx"},
      {"operand x", "operand dy", "result dw"}};
  static const char* const first[3] = {"x", "dy", "x"};
  sa_dtype dt = 0;
  if ((e = sx_buffer(&c, what[kind][0], sx_arg(&c, 0), &dt, NULL,
                     bufs[kind][0])) ||
      (e = sx_buffer(&c, what[kind][1], sx_arg(&c, 1), &dt, first[kind],
                     bufs[kind][1])) ||
      (e = sx_buffer(&c, what[kind][2], sx_ret(&c, 0), &dt, first[kind],
                     bufs[kind][2])))
    return e;
  cv_attrs at;
  if ((e = cv_attrs_decode(&c, &at))) return e;

  /* Ranks and batch dims: against the first buffer (an operand). */
  sx_buf* ref = bufs[kind][0];
  if ((e = sx_min_rank(&c, ref, 4))) return e;
  char why[64];
  snprintf(why, sizeof(why), " (%s's)", first[kind]);
  int64_t nb = ref->rank - 4;
  for (int i = 1; i < 3; i++)
    if ((e = sx_rank(&c, bufs[kind][i], ref->rank, why)) ||
        (e = sx_batch(&c, bufs[kind][i], ref, nb)))
      return e;
  const int64_t* id = img.dims + nb;
  const int64_t* fd = fil.dims + nb;
  sa_conv_geom g = {.n = id[0],
                    .h = id[1],
                    .w = id[2],
                    .c = id[3],
                    .kh = fd[0],
                    .kw = fd[1],
                    .kc = fd[2],
                    .o = fd[3],
                    .sh = at.strides[0],
                    .sw = at.strides[1],
                    .dh = at.dilations[0],
                    .dw = at.dilations[1]};
  if (g.kh < 1 || g.kw < 1)
    return sx_error(&c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "%s must have a filter height and width >= 1, got %" PRId64
                    "x%" PRId64,
                    fil.what, g.kh, g.kw);
  if (g.kc == 0 ? g.c != 0 : g.c % g.kc != 0)
    return sx_error(&c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "the input depth %" PRId64
                    " (%s) is not a multiple of "
                    "the filter's input depth %" PRId64 " (%s)",
                    g.c, img.what, g.kc, fil.what);
  g.groups = g.kc == 0 ? 0 : g.c / g.kc;
  if (g.groups > 1 && g.o % g.groups != 0)
    return sx_error(&c, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                    "the output depth %" PRId64
                    " (%s) is not a multiple of "
                    "the %" PRId64 " groups (input depth %" PRId64
                    " / filter input depth %" PRId64 ")",
                    g.o, fil.what, g.groups, g.c, g.kc);
  if (kind != CV_FWD && g.groups > 1)
    return sx_error(&c, XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "grouped convolutions (%" PRId64
                    " groups) have no backprop in simdev: the filter's input "
                    "depth must equal the input depth %" PRId64,
                    g.groups, g.c);
  if ((e = window(&c, &at, 0, g.h, g.kh, &g.oh, &g.pt)) ||
      (e = window(&c, &at, 1, g.w, g.kw, &g.ow, &g.pl)))
    return e;
  int64_t want[SX_MAX_RANK];
  memcpy(want, ref->dims, (size_t)nb * sizeof(int64_t));
  want[nb] = g.n;
  want[nb + 1] = g.oh;
  want[nb + 2] = g.ow;
  want[nb + 3] = g.o;
  if ((e = sx_shape(&c, &out, want))) return e;
  if (!sa_conv_sizes_ok(&g))
    return sx_error(&c, XLA_FFI_Error_Code_UNIMPLEMENTED,
                    "the convolution is too large for simdev: its GEMMs "
                    "would exceed %" PRId64
                    " rows or columns (the largest "
                    "size OpenBLAS takes) or an im2col row 2^63 bytes",
                    (int64_t)SA_BLAS_MAX);

  cv_job plan = {.kind = kind};
  plan.scratch = sa_conv_plan(&plan.plan, &g, dt);
  const sx_buf* res = bufs[kind][2];
  if (res->elems == 0) return NULL;
  if (plan.plan.zero_only) { /* nothing to multiply: zeros, no stream */
    memset(res->data, 0, (size_t)res->elems * sa_dtype_size(dt));
    return NULL;
  }
  plan.batch = sx_prod(ref->dims, nb);
  plan.x = img.data;
  plan.f = fil.data;
  plan.y = out.data;
  plan.xn = sx_prod(id, 4);
  plan.fn = sx_prod(fd, 4);
  plan.yn = sx_prod(out.dims + nb, 4);
  cv_job* j = sx_job_new(sizeof(*j), cv_run);
  if (j == NULL) return sx_no_memory(&c);
  plan.job = j->job;
  *j = plan;
  return sx_launch(&c, &j->job);
}

XLA_FFI_Error* simdev_xla_conv2d(XLA_FFI_CallFrame* frame) {
  return conv(frame, CV_FWD);
}

XLA_FFI_Error* simdev_xla_conv2d_backprop_input(XLA_FFI_CallFrame* frame) {
  return conv(frame, CV_BP_INPUT);
}

XLA_FFI_Error* simdev_xla_conv2d_backprop_filter(XLA_FFI_CallFrame* frame) {
  return conv(frame, CV_BP_FILTER);
}
