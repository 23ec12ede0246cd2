/*
 * fuse_elementwise.c - pass `elementwise`: trees of elementwise ops on
 * SIMDEV become one `_SimdevFusedElementwise` node (one pass over memory
 * instead of one per op).
 *
 * What is fused. A node is a candidate when it is placed on SIMDEV, its op
 * is in the kernel's table (ewprog.h: name and arity) and is not a gradient
 * op (is_grad says why), its T is float or double, it has exactly `arity`
 * data inputs and each resolves to a node of the graph. A candidate m is
 * absorbed into its consumer c when c is a candidate on the same device
 * with the same T, m has exactly one data use (that input of c) and no
 * control use, m is not preserved (a fetch or feed must stay a node), and
 * m is not a proved scalar under a c that is not (see "Scalars").
 * Following absorptions upwards from a candidate that is absorbed nowhere
 * gives a tree; a tree of two ops or more becomes one node:
 *   - named as the tree's root (every consumer, fetch and control edge that
 *     names the root stays valid), op `_SimdevFusedElementwise`;
 *   - inputs: the tree's leaves, deduplicated ("x" and "x:0" are one
 *     input), in first-use order, then the control inputs of the root and
 *     of every absorbed node, deduplicated;
 *   - attrs T, N (the number of data inputs), program (postfix, see
 *     ewprog.h), plus the root's attributes that start with "_"; the root's
 *     op-specific attributes are dropped (no table op has any).
 * The absorbed nodes are removed. A single op is left alone: fusing it
 * would only trade simdev's unfused kernel for the evaluator.
 *
 * Why this is safe. Every op of the table is a pure function of its
 * operands applied element by element after NumPy broadcasting, so the
 * tree's value at an output element depends only on the leaves at that
 * (broadcast) element, and the broadcast of all leaves is the tree's output
 * shape. Because every absorbed node feeds exactly one input of the tree,
 * the expression is a tree and postfix needs no sharing; contracting it
 * cannot create a cycle (a path leaving the tree and coming back would have
 * to leave through the root, and existed before). The kernel evaluates each
 * op with the scalar functions of simdev's unfused kernels, in T, so the
 * fused result equals the unfused one bit for bit (one unexplained
 * exception, a whole MobileNetV2 step: docs/graph-optimizer.md).
 *
 * The kernel's limits (inputs, ops, stack depth) are met by cutting: trees
 * are packed bottom-up, and when a subtree exceeds a limit its largest
 * absorbed child subtree is cut off and becomes a tree of its own.
 *
 * Idempotent: a fused node is not in the table, so it is only ever a leaf;
 * every op left out of a tree was left out for a reason (more than one use,
 * a control use, preserved, another device or dtype, a scalar under a
 * tensor, a non-candidate consumer) that the rewrite does not change
 * (scalar-ness propagates through fused nodes as through the ops they
 * replaced).
 *
 * Thread contract: none beyond sg.h's (the graph belongs to the caller).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/ewprog.h"
#include "graph/passes.h"
#include "graph/sg.h"
#include "pbwire/pbwire.h"

/* TF's DataType enum values for the dtypes the fused kernel has. */
enum { EW_DT_FLOAT = 1, EW_DT_DOUBLE = 2 };

#define EW_FUSED_OP "_SimdevFusedElementwise"
#define EW_PROGRAM_MAX SA_EWPROG_MAX_LEN

/* Per-node facts, indexed by sg_node.index. */
typedef struct ew_info {
  int arity;    /* > 0: a candidate (see the header comment) */
  int dtype;    /* its T */
  int ndata;    /* data uses of the node by nodes not removed */
  int nctrl;    /* control uses */
  int consumer; /* index of the (last seen) data consumer, -1 if none */
  int use_port; /* the output port that consumer reads */
  int parent;   /* index of the node it is absorbed into, -1 if none */
  /* the subtree rooted here, as measure() found it */
  int ops, depth, nleaves;
  bool packed;
} ew_info;

/* A leaf: output `port` of node `node` (index), as one sortable key. */
typedef uint64_t ew_leaf;
static ew_leaf leaf_key(int node, int port) {
  return ((uint64_t)(uint32_t)node << 32) | (uint32_t)port;
}

