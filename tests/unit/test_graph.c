/*
 * test_graph.c - the graph optimizer's model (src/graph/sg.h: gd.c,
 * gd_attr.c) and pass driver (passes.h: pass.c), without TensorFlow:
 * GraphDefs are built here with the pbwire writer, byte by byte where the
 * exact encoding matters (non-minimal varints, unknown fields, groups).
 *
 * Every parsed buffer is a heap block of exactly its size, so a read past
 * the end is an error under valgrind and ASan.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h relies on the headers above. */
#include <cmocka.h>

#include "graph/graph.h"
#include "graph/passes.h"
#include "graph/sg.h"
#include "pbwire/pbwire.h"

#define SIMDEV "/job:localhost/replica:0/task:0/device:SIMDEV:0"
#define CPU "/job:localhost/replica:0/task:0/device:CPU:0"

/* ---- building GraphDefs ----------------------------------------------------
 */

typedef struct bytes {
  uint8_t* p;
  size_t len;
} bytes;

static bytes take(pbw_buf* b) {
  bytes r;
  assert_int_equal(pbw_buf_take(b, &r.p, &r.len), 0);
  return r;
}

/* AttrValue bytes. */
static void attr_entry(pbw_buf* b, const char* key, const bytes* v) {
  size_t m = pbw_open(b);
  pbw_put_string(b, 1, key);
  pbw_put_bytes(b, 2, v->p, v->len);
  pbw_close(b, 5, m);
}
static bytes av_type(int t) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_uint(&b, 6, (uint64_t)t);
  return take(&b);
}
static bytes av_string(const char* s) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_string(&b, 2, s);
  return take(&b);
}

/* A NodeDef as a GraphDef `node` field: name, op, inputs (NULL-ended),
 * device, then `extra` raw bytes (attrs, other fields) appended. */
static void node(pbw_buf* g, const char* name, const char* op,
                 const char* const* inputs, const char* device,
                 const bytes* extra) {
  size_t m = pbw_open(g);
  pbw_put_string(g, 1, name);
  pbw_put_string(g, 2, op);
  for (int i = 0; inputs && inputs[i]; i++) pbw_put_string(g, 3, inputs[i]);
  if (device) pbw_put_string(g, 4, device);
  if (extra) pbw_put_raw(g, extra->p, extra->len);
  pbw_close(g, 1, m);
}
#define IN(...) ((const char* const[]){__VA_ARGS__, NULL})

/* A Const of dtype int32 holding `v` as tensor_content, shape [n]. */
static bytes const_attrs_content(const int32_t* v, int n) {
  pbw_buf t = PBW_BUF_INIT; /* TensorProto */
  pbw_put_uint(&t, 1, 3);
  size_t s = pbw_open(&t);
  size_t d = pbw_open(&t);
  pbw_put_uint(&t, 1, (uint64_t)n);
  pbw_close(&t, 2, d);
  pbw_close(&t, 2, s);
  uint8_t le[64];
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 4; k++)
      le[4 * i + k] = (uint8_t)((uint32_t)v[i] >> (8 * k));
  }
  pbw_put_bytes(&t, 4, le, (size_t)(4 * n));
  bytes tp = take(&t);
  pbw_buf av = PBW_BUF_INIT;
  pbw_put_bytes(&av, 8, tp.p, tp.len);
  bytes value = take(&av);
  bytes dt = av_type(3);
  pbw_buf e = PBW_BUF_INIT;
  attr_entry(&e, "dtype", &dt);
  attr_entry(&e, "value", &value);
  free(tp.p);
  free(value.p);
  free(dt.p);
  return take(&e);
}

/* The heap copy every parse reads (exact size). */
static uint8_t* exact(const bytes* b) {
  uint8_t* p = malloc(b->len ? b->len : 1);
  assert_non_null(p);
  if (b->len) memcpy(p, b->p, b->len);
  return p;
}

static sg_graph* parse_ok(const bytes* b) {
  uint8_t* p = exact(b);
  sg_graph* g = NULL;
  sg_err err = {0};
  int rc = sg_parse(p, b->len, &g, &err);
  free(p); /* sg_parse keeps its own copy */
  if (rc != 0) fail_msg("sg_parse: %s", err.msg);
  assert_non_null(g);
  return g;
}

static bytes serialize(const sg_graph* g) {
  bytes r;
  sg_err err = {0};
  assert_int_equal(sg_serialize(g, &r.p, &r.len, &err), 0);
  assert_int_equal(err.code, SG_OK);
  return r;
}

