/*
 * fold_pad.c - pass `fold_pad`: a zero Pad that only feeds convolutions
 * becomes their explicit padding.
 *
 *   y = Conv2D(Pad(x, paddings), w, padding=VALID|EXPLICIT)
 *     ->  y = Conv2D(x, w, padding=EXPLICIT, explicit_paddings += paddings)
 *
 * (DepthwiseConv2dNative likewise: its OpDef and simdev's kernel take
 * EXPLICIT too.) This is Keras's ZeroPadding2D before a "valid" Conv2D, as
 * in MobileNetV2 and ResNet50: the padded copy of the input is never made,
 * the kernel reads the taps that fall in the padding as zeros.
 *
 * Folded only when (anything else is left alone):
 * - Pad is `Pad`, or `PadV2` whose constant_values is a Const holding +0.0
 *   (float or double, every stored value zero);
 * - paddings is a Const of 8 int32/int64 values (a rank-4 input), all >= 0,
 *   zero in the batch and channel dimensions of the convolution's
 *   data_format (explicit_paddings can pad the spatial dimensions only);
 * - every consumer of the Pad's output reads it as input 0 of a
 *   convolution, or of a convolution's filter gradient
 *   (Conv2DBackpropFilter, DepthwiseConv2dNativeBackpropFilter: in a
 *   training step the padded tensor feeds both, and the gradient with the
 *   same explicit padding is the same gradient), at least one a forward
 *   convolution, all with the same strides, dilations, padding,
 *   explicit_paddings and data_format; the Pad is not in the preserve list,
 *   and it and its consumers are on the same SIMDEV device with the same T;
 *   a node that waits on the Pad (a control edge: TF's constant folding
 *   leaves one on every Shape of the padded tensor it folds) then waits on
 *   the producer of x, the only thing the Pad itself waited for besides its
 *   own control inputs (which the Pad's consumers take over) and a Const;
 * - the convolution's padding is VALID or EXPLICIT (SAME's amount depends on
 *   the input size; folding into it would need shapes).
 * Each consumer keeps its name; the Pad's control inputs move to them.
 *
 * Runs before `remap`: a Conv2D made EXPLICIT still fuses (_FusedConv2D
 * takes EXPLICIT), a depthwise one does not (_FusedDepthwiseConv2dNative
 * has no explicit padding), so Pad + DepthwiseConv2dNative + BiasAdd keeps
 * its BiasAdd apart. Idempotent: the Pad is gone after the first run.
 *
 * Thread contract: none of its own; the graph belongs to the caller.
 */
#include <stdio.h>
#include <string.h>

#include "graph/passes.h"

/* TF's DataType enum values (types.proto). */
enum { DT_FLOAT = 1, DT_DOUBLE = 2 };

/* Most inputs a folded convolution may end up with, and most consumers a
 * folded Pad may have (bounded stack use; more is left alone). */
#define MAX_INPUTS 48
#define MAX_CONSUMERS 8

/* ---- a Const of +0.0 ---------------------------------------------------- */

/* Reads a varint at *p (< end); false if truncated or longer than 10 bytes. */
static bool varint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

static bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}

/* True if the serialized TensorProto [p, end) holds dtype `dtype` and only
 * +0.0 values: tensor_content (4), float_val (5) or double_val (6), packed
 * or not, all zero bytes; no values at all also means zero. Any other field
 * than dtype (1), tensor_shape (2), version_number (3) is unfamiliar. */
static bool tensor_is_zero(const uint8_t* p, const uint8_t* end, int dtype) {
  uint64_t got = 0;
  while (p < end) {
    uint64_t key, len;
    if (!varint(&p, end, &key)) return false;
    int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 0) { /* varint */
      uint64_t v;
      if (!varint(&p, end, &v)) return false;
      if (field == 1)
        got = v;
      else if (field != 3)
        return false;
    } else if (wire == 2) { /* length-delimited */
      if (!varint(&p, end, &len) || len > (uint64_t)(end - p)) return false;
      if (field != 2 && !((field == 4 || field == 5 || field == 6) &&
                          all_zero(p, (size_t)len)))
        return false;
      p += len;
    } else if (wire == 5 || wire == 1) { /* fixed32 / fixed64 */
      size_t n = wire == 5 ? 4 : 8;
      if ((size_t)(end - p) < n || (field != 5 && field != 6) ||
          !all_zero(p, n))
        return false;
      p += n;
    } else {
      return false;
    }
  }
  return (int)got == dtype;
}