typedef struct ew_pass {
  sg_graph* g;
  const sg_ctx* ctx;
  sg_err* err;
  int n;
  ew_info* info;
  /* sorted leaves of packed subtrees: SA_EWPROG_MAX_INPUTS + 1 per node */
  ew_leaf* leaves;
  int* stack; /* explicit DFS stack, n entries of (node, next input) pairs */
  /* scalar analysis (see "Scalars"): per node EW_S_*, and its DFS stack */
  int8_t* scalar;
  int* sstack;
  size_t sstack_cap;
} ew_pass;

static ew_leaf* leaves_of(ew_pass* p, int i) {
  return p->leaves + (size_t)i * (SA_EWPROG_MAX_INPUTS + 1);
}

/* Number of data inputs of n (TF lists them before the control inputs). */
static int data_inputs(const sg_node* n) {
  int k = 0;
  for (int i = 0; i < n->ninputs; ++i)
    if (n->inputs[i][0] != '^') ++k;
  return k;
}

/* TF's kernels for the gradient ops (ReluGrad, TanhGrad, ...) require
 * operands of equal shape (TanhGrad and friends: equal element counts, the
 * output shaped as the first), while the fused kernel broadcasts: fused, a
 * graph TF would reject could run, and TanhGrad([3,1], [1,3]) would give a
 * [3,3] result instead of [3,1]. sg.h carries no shapes, so the pass cannot
 * prove the operands equal and leaves every gradient op alone. */
static bool is_grad(const char* op) {
  size_t k = strlen(op);
  return k > 4 && strcmp(op + k - 4, "Grad") == 0;
}

static void classify(ew_pass* p, sg_node* n) {
  ew_info* in = &p->info[n->index];
  int arity = sa_ewprog_arity(n->op);
  int dtype;
  if (n->removed || arity <= 0 || !sg_on_simdev(n) || is_grad(n->op)) return;
  if (!sg_attr_type(n, "T", &dtype) ||
      (dtype != EW_DT_FLOAT && dtype != EW_DT_DOUBLE))
    return;
  if (data_inputs(n) != arity) return;
  for (int i = 0; i < n->ninputs; ++i) {
    sg_ref r = sg_input(p->g, n, i);
    if (r.port >= 0 && r.node == NULL) return; /* dangling: leave it alone */
  }
  in->arity = arity;
  in->dtype = dtype;
}

/* Counts every node's data and control uses in one sweep over all inputs
 * (instead of sg_uses per node, which may scan the graph each time). */
static void count_uses(ew_pass* p) {
  for (int i = 0; i < p->n; ++i) {
    sg_node* c = sg_node_at(p->g, i);
    if (c->removed) continue;
    for (int k = 0; k < c->ninputs; ++k) {
      sg_ref r = sg_input(p->g, c, k);
      if (r.node == NULL) continue;
      ew_info* in = &p->info[r.node->index];
      if (r.port < 0) {
        ++in->nctrl;
      } else {
        ++in->ndata;
        in->consumer = i;
        in->use_port = r.port;
      }
    }
  }
}

/* ---- Scalars -------------------------------------------------------------
 * The fused kernel computes every op once per OUTPUT element, so a subtree
 * whose value is one number (Adam's step size lr * sqrt(1 - b2^t) /
 * (1 - b1^t): two Pows, a Sqrt ...) would be recomputed for every element
 * of the tensor it scales, which costs more than the memory traffic fusion
 * saves. Such a subtree is cut off and fused on its own: it then runs on
 * one element, and the big tree takes its result as a scalar input.
 *
 * sg.h has no shapes, so "scalar" is proved from what the GraphDef itself
 * says: a Const whose tensor has one element; a ReadVariableOp of a resource
 * _Arg whose `_handle_shapes` (or a VarHandleOp whose `shape`) has one
 * element; Identity, Cast, table ops and fused nodes whose data inputs are
 * all scalars. Anything else counts as "not known to be a scalar". The proof
 * only decides where trees are cut, never whether a rewrite is correct: a
 * wrong answer would cost speed, not results. */
enum { EW_S_UNSEEN = 0, EW_S_YES = 1, EW_S_NO = 2, EW_S_BUSY = 3 };

/* A serialized TensorShapeProto: every dimension known and 1 (rank 0
 * included). dim = 2 (Dim: size = 1), unknown_rank = 3. */
