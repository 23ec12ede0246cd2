/*
 * sg.h - the graph module's internal model: a GraphDef held as nodes whose
 * untouched parts stay the bytes TF sent, and the helpers every pass uses.
 * Prefix sg_. Only src/graph/ includes this; the rest of simdev sees the
 * module through graph.h (the TF_InitGraph entry point) alone.
 *
 * Design (the codec's choice and its reasons are in gd.c's header comment):
 * - sg_parse keeps every GraphDef field other than `node` (library,
 *   versions, debug_info, anything newer) as raw bytes, and every NodeDef
 *   field other than name/op/input/device/attr as raw bytes too; attribute
 *   values stay serialized AttrValue messages, decoded only when a pass asks.
 * - A node nobody modified is written back as the exact bytes it came in as;
 *   sg_serialize of an unmodified graph returns the input byte for byte.
 * - Passes never free nodes: sg_remove marks a node removed, the writer
 *   leaves it out. All strings and arrays live in the graph's arena and die
 *   with sg_free.
 *
 * Inputs are TF's strings: "x" (output 0 of x), "x:1", "^x" (control).
 *
 * Thread contract: a graph belongs to one caller; nothing here has global
 * mutable state, so TF may optimize different graphs on different threads.
 */
#ifndef SIMDEV_GRAPH_SG_H_
#define SIMDEV_GRAPH_SG_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------- */
enum {
  SG_OK = 0,
  SG_EINVAL = 1,   /* malformed GraphDef / NodeDef / AttrValue */
  SG_ENOMEM = 2,   /* allocation failed */
  SG_EINTERNAL = 3 /* a pass met a state it should have ruled out */
};
typedef struct sg_err {
  int code;
  char msg[256];
} sg_err;
/* Sets err (first error wins) and returns -1. printf-style. */
int sg_fail(sg_err* err, int code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the model ---------------------------------------------------------- */
typedef struct sg_attr {
  const char* name;
  const uint8_t* value; /* serialized AttrValue */
  size_t len;
} sg_attr;

typedef struct sg_node {
  const char* name;
  const char* op;
  const char* device; /* "" when unplaced */
  const char** inputs;
  int ninputs;
  sg_attr* attrs;
  int nattrs;
  /* Every other NodeDef field, serialized, in input order. */
  const uint8_t* other;
  size_t other_len;
  /* The NodeDef as it arrived; NULL for a node a pass created. */
  const uint8_t* raw;
  size_t raw_len;
  bool modified; /* set by every sg_ mutator: written from the fields */
  bool removed;
  int index; /* position in g->nodes */
} sg_node;

typedef struct sg_graph sg_graph; /* opaque: nodes, raw fields, arena */

/* Parses a serialized GraphDef. 0, or -1 with err set (SG_EINVAL names the
 * byte offset and what is wrong). Never reads outside [buf, buf + len). */
int sg_parse(const void* buf, size_t len, sg_graph** out, sg_err* err);
/* Serializes g into a malloc'd buffer (*out, *len; free() it). */
int sg_serialize(const sg_graph* g, uint8_t** out, size_t* len, sg_err* err);
void sg_free(sg_graph* g);

int sg_num_nodes(const sg_graph* g); /* removed ones included */
sg_node* sg_node_at(sg_graph* g, int i);
sg_node* sg_find(const sg_graph* g, const char* name); /* NULL: none/removed */
/* A node name not used in g, built from base (base itself if free, else
 * base_1, base_2, ...), in g's arena; NULL when out of memory. */
const char* sg_unique_name(sg_graph* g, const char* base);

/* ---- mutation (every mutator marks the node modified) ------------------- */
/* All strings passed in are copied into g's arena (they may point into g).
 * A new node with no inputs or attrs, written after the input's last node;
 * NULL with err set on ENOMEM, or SG_EINTERNAL if a live node has that name
 * (a removed node's name may be reused). simdev's passes rewrite in place
 * and do not call it today; it is here for passes that add nodes. */
sg_node* sg_add_node(sg_graph* g, const char* name, const char* op,
                     const char* device, sg_err* err);
void sg_remove(sg_graph* g, sg_node* n);
int sg_set_op(sg_graph* g, sg_node* n, const char* op, sg_err* err);
int sg_set_device(sg_graph* g, sg_node* n, const char* device, sg_err* err);
int sg_set_inputs(sg_graph* g, sg_node* n, const char* const* inputs,
                  int ninputs, sg_err* err);
int sg_add_input(sg_graph* g, sg_node* n, const char* input, sg_err* err);

/* ---- inputs ------------------------------------------------------------- */
typedef struct sg_ref {
  sg_node* node; /* NULL if the name is not in the graph */
  int port;      /* output index; -1 for a control input */
} sg_ref;
/* How many data inputs n has (they come first), or -1 if a data input
 * follows a control input (not a NodeDef TF writes: passes leave it alone). */
int sg_num_data_inputs(const sg_node* n);
/* Resolves n->inputs[i] to a live node (NULL if none has that name, or i
 * is out of range). */
sg_ref sg_input(const sg_graph* g, const sg_node* n, int i);
/* The input string for output `port` of `node` ("x", "x:2"; "^x" for -1),
 * in g's arena. */
const char* sg_input_name(sg_graph* g, const char* node, int port);

/* ---- consumers (computed on demand; valid until the next mutation) ------ */
typedef struct sg_use {
  sg_node* node;
  int input; /* index into node->inputs */
} sg_use;
/* Uses of output `port` of n (port -1: control uses; SG_ANY_PORT: every data
 * use), skipping removed nodes. Returns the count (which may exceed max),
 * writes at most max; -1 when out of memory. */
#define SG_ANY_PORT (-2)
int sg_uses(sg_graph* g, const sg_node* n, int port, sg_use* out, int max);

/* ---- attributes --------------------------------------------------------- */
const sg_attr* sg_attr_find(const sg_node* n, const char* name);
/* Getters: true if the attribute exists and holds that kind. */
bool sg_attr_type(const sg_node* n, const char* name, int* dtype);
bool sg_attr_int(const sg_node* n, const char* name, int64_t* v);
bool sg_attr_float(const sg_node* n, const char* name, float* v);
bool sg_attr_bool(const sg_node* n, const char* name, bool* v);
/* A string attribute, NUL-terminated into buf; false if missing or longer. */
bool sg_attr_string(const sg_node* n, const char* name, char* buf, size_t len);
/* list(int): the count of values into *count, the first min(count, max)
 * into out: a caller must check *count <= max before using them all. */
bool sg_attr_ints(const sg_node* n, const char* name, int64_t* out, int max,
                  int* count);
/* list(string): count of values (and the i-th into buf when buf != NULL). */
bool sg_attr_strings(const sg_node* n, const char* name, int i, char* buf,
                     size_t len, int* count);

/* Setters replace an existing attribute of that name or add one (after the
 * others). 0, or -1 with err set (SG_ENOMEM). */
int sg_set_attr_type(sg_graph* g, sg_node* n, const char* name, int dtype,
                     sg_err* err);
int sg_set_attr_int(sg_graph* g, sg_node* n, const char* name, int64_t v,
                    sg_err* err);
int sg_set_attr_float(sg_graph* g, sg_node* n, const char* name, float v,
                      sg_err* err);
int sg_set_attr_bool(sg_graph* g, sg_node* n, const char* name, bool v,
                     sg_err* err);
int sg_set_attr_string(sg_graph* g, sg_node* n, const char* name, const char* v,
                       sg_err* err);
int sg_set_attr_ints(sg_graph* g, sg_node* n, const char* name,
                     const int64_t* v, int count, sg_err* err);
int sg_set_attr_strings(sg_graph* g, sg_node* n, const char* name,
                        const char* const* v, int count, sg_err* err);
/* Copies attribute `name` of src to dst unchanged (a no-op if src lacks it). */
int sg_copy_attr(sg_graph* g, sg_node* dst, const sg_node* src,
                 const char* name, sg_err* err);
int sg_remove_attr(sg_graph* g, sg_node* n, const char* name, sg_err* err);

/* The value of a Const node of dtype int32 or int64 (tensor_content or
 * int_val/int64_val), flattened: *count is the element count, the first
 * min(count, max) go to out (check *count <= max). false if n is not such
 * a Const or its tensor is malformed or has more than INT32_MAX elements. */
bool sg_const_ints(const sg_node* n, int64_t* out, int max, int* count);

/* ---- what a pass may touch ---------------------------------------------- */
typedef struct sg_ctx {
  const char* const* preserve; /* TF's nodes-to-preserve (fetches, feeds) */
  int npreserve;
} sg_ctx;
bool sg_preserved(const sg_ctx* c, const char* name);
/* Placed on a SIMDEV device: the device string names "/device:SIMDEV:". */
bool sg_on_simdev(const sg_node* n);

/* ---- passes (pass.c) ---------------------------------------------------- */
/* A pass rewrites g in place and returns how many rewrites it made (0:
 * nothing to do), or -1 with err set. It must be idempotent, touch only
 * nodes sg_on_simdev, never a preserved node, and leave anything it does not
 * understand alone. */
typedef int (*sg_pass_fn)(sg_graph* g, const sg_ctx* c, sg_err* err);

#endif /* SIMDEV_GRAPH_SG_H_ */