/* n is a Const whose value is a +0.0 tensor of `dtype`. */
static bool const_is_zero(const sg_node* n, int dtype) {
  int t;
  if (strcmp(n->op, "Const") != 0 || !sg_attr_type(n, "dtype", &t) ||
      t != dtype)
    return false;
  const sg_attr* a = sg_attr_find(n, "value");
  if (a == NULL) return false;
  /* AttrValue { tensor = 8 (TensorProto) } and nothing else. */
  const uint8_t* p = a->value;
  const uint8_t* end = a->value + a->len;
  uint64_t key, len;
  if (!varint(&p, end, &key) || key != ((8 << 3) | 2) ||
      !varint(&p, end, &len) || len != (uint64_t)(end - p))
    return false;
  return tensor_is_zero(p, end, dtype);
}

/* ---- the pattern -------------------------------------------------------- */

/* The node behind data input i of n when it is output 0 of a live node. */
static sg_node* producer(const sg_graph* g, const sg_node* n, int i) {
  sg_ref r = sg_input(g, n, i);
  return r.node != NULL && !r.node->removed && r.port == 0 ? r.node : NULL;
}

/* The ops whose input 0 a Pad may fold into, with their data input count. */
static int foldable_inputs(const sg_node* c, bool* forward) {
  static const struct {
    const char* op;
    int ninputs;
    bool forward;
  } kOps[] = {{"Conv2D", 2, true},
              {"DepthwiseConv2dNative", 2, true},
              {"Conv2DBackpropFilter", 3, false},
              {"DepthwiseConv2dNativeBackpropFilter", 3, false}};
  for (size_t i = 0; i < sizeof(kOps) / sizeof(kOps[0]); i++) {
    if (strcmp(c->op, kOps[i].op) == 0) {
      *forward = kOps[i].forward;
      return kOps[i].ninputs;
    }
  }
  return -1;
}

/* a and b hold attribute `name` with the same serialized value, or both
 * lack it. */
static bool same_attr(const sg_node* a, const sg_node* b, const char* name) {
  const sg_attr* x = sg_attr_find(a, name);
  const sg_attr* y = sg_attr_find(b, name);
  if (x == NULL || y == NULL) return x == y;
  return x->len == y->len && memcmp(x->value, y->value, x->len) == 0;
}

/* The consumers of p, into c[0..*n): every data use is input 0 of a
 * convolution (or of its filter gradient, which reads the same padded
 * input) on p's device with p's T, all with the same window attributes, at
 * least one a forward convolution. */
static bool consumers(sg_graph* g, const sg_node* p, int t, sg_node** c,
                      int* n) {
  static const char* const kWindow[] = {"strides", "dilations", "padding",
                                        "explicit_paddings", "data_format"};
  sg_use use[MAX_CONSUMERS];
  bool any_forward = false;
  *n = sg_uses(g, p, SG_ANY_PORT, use, MAX_CONSUMERS);
  if (*n < 1 || *n > MAX_CONSUMERS) return false;
  for (int i = 0; i < *n; i++) {
    sg_node* u = use[i].node;
    bool forward = false;
    int tu;
    if (use[i].input != 0 || foldable_inputs(u, &forward) < 0 ||
        sg_num_data_inputs(u) != foldable_inputs(u, &forward) ||
        !sg_on_simdev(u) || strcmp(u->device, p->device) != 0 ||
        !sg_attr_type(u, "T", &tu) || tu != t)
      return false;
    for (size_t k = 0; k < sizeof(kWindow) / sizeof(kWindow[0]); k++)
      if (!same_attr(u, use[0].node, kWindow[k])) return false;
    for (int j = 0; j < i; j++)
      if (c[j] == u) return false; /* input 0 is one input: cannot repeat */
    any_forward = any_forward || forward;
    c[i] = u;
  }
  return any_forward;
}

static bool listed(const char* const* list, int n, const char* s) {
  for (int i = 0; i < n; i++)
    if (strcmp(list[i], s) == 0) return true;
  return false;
}

/* Rewrites the inputs of u, a consumer of p, for p's removal: a data input
 * 0 that reads p reads x (p's input) instead; a control input on p becomes
 * one on x's node; p's own control inputs are added (once each). */
static int reroute(sg_graph* g, sg_node* u, const sg_node* p, int pdata,
                   const char* x_control, sg_err* err) {
  const char* inputs[MAX_INPUTS];
  int n = 0;
  bool had_control = false;
  for (int i = 0; i < u->ninputs; i++) {
    sg_ref r = sg_input(g, u, i);
    if (r.node == p && r.port == -1)
      had_control = true;
    else
      inputs[n++] = i == 0 && r.node == p ? p->inputs[0] : u->inputs[i];
  }
  /* then ^x if u waited on p, then p's own control inputs */
  if (had_control && !listed(inputs, n, x_control)) inputs[n++] = x_control;
  for (int i = pdata; i < p->ninputs; i++)
    if (!listed(inputs, n, p->inputs[i])) inputs[n++] = p->inputs[i];
  return sg_set_inputs(g, u, inputs, n, err);
}