static bool shape_is_scalar(const uint8_t* d, size_t len) {
  pbw_reader r, rd;
  pbw_field f, fd;
  int st;
  pbw_init(&r, d, len);
  while ((st = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number == 3 && f.wire == PBW_VARINT && f.u != 0) return false;
    if (f.number != 2 || f.wire != PBW_LEN) continue;
    int64_t size = 0; /* an absent size is 0 */
    pbw_init_field(&rd, &f);
    while ((st = pbw_next(&rd, &fd)) == PBW_FIELD)
      if (fd.number == 1 && fd.wire == PBW_VARINT) size = (int64_t)fd.u;
    if (st == PBW_ERROR || size != 1) return false;
  }
  return st == PBW_END;
}

/* The only length-delimited field `number` of message [d, d + len), into f;
 * false if it is absent, repeated or the message is malformed. */
static bool sole_field(const uint8_t* d, size_t len, uint32_t number,
                       pbw_field* out) {
  pbw_reader r;
  pbw_field f;
  int st, seen = 0;
  pbw_init(&r, d, len);
  while ((st = pbw_next(&r, &f)) == PBW_FIELD)
    if (f.number == number && f.wire == PBW_LEN && seen++ == 0) *out = f;
  return st == PBW_END && seen == 1;
}

/* AttrValue: list = 1 (ListValue: shape = 7), shape = 7, tensor = 8
 * (TensorProto: tensor_shape = 2, absent for a scalar). */
static bool attr_shape_scalar(const sg_node* n, const char* name, int field) {
  const sg_attr* a = sg_attr_find(n, name);
  pbw_field f, g;
  if (a == NULL) return false;
  if (field == 8) { /* Const value */
    pbw_reader r;
    int st, seen = 0;
    if (!sole_field(a->value, a->len, 8, &f)) return false;
    pbw_init_field(&r, &f);
    while ((st = pbw_next(&r, &g)) == PBW_FIELD)
      if (g.number == 2 && g.wire == PBW_LEN && seen++ == 0 &&
          !shape_is_scalar(g.data, g.len))
        return false;
    return st == PBW_END && seen <= 1;
  }
  if (field == 1) { /* list(shape) with one entry */
    return sole_field(a->value, a->len, 1, &f) &&
           sole_field(f.data, f.len, 7, &g) && shape_is_scalar(g.data, g.len);
  }
  return sole_field(a->value, a->len, 7, &f) && shape_is_scalar(f.data, f.len);
}

/* Nodes whose scalar-ness is that of all their data inputs. */
static bool scalar_propagates(const sg_node* n) {
  return strcmp(n->op, "Identity") == 0 || strcmp(n->op, "Cast") == 0 ||
         strcmp(n->op, EW_FUSED_OP) == 0 || sa_ewprog_arity(n->op) > 0;
}

/* Scalar-ness of a node that does not propagate it (EW_S_YES / EW_S_NO). */
static int scalar_leaf(ew_pass* p, sg_node* n) {
  if (strcmp(n->op, "Const") == 0)
    return attr_shape_scalar(n, "value", 8) ? EW_S_YES : EW_S_NO;
  if (strcmp(n->op, "ReadVariableOp") == 0 && n->ninputs > 0) {
    sg_ref r = sg_input(p->g, n, 0);
    if (r.node == NULL || r.port != 0) return EW_S_NO;
    if (strcmp(r.node->op, "_Arg") == 0)
      return attr_shape_scalar(r.node, "_handle_shapes", 1) ? EW_S_YES
                                                            : EW_S_NO;
    if (strcmp(r.node->op, "VarHandleOp") == 0)
      return attr_shape_scalar(r.node, "shape", 7) ? EW_S_YES : EW_S_NO;
  }
  return EW_S_NO;
}

/* Whether node i is a proved scalar. Memoized; an explicit stack, since the
 * walk may go back as far as the graph is deep. A node met again while its
 * own inputs are being walked (a cycle: while loops) is not a scalar. */