/* A graph with every kind of field the codec must carry: see the body. */
static bytes sample_graph(void) {
  pbw_buf g = PBW_BUF_INIT;
  /* library (2) before the nodes, opaque. */
  size_t lib = pbw_open(&g);
  pbw_put_string(&g, 1, "a function library stays bytes");
  pbw_close(&g, 2, lib);
  bytes t = av_type(1); /* DT_FLOAT */
  pbw_buf e = PBW_BUF_INIT;
  attr_entry(&e, "dtype", &t);
  bytes ex = take(&e);
  node(&g, "x", "Placeholder", NULL, SIMDEV, &ex);
  /* A node with an unknown field (6, experimental_debug_info) and a
   * field from the future (99) between its attrs. */
  pbw_buf e2 = PBW_BUF_INIT;
  attr_entry(&e2, "T", &t);
  size_t dbg = pbw_open(&e2);
  pbw_put_string(&e2, 1, "original_node");
  pbw_close(&e2, 6, dbg);
  pbw_put_uint(&e2, 99, 7);
  bytes s2 = av_string("SAME");
  attr_entry(&e2, "padding", &s2);
  bytes ex2 = take(&e2);
  node(&g, "relu", "Relu", IN("x"), SIMDEV, &ex2);
  node(&g, "neg", "Neg", IN("relu", "^x"), CPU, &ex);
  node(&g, "out", "Identity", IN("neg:0"), "", &ex);
  /* versions (4), then a varint field from the future and a group. */
  size_t v = pbw_open(&g);
  pbw_put_uint(&g, 1, 1766);
  pbw_close(&g, 4, v);
  pbw_put_uint(&g, 1000, 5);
  pbw_put_tag(&g, 77, PBW_SGROUP);
  pbw_put_uint(&g, 1, 1);
  pbw_put_tag(&g, 77, PBW_EGROUP);
  free(t.p);
  free(ex.p);
  free(ex2.p);
  free(s2.p);
  return take(&g);
}

/* ---- round trips -----------------------------------------------------------
 */

static void round_trip_identical(void** state) {
  (void)state;
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  assert_int_equal(sg_num_nodes(g), 4);
  bytes out = serialize(g);
  assert_int_equal(out.len, in.len);
  assert_memory_equal(out.p, in.p, in.len);
  sg_free(g);
  free(out.p);
  free(in.p);
}

/* Non-minimal varints (a length written in 2 bytes where 1 would do): an
 * untouched node keeps them, so the bytes still match. */
static void round_trip_keeps_odd_encodings(void** state) {
  (void)state;
  const uint8_t raw[] = {
      0x0a, 0x88, 0x00,            /* node, length 8 in two bytes */
      0x0a, 0x01, 'a',             /* name "a" */
      0x12, 0x03, 'N',  'o',  'p', /* op "NoOp" cut to "Nop": any string */
      0x0a, 0x03, 0x0a, 0x01, 'b', /* node "b", minimal */
      0x20, 0x81, 0x80, 0x00,      /* field 4 varint 1 in three bytes */
  };
  bytes in = {(uint8_t*)raw, sizeof(raw)};
  sg_graph* g = parse_ok(&in);
  assert_int_equal(sg_num_nodes(g), 2);
  assert_string_equal(sg_node_at(g, 0)->op, "Nop");
  bytes out = serialize(g);
  assert_int_equal(out.len, in.len);
  assert_memory_equal(out.p, raw, sizeof(raw));
  free(out.p);
  sg_free(g);
}

static void empty_graph(void** state) {
  (void)state;
  bytes in = {NULL, 0};
  sg_graph* g = parse_ok(&in);
  assert_int_equal(sg_num_nodes(g), 0);
  assert_null(sg_find(g, "x"));
  bytes out = serialize(g);
  assert_non_null(out.p);
  assert_int_equal(out.len, 0);
  free(out.p);
  /* A node added to an empty graph is written. */
  sg_err err = {0};
  assert_non_null(sg_add_node(g, "n", "NoOp", "", &err));
  out = serialize(g);
  sg_graph* h = parse_ok(&out);
  assert_int_equal(sg_num_nodes(h), 1);
  assert_string_equal(sg_node_at(h, 0)->name, "n");
  sg_free(h);
  free(out.p);
  sg_free(g);
}

/* ---- the model -------------------------------------------------------------
 */

static void nodes_and_inputs(void** state) {
  (void)state;
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  sg_node* relu = sg_find(g, "relu");
  sg_node* neg = sg_find(g, "neg");
  sg_node* x = sg_find(g, "x");
  assert_non_null(relu);
  assert_ptr_equal(sg_node_at(g, relu->index), relu);
  assert_null(sg_node_at(g, 4));
  assert_null(sg_node_at(g, -1));
  assert_string_equal(relu->op, "Relu");
  assert_string_equal(relu->device, SIMDEV);
  assert_string_equal(sg_find(g, "out")->device, "");
  assert_true(sg_on_simdev(relu));
  assert_false(sg_on_simdev(neg));
  assert_false(sg_on_simdev(sg_find(g, "out")));
  assert_int_equal(relu->nattrs, 2);
  assert_non_null(relu->other);
  assert_false(relu->modified);
  assert_non_null(relu->raw);

  assert_int_equal(neg->ninputs, 2);
  sg_ref r = sg_input(g, neg, 0);
  assert_ptr_equal(r.node, relu);
  assert_int_equal(r.port, 0);
  r = sg_input(g, neg, 1);
  assert_ptr_equal(r.node, x);
  assert_int_equal(r.port, -1);
  r = sg_input(g, sg_find(g, "out"), 0);
  assert_ptr_equal(r.node, neg);
  assert_int_equal(r.port, 0);
  assert_null(sg_input(g, neg, 2).node);

  assert_string_equal(sg_input_name(g, "a", 0), "a");
  assert_string_equal(sg_input_name(g, "a", 3), "a:3");
  assert_string_equal(sg_input_name(g, "a", -1), "^a");
  assert_string_equal(sg_unique_name(g, "fresh"), "fresh");
  assert_string_equal(sg_unique_name(g, "relu"), "relu_1");

  sg_ctx c = {(const char* const[]){"out", "x"}, 2};
  assert_true(sg_preserved(&c, "out"));
  assert_false(sg_preserved(&c, "relu"));
  assert_false(sg_preserved(NULL, "out"));
  sg_free(g);
  free(in.p);
}