/* Folds Pad p into its convolution(s) if every condition holds; 1 if
 * folded, 0 if left alone, -1 on error. */
static int try_fold(sg_graph* g, const sg_ctx* ctx, sg_node* p, sg_err* err) {
  bool v2 = strcmp(p->op, "PadV2") == 0;
  int t, pdata = v2 ? 3 : 2;
  if ((!v2 && strcmp(p->op, "Pad") != 0) || !sg_on_simdev(p) ||
      sg_preserved(ctx, p->name) || sg_num_data_inputs(p) != pdata ||
      !sg_attr_type(p, "T", &t))
    return 0;
  if (v2) {
    sg_node* cv = producer(g, p, 2);
    if (cv == NULL || !const_is_zero(cv, t)) return 0;
  }
  sg_node* k = producer(g, p, 1);
  int64_t pads[9];
  int npads = 0;
  if (k == NULL || strcmp(k->op, "Const") != 0 ||
      !sg_const_ints(k, pads, 9, &npads) || npads != 8)
    return 0;
  sg_node* conv[MAX_CONSUMERS];
  int nconv = 0;
  if (!consumers(g, p, t, conv, &nconv)) return 0;
  /* Control uses of p (TF's constant folding leaves one on each Shape it
   * folds) will wait for x's producer instead: p only waited for it too
   * (and for its paddings, a Const). */
  sg_use ctl[MAX_CONSUMERS];
  int nctl = sg_uses(g, p, -1, ctl, MAX_CONSUMERS);
  sg_ref x = sg_input(g, p, 0);
  if (nctl > MAX_CONSUMERS || x.node == NULL) return 0;
  const char* x_control = sg_input_name(g, x.node->name, -1);
  if (x_control == NULL) return sg_fail(err, SG_ENOMEM, "fold_pad: no memory");
  sg_node* c = conv[0]; /* all have the same window attributes */

  char pad[16], fmt[8] = "NHWC";
  if (!sg_attr_string(c, "padding", pad, sizeof(pad))) return 0;
  if (sg_attr_find(c, "data_format") != NULL &&
      !sg_attr_string(c, "data_format", fmt, sizeof(fmt)))
    return 0;
  int channel;
  if (strcmp(fmt, "NHWC") == 0)
    channel = 3;
  else if (strcmp(fmt, "NCHW") == 0)
    channel = 1;
  else
    return 0;
  int64_t sum[8] = {0};
  if (strcmp(pad, "EXPLICIT") == 0) {
    int n = 0;
    if (!sg_attr_ints(c, "explicit_paddings", sum, 8, &n) || n != 8) return 0;
  } else if (strcmp(pad, "VALID") != 0) {
    return 0;
  }
  for (int i = 0; i < 8; i++) {
    if (pads[i] < 0 || sum[i] < 0) return 0;
    bool spatial = i / 2 != 0 && i / 2 != channel;
    if (!spatial && pads[i] != 0) return 0;
    if (pads[i] > INT64_MAX - sum[i]) return 0;
    sum[i] += pads[i];
  }
  for (int i = 0; i < nconv; i++)
    if (conv[i]->ninputs + p->ninputs >= MAX_INPUTS) return 0;
  for (int i = 0; i < nctl; i++)
    if (ctl[i].node->ninputs + p->ninputs >= MAX_INPUTS) return 0;

  /* Control consumers first: sg_uses results are void after a mutation. */
  for (int i = 0; i < nctl; i++)
    if (reroute(g, ctl[i].node, p, pdata, x_control, err) != 0) return -1;
  for (int i = 0; i < nconv; i++) {
    if (reroute(g, conv[i], p, pdata, x_control, err) != 0 ||
        sg_set_attr_string(g, conv[i], "padding", "EXPLICIT", err) != 0 ||
        sg_set_attr_ints(g, conv[i], "explicit_paddings", sum, 8, err) != 0)
      return -1;
  }
  sg_remove(g, p);
  return 1;
}

int sg_pass_fold_pad(sg_graph* g, const sg_ctx* ctx, sg_err* err) {
  int done = 0;
  for (int i = 0; i < sg_num_nodes(g); i++) {
    sg_node* p = sg_node_at(g, i);
    if (p->removed) continue;
    int r = try_fold(g, ctx, p, err);
    if (r < 0) return -1;
    done += r;
  }
  return done;
}
