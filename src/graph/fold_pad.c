/*
 * fold_pad.c - pass `fold_pad`: a zero Pad that only feeds a convolution
 * becomes that convolution's explicit padding.
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
 * - the Pad output's only consumer is input 0 of the convolution (no other
 *   data use, no control use), the Pad is not in the preserve list, and the
 *   Pad and the convolution are on the same SIMDEV device with the same T;
 * - the convolution's padding is VALID or EXPLICIT (SAME's amount depends on
 *   the input size; folding into it would need shapes).
 * The convolution keeps its name; the Pad's control inputs move to it.
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

/* Most control inputs a folded convolution may end up with (bounded stack
 * use; a Pad with more is left alone). */
#define MAX_INPUTS 48

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

static int num_data_inputs(const sg_node* n) {
  int k = 0;
  while (k < n->ninputs && n->inputs[k][0] != '^') k++;
  for (int i = k; i < n->ninputs; i++)
    if (n->inputs[i][0] != '^') return -1; /* data after control: unfamiliar */
  return k;
}

/* The node behind data input i of n when it is output 0 of a live node. */
static sg_node* producer(const sg_graph* g, const sg_node* n, int i) {
  sg_ref r = sg_input(g, n, i);
  return r.node != NULL && !r.node->removed && r.port == 0 ? r.node : NULL;
}

/* The convolution p alone feeds (input 0), or NULL. */
static sg_node* sole_conv(sg_graph* g, const sg_node* p) {
  sg_use use[2];
  if (sg_uses(g, p, -1, use, 2) != 0 || sg_uses(g, p, SG_ANY_PORT, use, 2) != 1)
    return NULL;
  sg_node* c = use[0].node;
  if (use[0].input != 0 || (strcmp(c->op, "Conv2D") != 0 &&
                            strcmp(c->op, "DepthwiseConv2dNative") != 0))
    return NULL;
  return c;
}

/* Folds Pad p into its convolution if every condition holds; 1 if folded,
 * 0 if left alone, -1 on error. */
static int try_fold(sg_graph* g, const sg_ctx* ctx, sg_node* p, sg_err* err) {
  bool v2 = strcmp(p->op, "PadV2") == 0;
  int t, tc;
  if ((!v2 && strcmp(p->op, "Pad") != 0) || !sg_on_simdev(p) ||
      sg_preserved(ctx, p->name) || num_data_inputs(p) != (v2 ? 3 : 2) ||
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
  sg_node* c = sole_conv(g, p);
  if (c == NULL || !sg_on_simdev(c) || strcmp(c->device, p->device) != 0 ||
      !sg_attr_type(c, "T", &tc) || tc != t || num_data_inputs(c) != 2)
    return 0;

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

  /* New inputs: x, the filter, the convolution's then the Pad's controls. */
  const char* inputs[MAX_INPUTS];
  int n = 0;
  if (c->ninputs + p->ninputs > MAX_INPUTS) return 0;
  inputs[n++] = p->inputs[0];
  for (int i = 1; i < c->ninputs; i++) inputs[n++] = c->inputs[i];
  for (int i = v2 ? 3 : 2; i < p->ninputs; i++) {
    bool dup = false;
    for (int j = 2; j < n; j++)
      dup = dup || strcmp(inputs[j], p->inputs[i]) == 0;
    if (!dup) inputs[n++] = p->inputs[i];
  }
  if (sg_set_inputs(g, c, inputs, n, err) != 0 ||
      sg_set_attr_string(g, c, "padding", "EXPLICIT", err) != 0 ||
      sg_set_attr_ints(g, c, "explicit_paddings", sum, 8, err) != 0)
    return -1;
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
