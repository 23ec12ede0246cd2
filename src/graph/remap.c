/*
 * remap.c - pass `remap`: a contraction followed by BiasAdd (and optionally
 * one activation) becomes one node of TensorFlow's own fused op:
 *
 *   Conv2D                + BiasAdd [+ act]  ->  _FusedConv2D
 *   MatMul                + BiasAdd [+ act]  ->  _FusedMatMul
 *   DepthwiseConv2dNative + BiasAdd [+ act]  ->  _FusedDepthwiseConv2dNative
 *
 *   act: Relu, Relu6, Elu, LeakyRelu, Tanh, Sigmoid
 *
 * The fused ops are TF's (shape inference comes with them); simdev registers
 * SIMDEV kernels for them (src/kernels/nn/conv.c, nn/depthwise.c,
 * linalg/matmul.c, with kernels/framework/fused.h's epilogue) that apply
 * bias and activation in the output pass. The NodeDef this pass writes carries
 * the attributes TF's grappler remapper writes for the same pattern (read in
 * TF's remapper.cc; the attribute set checked against the OpDefs of the
 * 2.21 wheel):
 *   _FusedConv2D: T, TArgs = [T], num_args = 1, num_host_args = 0, strides,
 *     padding, explicit_paddings, dilations, data_format, use_cudnn_on_gpu
 *     (all from the Conv2D), fused_ops, epsilon = 0, leakyrelu_alpha (from
 *     LeakyRelu's alpha, LeakyRelu only)
 *   _FusedDepthwiseConv2dNative: T, strides, padding, dilations, data_format,
 *     num_args, fused_ops, epsilon, leakyrelu_alpha (the op has no
 *     explicit_paddings: an EXPLICIT-padded depthwise conv is left alone)
 *   _FusedMatMul: T, transpose_a, transpose_b, num_args, fused_ops,
 *     epsilon, leakyrelu_alpha (MatMul's grad_a/grad_b hints are dropped,
 *     as TF's remapper drops them)
 * fused_ops is ["BiasAdd"] or ["BiasAdd", "<activation op>"]; inputs are the
 * contraction's two inputs, then the bias.
 *
 * What is fused (anything else is left as it is):
 * - every node of the pattern on the same SIMDEV device (sg_on_simdev);
 * - T float or double (_FusedMatMul: float; its OpDef has no double), the
 *   same T on every node; BiasAdd's data_format the contraction's: NHWC
 *   for Conv2D (simdev's fused Conv2D kernel is NHWC only, as TF CPU's),
 *   NHWC or NCHW for the depthwise conv (its fused kernel takes both),
 *   NHWC after a MatMul;
 * - the absorbed nodes (the contraction; the BiasAdd when an activation
 *   follows) have exactly one data consumer, the next node of the pattern,
 *   no control consumer, and are not in the preserve list;
 * - the nodes have exactly the inputs their ops take (2, 2, 1 data inputs)
 *   and the attributes TF always fills in (strides, padding).
 * The fused node keeps the name and place of the pattern's last node, so
 * its consumers and the fetch names stay valid; control inputs of the
 * absorbed nodes move to it.
 *
 * Idempotent: a fused node is no Conv2D/MatMul/DepthwiseConv2dNative, so a
 * second run finds nothing; activation-rooted patterns are matched before
 * BiasAdd-rooted ones so the larger fusion always wins in one run.
 *
 * Thread contract: none of its own; the graph belongs to the caller.
 */
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"

/* TF's DataType enum values (types.proto). */
enum { DT_FLOAT = 1, DT_DOUBLE = 2 };

/* The activations the fused kernels implement, by TF op name. */
static const char* const kActivations[] = {"Relu",      "Relu6", "Elu",
                                           "LeakyRelu", "Tanh",  "Sigmoid"};

/* Control inputs a fused node may collect; a pattern with more is left
 * alone (bounded stack use). */
#define MAX_CONTROLS 32

enum contraction { C_NONE, C_CONV2D, C_MATMUL, C_DEPTHWISE };

typedef struct match {
  sg_node* contraction;
  sg_node* bias_add;
  sg_node* activation; /* NULL: BiasAdd only */
  enum contraction kind;
} match;

/* The table's entry for n's op (a string that outlives any rewrite of n),
 * or NULL if n is no fused activation. */