static void ports_and_uses(void** state) {
  (void)state;
  pbw_buf b = PBW_BUF_INIT;
  node(&b, "s", "Split", NULL, SIMDEV, NULL);
  node(&b, "a", "Neg", IN("s:1"), SIMDEV, NULL);
  node(&b, "b", "AddV2", IN("s", "s:1", "^a"), SIMDEV, NULL);
  node(&b, "c", "Neg", IN("s:12"), SIMDEV, NULL);
  node(&b, "weird:name", "Neg", IN("weird:name", "missing:1"), SIMDEV, NULL);
  bytes in = take(&b);
  sg_graph* g = parse_ok(&in);
  sg_node* s = sg_find(g, "s");
  sg_node* a = sg_find(g, "a");
  sg_use u[8];
  assert_int_equal(sg_uses(g, s, 0, u, 8), 1);
  assert_ptr_equal(u[0].node, sg_find(g, "b"));
  assert_int_equal(u[0].input, 0);
  assert_int_equal(sg_uses(g, s, 1, u, 8), 2);
  assert_int_equal(sg_uses(g, s, 12, u, 8), 1);
  assert_int_equal(sg_uses(g, s, SG_ANY_PORT, u, 8), 4);
  assert_int_equal(sg_uses(g, s, SG_ANY_PORT, u, 1), 4); /* count > max */
  assert_int_equal(sg_uses(g, s, -1, u, 8), 0);
  assert_int_equal(sg_uses(g, a, -1, u, 8), 1);
  assert_int_equal(u[0].input, 2);
  /* A name with a ':' not followed by a port is a name. */
  sg_node* w = sg_find(g, "weird:name");
  assert_ptr_equal(sg_input(g, w, 0).node, w);
  assert_null(sg_input(g, w, 1).node);

  /* Uses follow mutations. */
  sg_err err = {0};
  sg_remove(g, sg_find(g, "b"));
  assert_int_equal(sg_uses(g, s, SG_ANY_PORT, u, 8), 2);
  assert_int_equal(sg_uses(g, a, -1, u, 8), 0);
  assert_int_equal(sg_add_input(g, sg_find(g, "c"), "^a", &err), 0);
  assert_int_equal(sg_uses(g, a, -1, u, 8), 1);
  assert_ptr_equal(u[0].node, sg_find(g, "c"));
  sg_free(g);
  free(in.p);
}

static void mutators(void** state) {
  (void)state;
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  sg_err err = {0};
  sg_node* relu = sg_find(g, "relu");
  sg_node* neg = sg_find(g, "neg");
  /* Bytes of the nodes nobody touches, to find them in the output. */
  sg_node* x = sg_find(g, "x");
  uint8_t* x_raw = malloc(x->raw_len);
  memcpy(x_raw, x->raw, x->raw_len);
  size_t x_len = x->raw_len;

  assert_int_equal(sg_set_op(g, relu, "Relu6", &err), 0);
  assert_true(relu->modified);
  assert_int_equal(sg_set_device(g, neg, SIMDEV, &err), 0);
  const char* ins[] = {"x", "^relu"};
  assert_int_equal(sg_set_inputs(g, neg, ins, 2, &err), 0);
  /* Inputs may come from the node itself. */
  assert_int_equal(sg_set_inputs(g, neg, neg->inputs, 1, &err), 0);
  assert_int_equal(neg->ninputs, 1);
  for (int i = 0; i < 9; i++) {
    assert_int_equal(sg_add_input(g, neg, "^relu", &err), 0);
  }
  assert_int_equal(neg->ninputs, 10);
  sg_node* f = sg_add_node(g, "fused", "_FusedConv2D", SIMDEV, &err);
  assert_non_null(f);
  assert_true(f->modified);
  assert_null(f->raw);
  assert_int_equal(sg_add_input(g, f, "x", &err), 0);
  assert_int_equal(sg_set_attr_int(g, f, "num_args", 1, &err), 0);
  /* A live name is refused; a removed one may be reused. */
  sg_err dup = {0};
  assert_null(sg_add_node(g, "relu", "X", "", &dup));
  assert_int_equal(dup.code, SG_EINTERNAL);
  assert_non_null(strstr(dup.msg, "relu"));
  sg_node* out = sg_find(g, "out");
  sg_remove(g, out);
  assert_null(sg_find(g, "out"));
  sg_node* out2 = sg_add_node(g, "out", "Snapshot", "", &err);
  assert_non_null(out2);
  assert_ptr_equal(sg_find(g, "out"), out2);
  assert_int_equal(err.code, SG_OK);

  bytes b = serialize(g);
  sg_graph* h = parse_ok(&b);
  assert_int_equal(sg_num_nodes(h), 5); /* x relu neg fused out */
  assert_string_equal(sg_find(h, "relu")->op, "Relu6");
  /* The modified node kept its attrs and its unknown fields. */
  sg_node* r2 = sg_find(h, "relu");
  assert_int_equal(r2->nattrs, 2);
  assert_int_equal(r2->other_len, relu->other_len);
  assert_memory_equal(r2->other, relu->other, relu->other_len);
  sg_node* n2 = sg_find(h, "neg");
  assert_string_equal(n2->device, SIMDEV);
  assert_int_equal(n2->ninputs, 10);
  assert_string_equal(n2->inputs[0], "x");
  assert_string_equal(n2->inputs[9], "^relu");
  assert_string_equal(sg_find(h, "out")->op, "Snapshot");
  int64_t v;
  assert_true(sg_attr_int(sg_find(h, "fused"), "num_args", &v));
  assert_int_equal(v, 1);
  /* The untouched node is its original bytes. */
  assert_non_null(memmem(b.p, b.len, x_raw, x_len));
  assert_int_equal(sg_find(h, "x")->raw_len, x_len);
  /* New nodes go after the last input node, before versions etc.: the
   * trailing unknown fields are still the output's last bytes. */
  const uint8_t tail[] = {0xc0, 0x3e, 0x05, 0xeb, 0x04, 0x08, 0x01, 0xec, 0x04};
  assert_true(b.len > sizeof(tail));
  assert_memory_equal(b.p + b.len - sizeof(tail), tail, sizeof(tail));
  /* Re-serializing the re-parsed graph is stable. */
  bytes b2 = serialize(h);
  assert_int_equal(b2.len, b.len);
  assert_memory_equal(b2.p, b.p, b.len);
  free(b2.p);
  free(b.p);
  free(x_raw);
  sg_free(h);
  sg_free(g);
  free(in.p);
}