static bool is_scalar(ew_pass* p, int i) {
  size_t top = 0;
  if (p->scalar[i] != EW_S_UNSEEN && p->scalar[i] != EW_S_BUSY)
    return p->scalar[i] == EW_S_YES;
  p->sstack[top++] = i;
  while (top > 0) {
    int t = p->sstack[top - 1];
    sg_node* n = sg_node_at(p->g, t);
    if (p->scalar[t] == EW_S_UNSEEN) {
      if (!scalar_propagates(n)) {
        p->scalar[t] = (int8_t)scalar_leaf(p, n);
        --top;
        continue;
      }
      p->scalar[t] = EW_S_BUSY;
      for (int k = 0; k < n->ninputs; ++k) {
        sg_ref r = sg_input(p->g, n, k);
        if (r.port < 0 || r.node == NULL) continue;
        if (p->scalar[r.node->index] == EW_S_UNSEEN && top < p->sstack_cap)
          p->sstack[top++] = r.node->index;
      }
      continue;
    }
    if (p->scalar[t] == EW_S_BUSY) {
      int v = EW_S_YES;
      for (int k = 0; k < n->ninputs && v == EW_S_YES; ++k) {
        sg_ref r = sg_input(p->g, n, k);
        if (r.port < 0) continue;
        if (r.node == NULL || p->scalar[r.node->index] != EW_S_YES) v = EW_S_NO;
      }
      p->scalar[t] = (int8_t)v;
    }
    --top;
  }
  return p->scalar[i] == EW_S_YES;
}

static bool absorbable(ew_pass* p, sg_node* m) {
  const ew_info* im = &p->info[m->index];
  if (im->arity == 0 || im->ndata != 1 || im->nctrl != 0 || im->use_port != 0)
    return false;
  if (sg_preserved(p->ctx, m->name)) return false;
  const ew_info* ic = &p->info[im->consumer];
  if (ic->arity == 0 || ic->dtype != im->dtype) return false;
  sg_node* c = sg_node_at(p->g, im->consumer);
  if (strcmp(c->device, m->device) != 0) return false;
  /* a scalar subtree under a tensor op is fused on its own (see Scalars) */
  return !is_scalar(p, m->index) || is_scalar(p, im->consumer);
}

/* The resolved data operand j (0-based) of candidate n. */
static sg_ref operand(ew_pass* p, sg_node* n, int j) {
  for (int i = 0, k = 0; i < n->ninputs; ++i) {
    if (n->inputs[i][0] == '^') continue;
    if (k++ == j) return sg_input(p->g, n, i);
  }
  sg_ref none = {NULL, -1};
  return none; /* not reached: classify checked the count */
}

/* Sorted union of a and b into out (at most SA_EWPROG_MAX_INPUTS + 1 entries:
 * one past the limit is enough to know it is exceeded). */
static int leaf_union(const ew_leaf* a, int na, const ew_leaf* b, int nb,
                      ew_leaf* out) {
  int i = 0, j = 0, k = 0;
  while ((i < na || j < nb) && k <= SA_EWPROG_MAX_INPUTS) {
    ew_leaf v;
    if (j >= nb || (i < na && a[i] < b[j])) {
      v = a[i++];
    } else if (i >= na || b[j] < a[i]) {
      v = b[j++];
    } else {
      v = a[i++];
      ++j;
    }
    out[k++] = v;
  }
  return k;
}

/* Computes ops, depth and leaves of the subtree rooted at node i from its
 * operands (absorbed children already packed). Returns whether it fits. */
static bool measure(ew_pass* p, int i) {
  sg_node* n = sg_node_at(p->g, i);
  ew_info* in = &p->info[i];
  ew_leaf acc[SA_EWPROG_MAX_INPUTS + 1], tmp[SA_EWPROG_MAX_INPUTS + 1];
  int nacc = 0;
  in->ops = 1;
  in->depth = 0;
  for (int j = 0; j < in->arity; ++j) {
    sg_ref r = operand(p, n, j);
    int d;
    if (p->info[r.node->index].parent == i) {
      const ew_info* ch = &p->info[r.node->index];
      in->ops += ch->ops;
      d = ch->depth;
      nacc =
          leaf_union(acc, nacc, leaves_of(p, r.node->index), ch->nleaves, tmp);
    } else {
      ew_leaf one = leaf_key(r.node->index, r.port);
      d = 1;
      nacc = leaf_union(acc, nacc, &one, 1, tmp);
    }
    memcpy(acc, tmp, sizeof(ew_leaf) * (size_t)nacc);
    /* j values are already on the stack while operand j is evaluated */
    if (j + d > in->depth) in->depth = j + d;
  }
  in->nleaves = nacc;
  memcpy(leaves_of(p, i), acc, sizeof(ew_leaf) * (size_t)nacc);
  return in->ops <= SA_EWPROG_MAX_OPS && in->nleaves <= SA_EWPROG_MAX_INPUTS &&
         in->depth <= SA_EWPROG_MAX_STACK;
}