static const char* activation_of(const sg_node* n) {
  for (size_t i = 0; i < sizeof(kActivations) / sizeof(kActivations[0]); i++)
    if (strcmp(n->op, kActivations[i]) == 0) return kActivations[i];
  return NULL;
}

static enum contraction contraction_kind(const sg_node* n) {
  if (strcmp(n->op, "Conv2D") == 0) return C_CONV2D;
  if (strcmp(n->op, "MatMul") == 0) return C_MATMUL;
  if (strcmp(n->op, "DepthwiseConv2dNative") == 0) return C_DEPTHWISE;
  return C_NONE;
}

/* n's only consumer is input 0 of `consumer`: one data use in all, no
 * control use. */
static bool only_feeds(sg_graph* g, const sg_node* n, const sg_node* consumer) {
  sg_use use[2];
  if (sg_uses(g, n, -1, use, 2) != 0) return false;
  if (sg_uses(g, n, SG_ANY_PORT, use, 2) != 1) return false;
  return use[0].node == consumer && use[0].input == 0;
}

/* n's data_format: NHWC (spelled out or by default, absent), NCHW, or
 * L_OTHER for anything else (NCHW_VECT_C, unreadable). */
enum layout { L_OTHER, L_NHWC, L_NCHW };
static enum layout layout_of(const sg_node* n) {
  char fmt[8];
  if (sg_attr_find(n, "data_format") == NULL) return L_NHWC;
  if (!sg_attr_string(n, "data_format", fmt, sizeof(fmt))) return L_OTHER;
  return strcmp(fmt, "NHWC") == 0   ? L_NHWC
         : strcmp(fmt, "NCHW") == 0 ? L_NCHW
                                    : L_OTHER;
}

static bool dtype_ok(enum contraction kind, int dtype) {
  if (kind == C_MATMUL) return dtype == DT_FLOAT;
  return dtype == DT_FLOAT || dtype == DT_DOUBLE;
}

/* The contraction's own conditions: op, inputs, attributes, dtype. */
static bool contraction_ok(const sg_node* c, enum contraction kind, int dtype) {
  int t;
  if (sg_num_data_inputs(c) != 2 || !sg_attr_type(c, "T", &t) || t != dtype)
    return false;
  if (kind == C_MATMUL) return true;
  char pad[16];
  int64_t v[8];
  int n = 0;
  if (sg_attr_find(c, "strides") == NULL ||
      !sg_attr_string(c, "padding", pad, sizeof(pad)))
    return false;
  if (kind == C_DEPTHWISE) {
    /* _FusedDepthwiseConv2dNative takes SAME or VALID only. */
    if (strcmp(pad, "SAME") != 0 && strcmp(pad, "VALID") != 0) return false;
    if (sg_attr_find(c, "explicit_paddings") != NULL &&
        (!sg_attr_ints(c, "explicit_paddings", v, 8, &n) || n != 0))
      return false;
  }
  return true;
}

/* Tries the pattern whose BiasAdd is b (activation a or NULL). */
static bool match_from_bias(sg_graph* g, const sg_ctx* ctx, sg_node* b,
                            sg_node* a, match* m) {
  int t;
  if (strcmp(b->op, "BiasAdd") != 0 || !sg_on_simdev(b) ||
      sg_num_data_inputs(b) != 2 || !sg_attr_type(b, "T", &t))
    return false;
  sg_ref r = sg_input(g, b, 0);
  sg_node* c = r.node;
  if (c == NULL || c->removed || r.port != 0) return false;
  enum contraction kind = contraction_kind(c);
  if (kind == C_NONE || !dtype_ok(kind, t) || !contraction_ok(c, kind, t))
    return false;
  /* The bias goes on the contraction's channel dimension: BiasAdd's
   * data_format must name the same one. Conv2D: NHWC only (simdev's fused
   * Conv2D kernel, as TF CPU's); the depthwise kernel takes NCHW too; a
   * MatMul's output is 2-D, its BiasAdd NHWC (the last dimension). */
  enum layout lb = layout_of(b);
  enum layout lc = kind == C_MATMUL ? L_NHWC : layout_of(c);
  if (lb == L_OTHER || lb != lc || (kind == C_CONV2D && lc != L_NHWC))
    return false;
  if (strcmp(c->device, b->device) != 0 || sg_preserved(ctx, c->name) ||
      !only_feeds(g, c, b))
    return false;
  if (a != NULL) {
    int ta;
    if (!sg_attr_type(a, "T", &ta) || ta != t ||
        strcmp(a->device, b->device) != 0 || sg_preserved(ctx, b->name) ||
        !only_feeds(g, b, a))
      return false;
  }
  int controls =
      (c->ninputs - 2) + (b->ninputs - 2) + (a != NULL ? a->ninputs - 1 : 0);
  if (controls > MAX_CONTROLS) return false; /* rare enough to leave alone */
  m->contraction = c;
  m->bias_add = b;
  m->activation = a;
  m->kind = kind;
  return true;
}