/* ---- attributes ------------------------------------------------------------
 */

static void attrs_get_set(void** state) {
  (void)state;
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  sg_err err = {0};
  sg_node* n = sg_find(g, "relu");
  int t;
  char s[16];
  assert_true(sg_attr_type(n, "T", &t));
  assert_int_equal(t, 1);
  assert_true(sg_attr_string(n, "padding", s, sizeof(s)));
  assert_string_equal(s, "SAME");
  assert_false(sg_attr_string(n, "padding", s, 4)); /* too long */
  assert_false(sg_attr_type(n, "padding", &t));     /* wrong kind */
  assert_false(sg_attr_type(n, "missing", &t));
  assert_null(sg_attr_find(n, "missing"));

  int64_t iv;
  float fv;
  bool bv;
  assert_int_equal(sg_set_attr_int(g, n, "i", -5, &err), 0);
  assert_int_equal(sg_set_attr_float(g, n, "f", 0.25f, &err), 0);
  assert_int_equal(sg_set_attr_bool(g, n, "b", true, &err), 0);
  assert_int_equal(sg_set_attr_type(g, n, "T", 2, &err), 0); /* replaces */
  assert_int_equal(sg_set_attr_string(g, n, "padding", "VALID", &err), 0);
  int64_t list[] = {1, -2, 300000000000};
  assert_int_equal(sg_set_attr_ints(g, n, "strides", list, 3, &err), 0);
  assert_int_equal(sg_set_attr_ints(g, n, "empty", NULL, 0, &err), 0);
  const char* ops[] = {"BiasAdd", "Relu"};
  assert_int_equal(sg_set_attr_strings(g, n, "fused_ops", ops, 2, &err), 0);
  assert_int_equal(err.code, SG_OK);

  /* Read back after a serialize + parse, so the encoding is checked. */
  bytes b = serialize(g);
  sg_graph* h = parse_ok(&b);
  sg_node* m = sg_find(h, "relu");
  assert_true(sg_attr_int(m, "i", &iv));
  assert_int_equal(iv, -5);
  assert_true(sg_attr_float(m, "f", &fv));
  assert_true(fv == 0.25f);
  assert_true(sg_attr_bool(m, "b", &bv));
  assert_true(bv);
  assert_true(sg_attr_type(m, "T", &t));
  assert_int_equal(t, 2);
  assert_true(sg_attr_string(m, "padding", s, sizeof(s)));
  assert_string_equal(s, "VALID");
  int64_t got[4];
  int count;
  assert_true(sg_attr_ints(m, "strides", got, 4, &count));
  assert_int_equal(count, 3);
  assert_int_equal(got[1], -2);
  assert_true(got[2] == 300000000000);
  assert_true(sg_attr_ints(m, "strides", got, 1, &count)); /* count > max */
  assert_int_equal(count, 3);
  assert_true(sg_attr_ints(m, "empty", got, 4, &count));
  assert_int_equal(count, 0);
  assert_false(sg_attr_ints(m, "i", got, 4, &count)); /* not a list */
  assert_false(sg_attr_int(m, "strides", &iv));
  assert_true(sg_attr_strings(m, "fused_ops", 1, s, sizeof(s), &count));
  assert_int_equal(count, 2);
  assert_string_equal(s, "Relu");
  assert_true(sg_attr_strings(m, "fused_ops", 0, NULL, 0, &count));
  assert_int_equal(count, 2);
  assert_false(sg_attr_strings(m, "fused_ops", 2, s, sizeof(s), &count));
  assert_int_equal(m->nattrs, 8);

  /* copy, remove */
  sg_node* x = sg_find(h, "x");
  assert_int_equal(sg_copy_attr(h, x, m, "strides", &err), 0);
  assert_int_equal(sg_copy_attr(h, x, m, "missing", &err), 0); /* no-op */
  assert_true(sg_attr_ints(x, "strides", got, 4, &count));
  assert_int_equal(count, 3);
  assert_int_equal(sg_remove_attr(h, m, "i", &err), 0);
  assert_int_equal(sg_remove_attr(h, m, "i", &err), 0); /* already gone */
  assert_false(sg_attr_int(m, "i", &iv));
  assert_int_equal(m->nattrs, 7);
  assert_true(sg_attr_float(m, "f", &fv)); /* the others kept */
  sg_free(h);
  free(b.p);
  sg_free(g);
  free(in.p);
}