/* Packs the subtree rooted at node i, whose absorbed children are packed:
 * while it exceeds a limit, its largest absorbed child is cut off (and is
 * from then on a root of its own, already packed). A node whose children are
 * all cut has at most 2 ops' worth of leaves and depth, so this ends. */
static void pack_node(ew_pass* p, int i) {
  sg_node* n = sg_node_at(p->g, i);
  while (!measure(p, i)) {
    int cut = -1;
    for (int j = 0; j < p->info[i].arity; ++j) {
      sg_ref r = operand(p, n, j);
      int c = r.node->index;
      if (p->info[c].parent == i &&
          (cut < 0 || p->info[c].ops > p->info[cut].ops))
        cut = c;
    }
    if (cut < 0) break; /* cannot happen: a lone op fits every limit */
    p->info[cut].parent = -1;
  }
  p->info[i].packed = true;
}

/* Post-order over the tree rooted at `root` with an explicit stack (a chain
 * of elementwise ops can be as long as the graph). */
static void pack_tree(ew_pass* p, int root) {
  int top = 0;
  p->stack[top++] = root;
  p->stack[top++] = 0;
  while (top > 0) {
    int i = p->stack[top - 2];
    int j = p->stack[top - 1];
    if (j < p->info[i].arity) {
      p->stack[top - 1] = j + 1;
      sg_ref r = operand(p, sg_node_at(p->g, i), j);
      int c = r.node->index;
      if (p->info[c].parent == i && !p->info[c].packed) {
        p->stack[top++] = c;
        p->stack[top++] = 0;
      }
      continue;
    }
    top -= 2;
    pack_node(p, i);
  }
}

/* ---- emission ----------------------------------------------------------- */

typedef struct ew_emit {
  char prog[EW_PROGRAM_MAX];
  size_t len;
  ew_leaf leaves[SA_EWPROG_MAX_INPUTS];
  int nleaves;
  sg_node* absorbed[SA_EWPROG_MAX_OPS];
  int nabsorbed;
} ew_emit;

/* 0, or -1 with err set. Sizes are bounded by SA_EWPROG_MAX_OPS and the
 * table's names, so an overflow is a broken invariant of packing
 * (SG_EINTERNAL, the pass fails and TF keeps the graph), not bad input. */
static int put(ew_emit* e, const char* tok, sg_err* err) {
  size_t k = strlen(tok);
  if (e->len + k + 2 > sizeof e->prog)
    return sg_fail(err, SG_EINTERNAL,
                   "elementwise: program of a packed tree overflows %zu "
                   "bytes at '%s'",
                   sizeof e->prog, tok);
  if (e->len) e->prog[e->len++] = ' ';
  memcpy(e->prog + e->len, tok, k + 1);
  e->len += k;
  return 0;
}

/* 0, or -1 with p->err set (put). Recursion depth is bounded by
 * SA_EWPROG_MAX_OPS: the tree is packed. */
static int emit(ew_pass* p, ew_emit* e, sg_node* n) {
  const ew_info* in = &p->info[n->index];
  for (int j = 0; j < in->arity; ++j) {
    sg_ref r = operand(p, n, j);
    if (p->info[r.node->index].parent == n->index) {
      e->absorbed[e->nabsorbed++] = r.node;
      if (emit(p, e, r.node)) return -1;
      continue;
    }
    ew_leaf key = leaf_key(r.node->index, r.port);
    int k = 0;
    while (k < e->nleaves && e->leaves[k] != key) ++k;
    if (k == e->nleaves) e->leaves[e->nleaves++] = key;
    char tok[16];
    snprintf(tok, sizeof tok, "$%d", k);
    if (put(e, tok, p->err)) return -1;
  }
  return put(e, n->op, p->err);
}

static bool has_input(const char** list, int n, const char* s) {
  for (int i = 0; i < n; ++i)
    if (strcmp(list[i], s) == 0) return true;
  return false;
}