static bool match_from_activation(sg_graph* g, const sg_ctx* ctx, sg_node* a,
                                  match* m) {
  if (activation_of(a) == NULL || !sg_on_simdev(a) ||
      sg_num_data_inputs(a) != 1)
    return false;
  sg_ref r = sg_input(g, a, 0);
  if (r.node == NULL || r.node->removed || r.port != 0) return false;
  return match_from_bias(g, ctx, r.node, a, m);
}

/* Sets attribute `name` of n to list(type) [dtype], as TF writes TArgs.
 * sg.h has no list(type) setter: the slot is made with a list(int) setter
 * (so its name lives in g's arena and n is marked modified), then its value
 * is pointed at the serialized AttrValue {list {type: [dtype]}}:
 *   0x0a len  AttrValue.list (field 1, bytes)
 *   0x32 1 t  ListValue.type (field 6, packed varint; dtype < 128) */
static int set_attr_type_list1(sg_graph* g, sg_node* n, const char* name,
                               int dtype, sg_err* err) {
  static const uint8_t kFloat[] = {0x0a, 0x03, 0x32, 0x01, DT_FLOAT};
  static const uint8_t kDouble[] = {0x0a, 0x03, 0x32, 0x01, DT_DOUBLE};
  const int64_t none = 0;
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE)
    return sg_fail(err, SG_EINTERNAL, "remap: TArgs for dtype %d", dtype);
  if (sg_set_attr_ints(g, n, name, &none, 1, err) != 0) return -1;
  sg_attr* a = (sg_attr*)sg_attr_find(n, name);
  if (a == NULL)
    return sg_fail(err, SG_EINTERNAL, "remap: attribute %s vanished", name);
  a->value = dtype == DT_FLOAT ? kFloat : kDouble;
  a->len = sizeof(kFloat);
  return 0;
}

/* Appends control input s to list (dedup); list has room for cap. */
static int add_control(const char** list, int* n, int cap, const char* s) {
  for (int i = 0; i < *n; i++)
    if (strcmp(list[i], s) == 0) return 0;
  if (*n >= cap) return -1;
  list[(*n)++] = s;
  return 0;
}

static int collect_controls(const sg_node* x, const char** list, int* n,
                            int cap) {
  for (int i = 0; i < x->ninputs; i++)
    if (x->inputs[i][0] == '^' && add_control(list, n, cap, x->inputs[i]) != 0)
      return -1;
  return 0;
}

/* Rewrites the pattern's last node in place into the fused node; removes
 * the absorbed ones. */