/* Hand-encoded AttrValues: unpacked list ints, a list split in two, and
 * a oneof written twice (the last wins). */
static void attrs_wire_forms(void** state) {
  (void)state;
  pbw_buf av = PBW_BUF_INIT;
  size_t l = pbw_open(&av);
  pbw_put_uint(&av, 3, 4); /* list { i: 4 } unpacked */
  pbw_put_uint(&av, 3, 5);
  pbw_close(&av, 1, l);
  l = pbw_open(&av);
  int64_t more[] = {6};
  pbw_put_packed(&av, 3, more, 1);
  pbw_close(&av, 1, l);
  bytes lv = take(&av);
  pbw_put_uint(&av, 3, 9); /* i: 9 then type: 3 -> a type */
  pbw_put_uint(&av, 6, 3);
  bytes two = take(&av);
  pbw_buf e = PBW_BUF_INIT;
  attr_entry(&e, "l", &lv);
  attr_entry(&e, "two", &two);
  attr_entry(&e, "l", &two); /* a repeated key: the last entry wins */
  attr_entry(&e, "k", &lv);
  bytes ex = take(&e);
  pbw_buf b = PBW_BUF_INIT;
  node(&b, "n", "X", NULL, "", &ex);
  bytes in = take(&b);
  sg_graph* g = parse_ok(&in);
  sg_node* n = sg_find(g, "n");
  assert_int_equal(n->nattrs, 3);
  int64_t got[4];
  int count, t;
  int64_t iv;
  assert_true(sg_attr_ints(n, "k", got, 4, &count));
  assert_int_equal(count, 3);
  assert_int_equal(got[0], 4);
  assert_int_equal(got[2], 6);
  assert_true(sg_attr_type(n, "two", &t));
  assert_int_equal(t, 3);
  assert_false(sg_attr_int(n, "two", &iv));
  assert_true(sg_attr_type(n, "l", &t));
  sg_free(g);
  free(in.p);
  free(ex.p);
  free(lv.p);
  free(two.p);
}

/* ---- Const ints ------------------------------------------------------------
 */

static sg_graph* const_graph(const bytes* attrs, const char* op) {
  pbw_buf b = PBW_BUF_INIT;
  node(&b, "c", op, NULL, SIMDEV, attrs);
  bytes in = take(&b);
  sg_graph* g = parse_ok(&in);
  free(in.p);
  return g;
}

/* A Const with dtype `dt` whose TensorProto is `tensor_fields`. */
static bytes const_attrs(int dt, const bytes* tensor_fields) {
  pbw_buf av = PBW_BUF_INIT;
  pbw_put_bytes(&av, 8, tensor_fields->p, tensor_fields->len);
  bytes value = take(&av);
  bytes t = av_type(dt);
  pbw_buf e = PBW_BUF_INIT;
  attr_entry(&e, "dtype", &t);
  attr_entry(&e, "value", &value);
  free(value.p);
  free(t.p);
  return take(&e);
}

static void const_ints(void** state) {
  (void)state;
  int64_t out[8];
  int count;
  /* tensor_content, int32 */
  const int32_t v[] = {1, -1, 7};
  bytes a = const_attrs_content(v, 3);
  sg_graph* g = const_graph(&a, "Const");
  assert_true(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  assert_int_equal(count, 3);
  assert_int_equal(out[1], -1);
  assert_int_equal(out[2], 7);
  assert_true(sg_const_ints(sg_find(g, "c"), out, 2, &count));
  assert_int_equal(count, 3);
  sg_free(g);
  g = const_graph(&a, "HostConst"); /* not a Const */
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);

  /* int64_val with shape [4] and two values: the last repeats. */
  pbw_buf t = PBW_BUF_INIT;
  pbw_put_uint(&t, 1, 9);
  size_t s = pbw_open(&t);
  size_t d = pbw_open(&t);
  pbw_put_uint(&t, 1, 4);
  pbw_close(&t, 2, d);
  pbw_close(&t, 2, s);
  int64_t vals[] = {-3, 5};
  pbw_put_packed(&t, 10, vals, 2);
  bytes tf = take(&t);
  a = const_attrs(9, &tf);
  g = const_graph(&a, "Const");
  assert_true(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  assert_int_equal(count, 4);
  assert_int_equal(out[0], -3);
  assert_int_equal(out[1], 5);
  assert_int_equal(out[3], 5);
  sg_free(g);
  free(a.p);
  /* ... declared int32 by the node but int64 by the tensor: refused. */
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);
  free(tf.p);

  /* A scalar int32 with no values: zero. */
  pbw_put_uint(&t, 1, 3);
  tf = take(&t);
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_true(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  assert_int_equal(count, 1);
  assert_int_equal(out[0], 0);
  sg_free(g);
  free(a.p);
  free(tf.p);

  /* Unpacked int_val, scalar. */
  pbw_put_int(&t, 7, -42);
  tf = take(&t);
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_true(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  assert_int_equal(count, 1);
  assert_int_equal(out[0], -42);
  sg_free(g);
  free(a.p);
  /* A float Const is not an int Const. */
  a = const_attrs(1, &tf);
  g = const_graph(&a, "Const");
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);
  free(tf.p);

  /* tensor_content of the wrong size; more values than elements. */
  uint8_t five[5] = {0};
  pbw_put_bytes(&t, 4, five, 5);
  tf = take(&t);
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);
  free(tf.p);
  int64_t two[] = {1, 2};
  pbw_put_packed(&t, 7, two, 2); /* scalar shape, two values */
  tf = take(&t);
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);
  free(tf.p);
  /* Unknown rank. */
  s = pbw_open(&t);
  pbw_put_uint(&t, 3, 1);
  pbw_close(&t, 2, s);
  tf = take(&t);
  a = const_attrs(3, &tf);
  g = const_graph(&a, "Const");
  assert_false(sg_const_ints(sg_find(g, "c"), out, 8, &count));
  sg_free(g);
  free(a.p);
  free(tf.p);
}