/* Rewrites the tree rooted at `root` (at least one absorbed child). */
static int fuse(ew_pass* p, sg_node* root) {
  ew_emit* e = calloc(1, sizeof *e);
  const char** inputs = NULL;
  int rc = -1;
  if (e == NULL) return sg_fail(p->err, SG_ENOMEM, "elementwise: no memory");
  if (emit(p, e, root)) goto out;

  /* data inputs, then every control input of the tree, deduplicated */
  int cap = e->nleaves + root->ninputs;
  for (int a = 0; a < e->nabsorbed; ++a) cap += e->absorbed[a]->ninputs;
  inputs = malloc(sizeof(char*) * (size_t)cap);
  if (inputs == NULL) {
    sg_fail(p->err, SG_ENOMEM, "elementwise: no memory");
    goto out;
  }
  int k = 0;
  for (int l = 0; l < e->nleaves; ++l) {
    sg_node* src = sg_node_at(p->g, (int)(e->leaves[l] >> 32));
    int port = (int)(uint32_t)e->leaves[l];
    inputs[k] = sg_input_name(p->g, src->name, port);
    if (inputs[k] == NULL) {
      sg_fail(p->err, SG_ENOMEM, "elementwise: no memory");
      goto out;
    }
    ++k;
  }
  for (int a = -1; a < e->nabsorbed; ++a) {
    sg_node* m = a < 0 ? root : e->absorbed[a];
    for (int i = 0; i < m->ninputs; ++i) {
      if (m->inputs[i][0] != '^' || has_input(inputs, k, m->inputs[i]))
        continue;
      inputs[k++] = m->inputs[i];
    }
  }

  /* Drop the root op's own attributes (none of the table's ops has one but
   * T); keep T and the "_" attributes TF and users attach to any node. */
  for (int i = root->nattrs - 1; i >= 0; --i) {
    const char* name = root->attrs[i].name;
    if (name[0] == '_' || strcmp(name, "T") == 0) continue;
    if (sg_remove_attr(p->g, root, name, p->err)) goto out;
  }
  if (sg_set_op(p->g, root, EW_FUSED_OP, p->err) ||
      sg_set_inputs(p->g, root, inputs, k, p->err) ||
      sg_set_attr_int(p->g, root, "N", e->nleaves, p->err) ||
      sg_set_attr_string(p->g, root, "program", e->prog, p->err))
    goto out;
  for (int a = 0; a < e->nabsorbed; ++a) sg_remove(p->g, e->absorbed[a]);
  rc = 0;
out:
  free(inputs);
  free(e);
  return rc;
}

int sg_pass_elementwise(sg_graph* g, const sg_ctx* c, sg_err* err) {
  ew_pass p = {.g = g, .ctx = c, .err = err, .n = sg_num_nodes(g)};
  int fused = 0;
  if (p.n == 0) return 0;
  p.info = calloc((size_t)p.n, sizeof *p.info);
  p.leaves = malloc(sizeof(ew_leaf) * (size_t)p.n * (SA_EWPROG_MAX_INPUTS + 1));
  p.stack = malloc(sizeof(int) * 2 * (size_t)p.n);
  p.scalar = calloc((size_t)p.n, 1);
  p.sstack_cap = 1; /* every input edge can push once, plus the start */
  for (int i = 0; i < p.n; ++i) p.sstack_cap += sg_node_at(g, i)->ninputs;
  p.sstack = malloc(sizeof(int) * p.sstack_cap);
  if (p.info == NULL || p.leaves == NULL || p.stack == NULL ||
      p.scalar == NULL || p.sstack == NULL) {
    fused = sg_fail(err, SG_ENOMEM, "elementwise: no memory for %d nodes", p.n);
    goto out;
  }
  for (int i = 0; i < p.n; ++i) {
    p.info[i].consumer = -1;
    p.info[i].parent = -1;
    classify(&p, sg_node_at(g, i));
  }
  count_uses(&p);
  for (int i = 0; i < p.n; ++i) {
    sg_node* m = sg_node_at(g, i);
    if (absorbable(&p, m)) p.info[i].parent = p.info[i].consumer;
  }
  /* Pack every tree from its root; cuts only turn packed nodes into roots. */
  for (int i = 0; i < p.n; ++i)
    if (p.info[i].arity && p.info[i].parent < 0 && !p.info[i].packed)
      pack_tree(&p, i);
  for (int i = 0; i < p.n; ++i) {
    if (p.info[i].arity == 0 || p.info[i].parent >= 0 || p.info[i].ops < 2)
      continue;
    if (fuse(&p, sg_node_at(g, i))) {
      fused = -1;
      goto out;
    }
    ++fused;
  }
out:
  free(p.info);
  free(p.leaves);
  free(p.stack);
  free(p.scalar);
  free(p.sstack);
  return fused;
}
