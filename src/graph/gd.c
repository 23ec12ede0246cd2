/*
 * gd.c - the GraphDef codec and the node model of sg.h: parse, serialize,
 * names, inputs, consumers, structural mutation. Attributes and Const
 * values are gd_attr.c's.
 *
 * THE CHOICE: a small wire-format codec on src/pbwire, not protobuf-c.
 *
 * The alternative was protobuf-c (Debian's libprotobuf-c-dev and
 * protobuf-c-compiler), generated at build time from a FileDescriptorSet
 * pulled out of the wheel's *_pb2.py modules (the wheel has no .proto
 * files). We chose the codec because:
 * - Pass-through is the job. The optimizer touches a handful of NodeDef
 *   fields; everything else (library, versions, debug_info, the other
 *   NodeDef fields, every AttrValue, every Const tensor) must go back to
 *   TF unchanged. Here it is never decoded at all: an untouched node is
 *   written back as the very bytes it came in as, and an unmodified graph
 *   serializes to the identical bytes (the unit tests check it). protobuf-c
 *   would decode and re-encode everything, Const tensors included (copied
 *   twice per optimizer call), keep unknown fields only as a side list,
 *   and guarantee no byte identity.
 * - No new dependency where users install: protobuf-c would add
 *   libprotobuf-c.so.1 to the plugin's run-time needs and protoc-c plus a
 *   descriptor-extraction step to `pip install .` from a clean clone.
 * - The wire format is five rules and stable; the reader already existed,
 *   tested and hostile-input safe, in the conformance harness (moved to
 *   src/pbwire for both users). The field numbers used are few and are
 *   listed below; they are facts of TF's public wire format (the wheel's
 *   descriptors say the same).
 * The cost: attribute values are decoded by hand (gd_attr.c, for the kinds
 * passes use), and fields TF adds later are carried but not understood -
 * which is what a pass that leaves the unknown alone wants.
 *
 * Field numbers: GraphDef node=1 (the rest are passed through); NodeDef
 * name=1 op=2 input=3 device=4 attr=5 (map entry key=1 value=2), the rest
 * (experimental_debug_info, experimental_type, ...) kept as bytes in
 * sg_node.other, written after attr (ascending field order, as protobuf
 * writes them).
 *
 * Memory: sg_parse copies the input once; every string and array of the
 * model lives in the graph's arena (a chunk list) and dies with sg_free.
 * A name index (open addressing) makes sg_find O(1); the consumer index is
 * built on demand and dropped by every change to inputs or nodes.
 *
 * Thread contract: a graph belongs to one caller (sg.h); no global state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/sg_internal.h"
#include "pbwire/pbwire.h"

enum { GD_NODE = 1 };
enum { ND_NAME = 1, ND_OP = 2, ND_INPUT = 3, ND_DEVICE = 4, ND_ATTR = 5 };
enum { ENTRY_KEY = 1, ENTRY_VALUE = 2 };

typedef struct chunk {
  struct chunk* next;
  size_t used, cap;
  max_align_t data[];
} chunk;

/* One GraphDef field in input order: raw bytes, or a node (node >= 0). */
typedef struct item {
  const uint8_t* p;
  size_t len;
  int node;
} item;

typedef struct use_rec {
  sg_node* node;
  int input;
  int port;
} use_rec;

struct sg_graph {
  uint8_t* buf; /* the input's copy (malloc'd) */
  size_t len;
  chunk* chunks;
  sgi_node** nodes; /* malloc'd; the nodes themselves are in the arena */
  int nnodes, nodes_cap;
  int nparsed; /* nodes [0, nparsed) came from the input */
  item* items; /* malloc'd */
  int nitems, items_cap;
  int last_node_item; /* new nodes are written after this item; -1: first */
  int* names;         /* name index: node index + 1, 0 empty; malloc'd */
  size_t names_cap;
  /* Consumer index (CSR over producers), valid while uses_valid. */
  bool uses_valid;
  int* use_start; /* nnodes + 1 */
  use_rec* uses;
};

/* ---- errors ---------------------------------------------------------------
 */