/* ---- malformed inputs ------------------------------------------------------
 */

/* sg_parse must fail with SG_EINVAL and a message containing `needle`. */
static void rejects(const bytes* b, const char* needle) {
  uint8_t* p = exact(b);
  sg_graph* g = (sg_graph*)p; /* overwritten with NULL on failure */
  sg_err err = {0};
  int rc = sg_parse(p, b->len, &g, &err);
  free(p);
  if (rc == 0) {
    sg_free(g);
    fail_msg("accepted a malformed GraphDef (expected '%s')", needle);
  }
  assert_null(g);
  assert_int_equal(err.code, SG_EINVAL);
  if (strstr(err.msg, needle) == NULL) {
    fail_msg("message '%s' lacks '%s'", err.msg, needle);
  }
  assert_non_null(strstr(err.msg, "malformed GraphDef"));
}

#define REJECTS(needle, ...)                   \
  do {                                         \
    const uint8_t raw_[] = {__VA_ARGS__};      \
    bytes b_ = {(uint8_t*)raw_, sizeof(raw_)}; \
    rejects(&b_, needle);                      \
  } while (0)

static void malformed_rejected(void** state) {
  (void)state;
  REJECTS("length runs past the end", 0x0a, 0x05, 0x0a, 0x01, 'a');
  REJECTS("truncated", 0x0a);
  REJECTS("field number 0", 0x02, 0x00);
  REJECTS("wire type 6", 0x0e);
  REJECTS("node (1) has wire type 0", 0x08, 0x01);
  REJECTS("without a name", 0x0a, 0x03, 0x12, 0x01, 'X');
  REJECTS("a second node of that name", 0x0a, 0x03, 0x0a, 0x01, 'a', 0x0a, 0x03,
          0x0a, 0x01, 'a');
  REJECTS("NUL byte", 0x0a, 0x04, 0x0a, 0x02, 'a', 0x00);
  REJECTS("NodeDef.op has wire type 0", 0x0a, 0x05, 0x0a, 0x01, 'a', 0x10,
          0x01);
  REJECTS("an empty input name", 0x0a, 0x05, 0x0a, 0x01, 'a', 0x1a, 0x00);
  REJECTS("NodeDef: length runs past", 0x0a, 0x05, 0x0a, 0x01, 'a', 0x1a, 0x09);
  /* attr entries: no key; value not length-delimited; value malformed. */
  REJECTS("attr entry has no name", 0x0a, 0x07, 0x0a, 0x01, 'a', 0x2a, 0x02,
          0x12, 0x00);
  REJECTS("attr value is not length-delimited", 0x0a, 0x0a, 0x0a, 0x01, 'a',
          0x2a, 0x05, 0x0a, 0x01, 'k', 0x10, 0x01);
  REJECTS("attr value: ", 0x0a, 0x0b, 0x0a, 0x01, 'a', 0x2a, 0x06, 0x0a, 0x01,
          'k', 0x12, 0x01, 0x0a);
  REJECTS("attr entry: ", 0x0a, 0x06, 0x0a, 0x01, 'a', 0x2a, 0x01, 0xff);
  REJECTS("NodeDef.attr is not length-delimited", 0x0a, 0x05, 0x0a, 0x01, 'a',
          0x28, 0x01);
  /* A group never closed, after a good node. */
  REJECTS("group not closed", 0x0a, 0x03, 0x0a, 0x01, 'a', 0x1b);
  /* The message names the node and the byte. */
  const uint8_t raw[] = {0x0a, 0x03, 0x0a, 0x01, 'a',  0x0a, 0x06,
                         0x0a, 0x01, 'b',  0x1a, 0x01, 0x00};
  bytes b = {(uint8_t*)raw, sizeof(raw)};
  rejects(&b, "node 1 ('b')");
  rejects(&b, "byte 10");
}

/* Every prefix of a valid graph parses or is rejected with a message; the
 * run under valgrind/ASan checks that no byte past a prefix is read. */
