/*
 * fuzz_graph.c - libFuzzer target for the graph optimizer's reader and
 * passes (src/graph, src/pbwire), without TensorFlow: what optimize_func
 * does with the bytes TF hands it, on arbitrary bytes.
 *
 * For every input:
 * - sg_parse either fails with SG_EINVAL and a message, or succeeds; then
 * - an unmodified graph serializes to the input, byte for byte;
 * - every getter of sg.h runs on every node and attribute (they must
 *   reject, not misread, whatever an attribute holds), and sg_input /
 *   sg_uses on every input;
 * - every pass runs (sg_optimize, all enabled; the first node preserved when
 *   the first byte is odd); its output parses again, and a second run over
 *   it rewrites nothing (passes are idempotent).
 * A violation aborts (a crash for libFuzzer); ASan/UBSan catch the rest.
 *
 *   build/tests/fuzz/fuzz_graph -max_total_time=60 build/tests/fuzz/corpus_graph
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                  \
      abort();                                                         \
    }                                                                  \
  } while (0)

/* Every getter on every attribute of n; results are only sanity-checked
 * (the point is that none reads out of bounds or crashes). */
static void poke_node(sg_graph* g, sg_node* n) {
  int64_t ints[8];
  char buf[32];
  int count, dtype;
  int64_t i64;
  float f;
  bool b;
  for (int a = 0; a < n->nattrs; a++) {
    const char* name = n->attrs[a].name;
    CHECK(sg_attr_find(n, name) != NULL);
    sg_attr_type(n, name, &dtype);
    sg_attr_int(n, name, &i64);
    sg_attr_float(n, name, &f);
    sg_attr_bool(n, name, &b);
    sg_attr_string(n, name, buf, sizeof(buf));
    if (sg_attr_ints(n, name, ints, 8, &count)) CHECK(count >= 0);
    if (sg_attr_strings(n, name, 0, NULL, 0, &count)) {
      CHECK(count >= 0);
      for (int k = 0; k < count && k < 4; k++) {
        sg_attr_strings(n, name, k, buf, sizeof(buf), &count);
      }
    }
  }
  if (sg_const_ints(n, ints, 8, &count)) CHECK(count >= 0);
  for (int i = 0; i < n->ninputs; i++) {
    sg_ref r = sg_input(g, n, i);
    CHECK(r.node == NULL || !r.node->removed);
    CHECK(r.port >= -1);
  }
  sg_use uses[4];
  CHECK(sg_uses(g, n, SG_ANY_PORT, uses, 4) >= 0);
  CHECK(sg_uses(g, n, -1, uses, 4) >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sg_graph* g = NULL;
  sg_err err = {0};
  if (sg_parse(data, size, &g, &err) != 0) {
    CHECK(g == NULL && err.code == SG_EINVAL && err.msg[0] != '\0');
    return 0;
  }
  uint8_t* out = NULL;
  size_t len = 0;
  CHECK(sg_serialize(g, &out, &len, &err) == 0);
  CHECK(len == size && (size == 0 || memcmp(out, data, size) == 0));
  free(out);
  for (int i = 0; i < sg_num_nodes(g); i++) poke_node(g, sg_node_at(g, i));

  const char* first = sg_num_nodes(g) ? sg_node_at(g, 0)->name : NULL;
  sg_ctx ctx = {&first, first && size && (data[0] & 1) ? 1 : 0};
  sg_pass_mask all;
  CHECK(sg_passes_parse(NULL, &all, &err) == 0);
  sg_stats st;
  int rc = sg_optimize_graph(g, &ctx, all, &out, &len, &st, &err);
  /* A failure always says why. */
  CHECK(rc >= 0 || err.code != SG_OK);
  /* A pass that dangles an input or wipes the graph: the driver's
   * Internal error. Never acceptable, whatever the input. */
  CHECK(err.code != SG_EINTERNAL);
  if (rc == 1) {
    /* The output parses, and the passes have nothing left to do on it. */
    uint8_t* again = NULL;
    size_t again_len = 0;
    sg_err err2 = {0};
    int rc2 =
        sg_optimize(out, len, &ctx, all, &again, &again_len, &st, &err2);
    if (rc2 != 0) {
      fprintf(stderr, "second run: rc %d, %d rewrites, %s\n", rc2,
              st.rewrites, err2.msg);
    }
    CHECK(rc2 == 0);
    free(again);
    free(out);
  }
  sg_free(g);
  return 0;
}