static int rewrite(sg_graph* g, const match* m, sg_err* err) {
  sg_node* c = m->contraction;
  sg_node* b = m->bias_add;
  sg_node* a = m->activation;
  sg_node* root = a != NULL ? a : b;
  int ninputs = 3, cap = 3 + MAX_CONTROLS;
  const char* inputs[3 + MAX_CONTROLS];
  inputs[0] = c->inputs[0];
  inputs[1] = c->inputs[1];
  inputs[2] = b->inputs[1];
  if (collect_controls(c, inputs, &ninputs, cap) != 0 ||
      collect_controls(b, inputs, &ninputs, cap) != 0 ||
      (a != NULL && collect_controls(a, inputs, &ninputs, cap) != 0))
    return sg_fail(err, SG_EINTERNAL, "remap: control inputs overflow");

  int dtype = 0;
  float alpha = 0;
  bool has_alpha = a != NULL && strcmp(a->op, "LeakyRelu") == 0 &&
                   sg_attr_float(a, "alpha", &alpha);
  /* Read before sg_set_op renames the root. */
  const char* act = a != NULL ? activation_of(a) : NULL;
  if (!sg_attr_type(c, "T", &dtype))
    return sg_fail(err, SG_EINTERNAL, "remap: %s lost T", c->name);

  /* The root's own attributes (BiasAdd's data_format, LeakyRelu's alpha,
   * Relu's T, anything else) are not the fused op's: start empty. */
  while (root->nattrs > 0) {
    int before = root->nattrs;
    if (sg_remove_attr(g, root, root->attrs[0].name, err) != 0) return -1;
    if (root->nattrs >= before)
      return sg_fail(err, SG_EINTERNAL, "remap: %s kept attribute %s",
                     root->name, root->attrs[0].name);
  }
  const char* op = m->kind == C_CONV2D   ? "_FusedConv2D"
                   : m->kind == C_MATMUL ? "_FusedMatMul"
                                         : "_FusedDepthwiseConv2dNative";
  if (sg_set_op(g, root, op, err) != 0 ||
      sg_set_inputs(g, root, inputs, ninputs, err) != 0 ||
      sg_copy_attr(g, root, c, "T", err) != 0)
    return -1;
  static const char* const kConv[] = {"strides",           "padding",
                                      "explicit_paddings", "dilations",
                                      "data_format",       "use_cudnn_on_gpu"};
  static const char* const kDepthwise[] = {"strides", "padding", "dilations",
                                           "data_format"};
  static const char* const kMatMul[] = {"transpose_a", "transpose_b"};
  const char* const* copy = m->kind == C_CONV2D   ? kConv
                            : m->kind == C_MATMUL ? kMatMul
                                                  : kDepthwise;
  int ncopy = m->kind == C_CONV2D ? 6 : m->kind == C_MATMUL ? 2 : 4;
  for (int i = 0; i < ncopy; i++)
    if (sg_copy_attr(g, root, c, copy[i], err) != 0) return -1;
  if (m->kind == C_CONV2D &&
      (set_attr_type_list1(g, root, "TArgs", dtype, err) != 0 ||
       sg_set_attr_int(g, root, "num_host_args", 0, err) != 0))
    return -1;
  const char* fused_ops[2] = {"BiasAdd", act};
  if (sg_set_attr_strings(g, root, "fused_ops", fused_ops, act ? 2 : 1, err) !=
          0 ||
      sg_set_attr_int(g, root, "num_args", 1, err) != 0 ||
      sg_set_attr_float(g, root, "epsilon", 0.0f, err) != 0)
    return -1;
  /* Without an alpha attribute LeakyRelu means 0.2, the fused op's default
   * too: nothing to write then. */
  if (has_alpha &&
      sg_set_attr_float(g, root, "leakyrelu_alpha", alpha, err) != 0)
    return -1;
  sg_remove(g, c);
  if (a != NULL) sg_remove(g, b);
  return 0;
}

int sg_pass_remap(sg_graph* g, const sg_ctx* ctx, sg_err* err) {
  int done = 0;
  /* Activation-rooted first, so a BiasAdd that an activation could absorb
   * is never fused alone. Nodes added by a rewrite are none (rewrites are
   * in place), so the node count is fixed.
   *
   * Each round matches over the unchanged graph first, then rewrites: a
   * mutation invalidates the consumer index and the next sg_uses rebuilds
   * it over the whole graph, so matching between rewrites was quadratic
   * (20,000 patterns: minutes). The matches of one round are disjoint
   * (each absorbed node has one consumer, and a root is an activation or
   * a BiasAdd, never a contraction), so rewriting them in any order is the
   * same as rewriting each as it is found. */
  int nn = sg_num_nodes(g);
  match* ms = malloc((size_t)(nn > 0 ? nn : 1) * sizeof(*ms));
  if (ms == NULL)
    return sg_fail(err, SG_ENOMEM, "remap: no memory for %d matches", nn);
  for (int round = 0; round < 2; round++) {
    int nm = 0;
    for (int i = 0; i < nn; i++) {
      sg_node* n = sg_node_at(g, i);
      if (n->removed) continue;
      bool found = round == 0 ? match_from_activation(g, ctx, n, &ms[nm])
                              : match_from_bias(g, ctx, n, NULL, &ms[nm]);
      if (found) nm++;
    }
    for (int k = 0; k < nm; k++) {
      if (rewrite(g, &ms[k], err) != 0) {
        free(ms);
        return -1;
      }
      done++;
    }
  }
  free(ms);
  return done;
}