static void every_truncation(void** state) {
  (void)state;
  bytes in = sample_graph();
  int rejected = 0;
  for (size_t n = 0; n < in.len; n++) {
    bytes cut = {in.p, n};
    uint8_t* p = exact(&cut);
    sg_graph* g = NULL;
    sg_err err = {0};
    if (sg_parse(p, n, &g, &err) == 0) {
      bytes out = serialize(g); /* a prefix that parses round-trips */
      assert_int_equal(out.len, n);
      assert_memory_equal(out.p, in.p, n);
      free(out.p);
      sg_free(g);
    } else {
      assert_int_equal(err.code, SG_EINVAL);
      assert_true(strlen(err.msg) > 0);
      rejected++;
    }
    free(p);
  }
  assert_true(rejected > (int)in.len / 2);
  free(in.p);
}

/* ---- SIMDEV_GRAPH_PASSES and the driver ------------------------------------
 */

static const char* const kNames[] = {"resource_apply", "fold_pad", "remap",
                                     "elementwise"};

static sg_pass_mask parse(const char* v) {
  sg_pass_mask m = 0xdead;
  sg_err err = {0};
  if (sg_passes_parse_names(v, kNames, 4, &m, &err) != 0) {
    fail_msg("'%s': %s", v, err.msg);
  }
  return m;
}

static void passes_bad(const char* v, const char* needle) {
  sg_pass_mask m = 0xdead;
  sg_err err = {0};
  assert_int_equal(sg_passes_parse_names(v, kNames, 4, &m, &err), -1);
  assert_int_equal(m, 0xdead);
  assert_int_equal(err.code, SG_EINVAL);
  assert_non_null(strstr(err.msg, "SIMDEV_GRAPH_PASSES"));
  assert_non_null(strstr(err.msg, "remap")); /* the known passes */
  if (strstr(err.msg, needle) == NULL)
    fail_msg("'%s' lacks '%s'", err.msg, needle);
}

static void passes_grammar(void** state) {
  (void)state;
  assert_int_equal(parse(NULL), 0xf);
  assert_int_equal(parse("all"), 0xf);
  assert_int_equal(parse("none"), 0);
  assert_int_equal(parse("remap"), 0x4);
  assert_int_equal(parse(" remap , fold_pad "), 0x6);
  assert_int_equal(parse("-remap"), 0xb);
  assert_int_equal(parse("-remap,-elementwise"), 0x3);
  assert_int_equal(parse("all,-resource_apply"), 0xe);
  assert_int_equal(parse("remap,-remap"), 0);
  assert_int_equal(parse("none,elementwise"), 0x8);
  assert_int_equal(parse("-remap,none"), 0);
  passes_bad("", "\"\"");
  passes_bad("remap,", "an empty item");
  passes_bad(",remap", "an empty item");
  passes_bad("-", "an empty item");
  passes_bad("remapper", "no pass named \"remapper\"");
  passes_bad("Remap", "no pass named \"Remap\"");
  passes_bad("-all", "no pass named \"all\"");
  passes_bad("1", "\"1\"");
}

static void driver(void** state) {
  (void)state;
  /* This build's table: every name in it parses, none runs twice. */
  sg_pass_mask m;
  sg_err err = {0};
  assert_int_equal(sg_passes_parse(NULL, &m, &err), 0);
  int n = sg_pass_count();
  assert_int_equal(m, n ? ((sg_pass_mask)1 << n) - 1 : 0);
  char buf[256];
  sg_passes_describe(0, buf, sizeof(buf));
  assert_string_equal(buf, "none");
  for (int i = 0; i < n; i++) {
    assert_int_equal(sg_passes_parse(sg_pass_name(i), &m, &err), 0);
    assert_int_equal(m, (sg_pass_mask)1 << i);
    sg_passes_describe(m, buf, sizeof(buf));
    assert_string_equal(buf, sg_pass_name(i));
  }
  assert_null(sg_pass_name(n));
  assert_int_equal(sg_passes_parse("none", &m, &err), 0);
  /* No pass enabled: the graph is untouched, byte for byte. */
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  assert_int_equal(sg_run_passes(g, NULL, 0, &err), 0);
  bytes out = serialize(g);
  assert_int_equal(out.len, in.len);
  assert_memory_equal(out.p, in.p, in.len);
  free(out.p);
  sg_free(g);
  free(in.p);
}

/* Passes of the tests' own, to drive the driver's checks. */
static int pass_relu6(sg_graph* g, const sg_ctx* c, sg_err* err) {
  int n = 0;
  for (int i = 0; i < sg_num_nodes(g); i++) {
    sg_node* node = sg_node_at(g, i);
    if (node->removed || strcmp(node->op, "Relu") != 0) continue;
    if (!sg_on_simdev(node) || sg_preserved(c, node->name)) continue;
    if (sg_set_op(g, node, "Relu6", err) != 0) return -1;
    n++;
  }
  return n;
}
static int pass_dangle(sg_graph* g, const sg_ctx* c, sg_err* err) {
  sg_remove(g, sg_find(g, "x")); /* relu and neg still name it */
  return 1;
}
static int pass_silent_failure(sg_graph* g, const sg_ctx* c, sg_err* err) {
  return -1;
}
static int pass_failure(sg_graph* g, const sg_ctx* c, sg_err* err) {
  return sg_fail(err, SG_ENOMEM, "pass_failure ran out of %s", "memory");
}
static int pass_wipe(sg_graph* g, const sg_ctx* c, sg_err* err) {
  for (int i = 0; i < sg_num_nodes(g); i++) sg_remove(g, sg_node_at(g, i));
  return sg_num_nodes(g);
}