int sg_fail(sg_err* err, int code, const char* fmt, ...) {
  if (err != NULL && err->code == SG_OK) {
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* ---- arena ----------------------------------------------------------------
 */

void* sgi_alloc(sg_graph* g, size_t size) {
  const size_t align = sizeof(max_align_t);
  size = (size + align - 1) / align * align;
  if (size == 0) size = align;
  chunk* c = g->chunks;
  if (c == NULL || c->cap - c->used < size) {
    size_t cap = size > 16384 ? size : 16384;
    c = malloc(sizeof(chunk) + cap);
    if (c == NULL) return NULL;
    c->cap = cap;
    c->used = 0;
    /* A big block gets a chunk of its own behind the current one, so the
     * current one's free space is not lost. */
    if (g->chunks != NULL && size > 16384) {
      c->next = g->chunks->next;
      g->chunks->next = c;
    } else {
      c->next = g->chunks;
      g->chunks = c;
    }
  }
  void* p = (char*)c->data + c->used;
  c->used += size;
  return p;
}

char* sgi_strndup(sg_graph* g, const char* s, size_t len) {
  char* p = sgi_alloc(g, len + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

void sgi_touch(sg_graph* g, sg_node* n) {
  (void)g;
  n->modified = true;
}

static void drop_uses(sg_graph* g) {
  g->uses_valid = false;
}

/* ---- the name index -------------------------------------------------------
 */

static uint64_t hash_name(const char* s, size_t len) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < len; i++) {
    h ^= (uint8_t)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static void index_put(sg_graph* g, int node) {
  const char* name = g->nodes[node]->pub.name;
  size_t mask = g->names_cap - 1;
  size_t i = hash_name(name, strlen(name)) & mask;
  while (g->names[i] != 0) i = (i + 1) & mask;
  g->names[i] = node + 1;
}

/* Room for one more node in the index (load <= 1/2). 0 or -1 (ENOMEM). */
static int index_reserve(sg_graph* g) {
  if ((size_t)(g->nnodes + 1) * 2 <= g->names_cap) return 0;
  size_t cap = g->names_cap ? g->names_cap * 2 : 64;
  while ((size_t)(g->nnodes + 1) * 2 > cap) cap *= 2;
  int* names = calloc(cap, sizeof(int));
  if (names == NULL) return -1;
  free(g->names);
  g->names = names;
  g->names_cap = cap;
  for (int i = 0; i < g->nnodes; i++) index_put(g, i);
  return 0;
}

/* The live node named [s, s + len), or NULL. */
static sg_node* find_n(const sg_graph* g, const char* s, size_t len) {
  if (g->names_cap == 0) return NULL;
  size_t mask = g->names_cap - 1;
  for (size_t i = hash_name(s, len) & mask; g->names[i] != 0;
       i = (i + 1) & mask) {
    sg_node* n = &g->nodes[g->names[i] - 1]->pub;
    if (!n->removed && strncmp(n->name, s, len) == 0 && n->name[len] == '\0') {
      return n;
    }
  }
  return NULL;
}

sg_node* sg_find(const sg_graph* g, const char* name) {
  return find_n(g, name, strlen(name));
}

/* Appends node n (arena memory) to g: index, name index. 0 or -1 ENOMEM. */
static int push_node(sg_graph* g, sgi_node* n) {
  if (g->nnodes == g->nodes_cap) {
    int cap = g->nodes_cap ? g->nodes_cap * 2 : 64;
    sgi_node** p = realloc(g->nodes, (size_t)cap * sizeof(*p));
    if (p == NULL) return -1;
    g->nodes = p;
    g->nodes_cap = cap;
  }
  if (index_reserve(g) != 0) return -1;
  n->pub.index = g->nnodes;
  g->nodes[g->nnodes++] = n;
  index_put(g, n->pub.index);
  drop_uses(g);
  return 0;
}

static int push_item(sg_graph* g, const uint8_t* p, size_t len, int node) {
  if (g->nitems == g->items_cap) {
    int cap = g->items_cap ? g->items_cap * 2 : 64;
    item* q = realloc(g->items, (size_t)cap * sizeof(*q));
    if (q == NULL) return -1;
    g->items = q;
    g->items_cap = cap;
  }
  g->items[g->nitems++] = (item){p, len, node};
  return 0;
}

/* ---- parse ----------------------------------------------------------------
 */

/* Context for parse errors: where in the input, which node. */
typedef struct pctx {
  sg_graph* g;
  sg_err* err;
  int node;         /* index of the node being parsed */
  const char* name; /* its name once known, else NULL */
} pctx;

static size_t offset_of(const pctx* c, const uint8_t* p) {
  return (size_t)(p - c->g->buf);
}

static int node_fail(pctx* c, const uint8_t* at, const char* what) {
  return sg_fail(c->err, SG_EINVAL,
                 "malformed GraphDef: node %d%s%s%s: %s "
                 "(byte %zu)",
                 c->node, c->name ? " ('" : "", c->name ? c->name : "",
                 c->name ? "')" : "", what, offset_of(c, at));
}

static int reader_fail(pctx* c, const pbw_reader* r, const char* in) {
  char what[160];
  snprintf(what, sizeof(what), "%s: %s", in, r->err);
  return node_fail(c, r->start + r->err_at, what);
}

/* A length-delimited string field without NUL bytes, copied to the arena. */
static int take_string(pctx* c, const pbw_field* f, const uint8_t* at,
                       const char* field, const char** out) {
  char what[96];
  if (f->wire != PBW_LEN) {
    snprintf(what, sizeof(what), "NodeDef.%s has wire type %d, not a string",
             field, f->wire);
    return node_fail(c, at, what);
  }
  if (memchr(f->data, 0, f->len) != NULL) {
    snprintf(what, sizeof(what), "NodeDef.%s holds a NUL byte", field);
    return node_fail(c, at, what);
  }
  char* s = sgi_strndup(c->g, (const char*)f->data, f->len);
  if (s == NULL) return sg_fail(c->err, SG_ENOMEM, "out of memory parsing");
  *out = s;
  return 0;
}

/* An AttrValue must at least be well-formed wire format: the getters then
 * never meet a broken buffer they would have to tell from a missing value. */
static int check_message(pctx* c, const uint8_t* p, size_t len,
                         const char* what) {
  pbw_reader r;
  pbw_field f;
  pbw_init(&r, p, len);
  int rc;
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
  }
  return rc == PBW_END ? 0 : reader_fail(c, &r, what);
}

/* One attr map entry into n->attrs (a repeated key replaces: the last
 * entry wins, as for protobuf maps). */
static int take_attr(pctx* c, sgi_node* n, const pbw_field* f,
                     const uint8_t* at) {
  if (f->wire != PBW_LEN) {
    return node_fail(c, at, "NodeDef.attr is not length-delimited");
  }
  pbw_reader r;
  pbw_field e;
  pbw_init_field(&r, f);
  const char* key = NULL;
  const uint8_t* value = f->data; /* an absent value: the empty AttrValue */
  size_t value_len = 0;
  int rc;
  while ((rc = pbw_next(&r, &e)) == PBW_FIELD) {
    if (e.number == ENTRY_KEY) {
      if (take_string(c, &e, at, "attr key", &key) != 0) return -1;
    } else if (e.number == ENTRY_VALUE) {
      if (e.wire != PBW_LEN) {
        return node_fail(c, at, "an attr value is not length-delimited");
      }
      value = e.data;
      value_len = e.len;
    }
  }
  if (rc != PBW_END) return reader_fail(c, &r, "attr entry");
  if (key == NULL || key[0] == '\0') {
    return node_fail(c, at, "an attr entry has no name");
  }
  if (check_message(c, value, value_len, "attr value") != 0) return -1;
  for (int i = 0; i < n->pub.nattrs; i++) {
    if (strcmp(n->pub.attrs[i].name, key) == 0) {
      n->pub.attrs[i].value = value;
      n->pub.attrs[i].len = value_len;
      return 0;
    }
  }
  n->pub.attrs[n->pub.nattrs++] = (sg_attr){key, value, value_len};
  return 0;
}

/* Parses the NodeDef in f (the GraphDef field [fstart, fend)). */
static int parse_node(pctx* c, const pbw_field* f, const uint8_t* fstart,
                      const uint8_t* fend) {
  sg_graph* g = c->g;
  sgi_node* n = sgi_alloc(g, sizeof(*n));
  if (n == NULL) return sg_fail(c->err, SG_ENOMEM, "out of memory parsing");
  memset(n, 0, sizeof(*n));
  n->field = fstart;
  n->field_len = (size_t)(fend - fstart);
  n->pub.raw = f->data;
  n->pub.raw_len = f->len;
  n->pub.name = n->pub.op = n->pub.device = "";

  /* Pass 1: counts, so the arrays are allocated once. */
  pbw_reader r;
  pbw_field e;
  int ninputs = 0, nattrs = 0, rc;
  size_t other = 0;
  pbw_init_field(&r, f);
  const uint8_t* at = r.p;
  while ((rc = pbw_next(&r, &e)) == PBW_FIELD) {
    if (e.number == ND_INPUT) {
      ninputs++;
    } else if (e.number == ND_ATTR) {
      nattrs++;
    } else if (e.number > ND_ATTR) {
      other += (size_t)(r.p - at);
    }
    at = r.p;
  }
  if (rc != PBW_END) return reader_fail(c, &r, "NodeDef");
  n->pub.inputs = sgi_alloc(g, sizeof(char*) * (size_t)(ninputs + 1));
  n->pub.attrs = sgi_alloc(g, sizeof(sg_attr) * (size_t)(nattrs + 1));
  uint8_t* o = other ? sgi_alloc(g, other) : NULL;
  if (n->pub.inputs == NULL || n->pub.attrs == NULL || (other && o == NULL)) {
    return sg_fail(c->err, SG_ENOMEM, "out of memory parsing");
  }
  n->inputs_cap = ninputs;
  n->attrs_cap = nattrs;
  n->pub.other = o;

  /* Pass 2: the values. */
  pbw_init_field(&r, f);
  at = r.p;
  while (pbw_next(&r, &e) == PBW_FIELD) {
    int bad = 0;
    switch (e.number) {
      case ND_NAME:
        bad = take_string(c, &e, at, "name", &n->pub.name);
        c->name = n->pub.name;
        break;
      case ND_OP: bad = take_string(c, &e, at, "op", &n->pub.op); break;
      case ND_DEVICE:
        bad = take_string(c, &e, at, "device", &n->pub.device);
        break;
      case ND_INPUT:
        bad = take_string(c, &e, at, "input", &n->pub.inputs[n->pub.ninputs]);
        if (!bad && n->pub.inputs[n->pub.ninputs][0] == '\0') {
          bad = node_fail(c, at, "an empty input name");
        }
        n->pub.ninputs++;
        break;
      case ND_ATTR: bad = take_attr(c, n, &e, at); break;
      default:
        memcpy(o + n->pub.other_len, at, (size_t)(r.p - at));
        n->pub.other_len += (size_t)(r.p - at);
    }
    if (bad) return -1;
    at = r.p;
  }
  if (n->pub.name[0] == '\0')
    return node_fail(c, fstart, "a node without a name");
  if (find_n(g, n->pub.name, strlen(n->pub.name)) != NULL) {
    return node_fail(c, fstart, "a second node of that name");
  }
  if (push_node(g, n) != 0 ||
      push_item(g, fstart, n->field_len, n->pub.index)) {
    return sg_fail(c->err, SG_ENOMEM, "out of memory parsing");
  }
  return 0;
}

int sg_parse(const void* buf, size_t len, sg_graph** out, sg_err* err) {
  *out = NULL;
  if (buf == NULL && len != 0) {
    return sg_fail(err, SG_EINVAL, "GraphDef: NULL buffer of %zu bytes", len);
  }
  sg_graph* g = calloc(1, sizeof(*g));
  if (g == NULL) return sg_fail(err, SG_ENOMEM, "out of memory parsing");
  g->last_node_item = -1;
  g->buf = malloc(len ? len : 1);
  if (g->buf == NULL) {
    sg_free(g);
    return sg_fail(err, SG_ENOMEM, "out of memory parsing");
  }
  if (len) memcpy(g->buf, buf, len);
  g->len = len;

  pctx c = {g, err, 0, NULL};
  pbw_reader r;
  pbw_field f;
  int rc;
  pbw_init(&r, g->buf, len);
  const uint8_t* at = r.p;
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number == GD_NODE) {
      if (f.wire != PBW_LEN) {
        sg_fail(err, SG_EINVAL,
                "malformed GraphDef: field node (1) has wire "
                "type %d, not length-delimited (byte %zu)",
                f.wire, offset_of(&c, at));
        break;
      }
      c.node = g->nnodes;
      c.name = NULL;
      if (parse_node(&c, &f, at, r.p) != 0) break;
      g->last_node_item = g->nitems - 1;
    } else if (push_item(g, at, (size_t)(r.p - at), -1) != 0) {
      sg_fail(err, SG_ENOMEM, "out of memory parsing");
      break;
    }
    at = r.p;
  }
  if (rc == PBW_ERROR) {
    sg_fail(err, SG_EINVAL, "malformed GraphDef: %s (byte %zu)", r.err,
            r.err_at);
  }
  if (rc != PBW_END) {
    sg_free(g);
    return -1;
  }
  g->nparsed = g->nnodes;
  *out = g;
  return 0;
}

void sg_free(sg_graph* g) {
  if (g == NULL) return;
  while (g->chunks != NULL) {
    chunk* next = g->chunks->next;
    free(g->chunks);
    g->chunks = next;
  }
  free(g->buf);
  free(g->nodes);
  free(g->items);
  free(g->names);
  free(g->use_start);
  free(g->uses);
  free(g);
}

/* ---- serialize ------------------------------------------------------------
 */

static void write_node(pbw_buf* b, const sgi_node* n) {
  const sg_node* p = &n->pub;
  if (p->removed) return;
  if (!p->modified && n->field != NULL) {
    pbw_put_raw(b, n->field, n->field_len);
    return;
  }
  size_t mark = pbw_open(b);
  pbw_put_string(b, ND_NAME, p->name);
  if (p->op[0]) pbw_put_string(b, ND_OP, p->op);
  for (int i = 0; i < p->ninputs; i++)
    pbw_put_string(b, ND_INPUT, p->inputs[i]);
  if (p->device[0]) pbw_put_string(b, ND_DEVICE, p->device);
  for (int i = 0; i < p->nattrs; i++) {
    size_t e = pbw_open(b);
    pbw_put_string(b, ENTRY_KEY, p->attrs[i].name);
    pbw_put_bytes(b, ENTRY_VALUE, p->attrs[i].value, p->attrs[i].len);
    pbw_close(b, ND_ATTR, e);
  }
  pbw_put_raw(b, p->other, p->other_len);
  pbw_close(b, GD_NODE, mark);
}

static void write_new_nodes(pbw_buf* b, const sg_graph* g) {
  for (int i = g->nparsed; i < g->nnodes; i++) write_node(b, g->nodes[i]);
}

int sg_serialize(const sg_graph* g, uint8_t** out, size_t* len, sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  if (g->last_node_item < 0) write_new_nodes(&b, g);
  for (int i = 0; i < g->nitems; i++) {
    const item* it = &g->items[i];
    if (it->node >= 0) {
      write_node(&b, g->nodes[it->node]);
    } else {
      pbw_put_raw(&b, it->p, it->len);
    }
    if (i == g->last_node_item) write_new_nodes(&b, g);
  }
  if (pbw_buf_take(&b, out, len) != 0) {
    return sg_fail(err, SG_ENOMEM, "out of memory serializing the GraphDef");
  }
  return 0;
}

/* ---- nodes ----------------------------------------------------------------
 */

int sg_num_nodes(const sg_graph* g) {
  return g->nnodes;
}

sg_node* sg_node_at(sg_graph* g, int i) {
  return i >= 0 && i < g->nnodes ? &g->nodes[i]->pub : NULL;
}

const char* sg_unique_name(sg_graph* g, const char* base) {
  if (sg_find(g, base) == NULL) return sgi_strndup(g, base, strlen(base));
  size_t len = strlen(base) + 16;
  char* s = sgi_alloc(g, len);
  if (s == NULL) return NULL;
  for (unsigned k = 1;; k++) { /* ends: at most nnodes names are taken */
    snprintf(s, len, "%s_%u", base, k);
    if (sg_find(g, s) == NULL) return s;
  }
}

sg_node* sg_add_node(sg_graph* g, const char* name, const char* op,
                     const char* device, sg_err* err) {
  if (name == NULL || name[0] == '\0' || op == NULL) {
    sg_fail(err, SG_EINTERNAL, "sg_add_node: a node needs a name and an op");
    return NULL;
  }
  if (sg_find(g, name) != NULL) {
    sg_fail(err, SG_EINTERNAL, "sg_add_node: a node named '%s' exists", name);
    return NULL;
  }
  sgi_node* n = sgi_alloc(g, sizeof(*n));
  if (n == NULL) goto oom;
  memset(n, 0, sizeof(*n));
  n->pub.name = sgi_strndup(g, name, strlen(name));
  n->pub.op = sgi_strndup(g, op, strlen(op));
  n->pub.device =
      sgi_strndup(g, device ? device : "", device ? strlen(device) : 0);
  n->pub.inputs = sgi_alloc(g, sizeof(char*));
  n->pub.attrs = sgi_alloc(g, sizeof(sg_attr));
  if (!n->pub.name || !n->pub.op || !n->pub.device || !n->pub.inputs ||
      !n->pub.attrs || push_node(g, n) != 0) {
    goto oom;
  }
  n->pub.modified = true;
  return &n->pub;
oom:
  sg_fail(err, SG_ENOMEM, "out of memory adding node '%s'", name);
  return NULL;
}

void sg_remove(sg_graph* g, sg_node* n) {
  n->removed = true;
  drop_uses(g);
}

int sg_set_op(sg_graph* g, sg_node* n, const char* op, sg_err* err) {
  const char* s = sgi_strndup(g, op, strlen(op));
  if (s == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  n->op = s;
  sgi_touch(g, n);
  return 0;
}

int sg_set_device(sg_graph* g, sg_node* n, const char* device, sg_err* err) {
  const char* s = sgi_strndup(g, device, strlen(device));
  if (s == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  n->device = s;
  sgi_touch(g, n);
  return 0;
}

int sg_set_inputs(sg_graph* g, sg_node* n, const char* const* inputs,
                  int ninputs, sg_err* err) {
  if (ninputs < 0) return sg_fail(err, SG_EINTERNAL, "negative input count");
  /* New array first: inputs may point into n->inputs. */
  const char** a = sgi_alloc(g, sizeof(char*) * (size_t)(ninputs + 1));
  if (a == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  for (int i = 0; i < ninputs; i++) {
    if (inputs[i] == NULL || inputs[i][0] == '\0') {
      return sg_fail(err, SG_EINTERNAL, "sg_set_inputs: empty input %d", i);
    }
    a[i] = sgi_strndup(g, inputs[i], strlen(inputs[i]));
    if (a[i] == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  }
  n->inputs = a;
  n->ninputs = ninputs;
  sgi_of(n)->inputs_cap = ninputs;
  sgi_touch(g, n);
  drop_uses(g);
  return 0;
}

int sg_add_input(sg_graph* g, sg_node* n, const char* input, sg_err* err) {
  if (input == NULL || input[0] == '\0') {
    return sg_fail(err, SG_EINTERNAL, "sg_add_input: empty input");
  }
  sgi_node* s = sgi_of(n);
  const char* copy = sgi_strndup(g, input, strlen(input));
  if (copy == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  if (n->ninputs == s->inputs_cap) {
    int cap = s->inputs_cap ? s->inputs_cap * 2 : 4;
    const char** a = sgi_alloc(g, sizeof(char*) * (size_t)cap);
    if (a == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
    if (n->ninputs) memcpy(a, n->inputs, sizeof(char*) * (size_t)n->ninputs);
    n->inputs = a;
    s->inputs_cap = cap;
  }
  n->inputs[n->ninputs++] = copy;
  sgi_touch(g, n);
  drop_uses(g);
  return 0;
}

/* ---- inputs ---------------------------------------------------------------
 */

sg_ref sg_input(const sg_graph* g, const sg_node* n, int i) {
  sg_ref ref = {NULL, 0};
  if (i < 0 || i >= n->ninputs) return ref;
  const char* s = n->inputs[i];
  size_t len = strlen(s);
  if (s[0] == '^') {
    ref.port = -1;
    ref.node = find_n(g, s + 1, len - 1);
    return ref;
  }
  const char* colon = strrchr(s, ':');
  if (colon != NULL && colon[1] != '\0' && colon != s) {
    long port = 0;
    const char* d = colon + 1;
    for (; *d >= '0' && *d <= '9' && port <= 1000000; d++) {
      port = port * 10 + (*d - '0');
    }
    if (*d == '\0' && port <= 1000000) { /* "x:k"; else the name has a ':' */
      ref.port = (int)port;
      ref.node = find_n(g, s, (size_t)(colon - s));
      return ref;
    }
  }
  ref.node = find_n(g, s, len);
  return ref;
}

const char* sg_input_name(sg_graph* g, const char* node, int port) {
  size_t len = strlen(node) + 16;
  char* s = sgi_alloc(g, len);
  if (s == NULL) return NULL;
  if (port < 0) {
    snprintf(s, len, "^%s", node);
  } else if (port == 0) {
    snprintf(s, len, "%s", node);
  } else {
    snprintf(s, len, "%s:%d", node, port);
  }
  return s;
}

/* ---- consumers ------------------------------------------------------------
 */

static int build_uses(sg_graph* g) {
  free(g->use_start);
  free(g->uses);
  g->uses = NULL;
  g->use_start = calloc((size_t)g->nnodes + 1, sizeof(int));
  if (g->use_start == NULL) return -1;
  int total = 0;
  for (int c = 0; c < g->nnodes; c++) {
    const sg_node* n = &g->nodes[c]->pub;
    if (n->removed) continue;
    for (int i = 0; i < n->ninputs; i++) {
      sg_ref r = sg_input(g, n, i);
      if (r.node != NULL) {
        g->use_start[r.node->index + 1]++;
        total++;
      }
    }
  }
  for (int p = 0; p < g->nnodes; p++) g->use_start[p + 1] += g->use_start[p];
  g->uses = malloc(sizeof(use_rec) * (size_t)(total ? total : 1));
  int* fill = malloc(sizeof(int) * (size_t)(g->nnodes ? g->nnodes : 1));
  if (g->uses == NULL || fill == NULL) {
    free(fill);
    return -1;
  }
  memcpy(fill, g->use_start, sizeof(int) * (size_t)g->nnodes);
  for (int c = 0; c < g->nnodes; c++) {
    sg_node* n = &g->nodes[c]->pub;
    if (n->removed) continue;
    for (int i = 0; i < n->ninputs; i++) {
      sg_ref r = sg_input(g, n, i);
      if (r.node != NULL)
        g->uses[fill[r.node->index]++] = (use_rec){n, i, r.port};
    }
  }
  free(fill);
  g->uses_valid = true;
  return 0;
}

int sg_uses(sg_graph* g, const sg_node* n, int port, sg_use* out, int max) {
  if (!g->uses_valid && build_uses(g) != 0) return -1;
  int count = 0;
  for (int k = g->use_start[n->index]; k < g->use_start[n->index + 1]; k++) {
    const use_rec* u = &g->uses[k];
    bool match = port == SG_ANY_PORT ? u->port >= 0 : u->port == port;
    if (!match) continue;
    if (count < max) out[count] = (sg_use){u->node, u->input};
    count++;
  }
  return count;
}

/* ---- what a pass may touch ------------------------------------------------
 */

bool sg_preserved(const sg_ctx* c, const char* name) {
  for (int i = 0; c != NULL && i < c->npreserve; i++) {
    if (strcmp(c->preserve[i], name) == 0) return true;
  }
  return false;
}

bool sg_on_simdev(const sg_node* n) {
  return strstr(n->device, "/device:SIMDEV:") != NULL;
}

int sg_num_data_inputs(const sg_node* n) {
  int k = 0;
  while (k < n->ninputs && n->inputs[k][0] != '^') k++;
  for (int i = k; i < n->ninputs; i++)
    if (n->inputs[i][0] != '^') return -1;
  return k;
}