static const sg_pass_def kFake[] = {
    {"relu6", pass_relu6},
    {"dangle", pass_dangle},
    {"silent", pass_silent_failure},
    {"failure", pass_failure},
    {"wipe", pass_wipe},
};

/* Runs the fake passes in mask on a fresh sample graph. */
static int run_fake(sg_pass_mask mask, const sg_ctx* c, sg_err* err,
                    bytes* out) {
  bytes in = sample_graph();
  sg_graph* g = parse_ok(&in);
  int rc = sg_run_pass_list(g, c, kFake, 5, mask, err);
  if (out != NULL) *out = serialize(g);
  sg_free(g);
  free(in.p);
  return rc;
}

static void driver_checks(void** state) {
  (void)state;
  sg_err err = {0};
  bytes once;
  /* A rewrite is counted; run again on its output, nothing is left. */
  assert_int_equal(run_fake(0x1, NULL, &err, &once), 1);
  sg_graph* g = parse_ok(&once);
  assert_string_equal(sg_find(g, "relu")->op, "Relu6");
  assert_int_equal(sg_run_pass_list(g, NULL, kFake, 5, 0x1, &err), 0);
  sg_free(g);
  free(once.p);
  /* The preserve list is the pass's to honour. */
  sg_ctx keep = {(const char* const[]){"relu"}, 1};
  assert_int_equal(run_fake(0x1, &keep, &err, NULL), 0);
  /* A pass leaving an input that names no node is caught, by name. */
  err = (sg_err){0};
  assert_int_equal(run_fake(0x3, NULL, &err, NULL), -1);
  assert_int_equal(err.code, SG_EINTERNAL);
  assert_non_null(strstr(err.msg, "pass dangle left 2 input(s)"));
  assert_non_null(strstr(err.msg, "'relu' input 'x'"));
  err = (sg_err){0};
  assert_int_equal(run_fake(0x4, NULL, &err, NULL), -1);
  assert_int_equal(err.code, SG_EINTERNAL);
  assert_string_equal(err.msg, "pass silent failed without a message");
  err = (sg_err){0};
  assert_int_equal(run_fake(0x8, NULL, &err, NULL), -1);
  assert_int_equal(err.code, SG_ENOMEM);
  assert_string_equal(err.msg, "pass_failure ran out of memory");
  err = (sg_err){0};
  assert_int_equal(run_fake(0x10, NULL, &err, NULL), -1);
  assert_int_equal(err.code, SG_EINTERNAL);
  assert_string_equal(err.msg, "pass wipe removed every node");
  /* Passes outside the mask do not run. */
  err = (sg_err){0};
  assert_int_equal(run_fake(0, NULL, &err, NULL), 0);
  assert_int_equal(err.code, SG_OK);
}

static void optimize_entry(void** state) {
  (void)state;
  bytes in = sample_graph();
  uint8_t* out = (uint8_t*)1;
  size_t len = 1;
  sg_stats st;
  sg_err err = {0};
  /* Nothing enabled: 0, no output, the stats filled. */
  assert_int_equal(sg_optimize(in.p, in.len, NULL, 0, &out, &len, &st, &err),
                   0);
  assert_null(out);
  assert_int_equal(len, 0);
  assert_int_equal(st.nodes, 4);
  assert_int_equal(st.simdev_nodes, 2);
  assert_int_equal(st.rewrites, 0);
  /* Every pass of this build: its output (if any) is stable. */
  sg_pass_mask all;
  assert_int_equal(sg_passes_parse(NULL, &all, &err), 0);
  int rc = sg_optimize(in.p, in.len, NULL, all, &out, &len, &st, &err);
  assert_true(rc == 0 || rc == 1);
  if (rc == 1) {
    uint8_t* again = NULL;
    size_t again_len = 0;
    assert_int_equal(
        sg_optimize(out, len, NULL, all, &again, &again_len, NULL, &err), 0);
    free(out);
  }
  /* A malformed graph: -1 and the parser's message. */
  const uint8_t bad[] = {0x0a, 0x05, 0x0a};
  bytes b = {(uint8_t*)bad, sizeof(bad)};
  uint8_t* p = exact(&b);
  assert_int_equal(sg_optimize(p, b.len, NULL, all, &out, &len, NULL, &err),
                   -1);
  assert_int_equal(err.code, SG_EINVAL);
  assert_non_null(strstr(err.msg, "malformed GraphDef"));
  assert_null(out);
  free(p);
  free(in.p);
}

int main(int argc, char** argv) {
  if (argc > 1 && argv[1] != NULL && argv[1][0] != '\0') {
    cmocka_set_test_filter(argv[1]);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(round_trip_identical),
      cmocka_unit_test(round_trip_keeps_odd_encodings),
      cmocka_unit_test(empty_graph),
      cmocka_unit_test(nodes_and_inputs),
      cmocka_unit_test(ports_and_uses),
      cmocka_unit_test(mutators),
      cmocka_unit_test(attrs_get_set),
      cmocka_unit_test(attrs_wire_forms),
      cmocka_unit_test(const_ints),
      cmocka_unit_test(malformed_rejected),
      cmocka_unit_test(every_truncation),
      cmocka_unit_test(passes_grammar),
      cmocka_unit_test(driver),
      cmocka_unit_test(driver_checks),
      cmocka_unit_test(optimize_entry),
  };
  return cmocka_run_group_tests_name("graph", tests, NULL, NULL);
}
