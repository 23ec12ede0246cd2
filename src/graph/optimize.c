/*
 * optimize.c - sg_optimize (graph.h): parse, run the passes, serialize.
 * The one sequence the plugin, the tool and the fuzz target share, so
 * what the tests and the fuzzer exercise is what TF runs.
 *
 * Thread contract: no state; each call owns its graph.
 */
#include <stdlib.h>

#include "graph/graph.h"

int sg_optimize_graph(sg_graph* g, const sg_ctx* ctx, sg_pass_mask mask,
                      uint8_t** out, size_t* out_len, sg_stats* stats,
                      sg_err* err) {
  sg_stats st = {0, 0, 0};
  *out = NULL;
  *out_len = 0;
  st.nodes = sg_num_nodes(g);
  for (int i = 0; i < st.nodes; i++) {
    if (sg_on_simdev(sg_node_at(g, i))) st.simdev_nodes++;
  }
  int rc = 0;
  int n = mask ? sg_run_passes(g, ctx, mask, err) : 0;
  if (n < 0) {
    rc = -1;
  } else if (n > 0) {
    st.rewrites = n;
    /* sg_run_passes has refused a graph left with no node. */
    if (sg_serialize(g, out, out_len, err) != 0) {
      rc = -1;
    } else {
      rc = 1;
    }
  }
  if (stats != NULL) *stats = st;
  return rc;
}

int sg_optimize(const void* in, size_t len, const sg_ctx* ctx,
                sg_pass_mask mask, uint8_t** out, size_t* out_len,
                sg_stats* stats, sg_err* err) {
  sg_graph* g = NULL;
  *out = NULL;
  *out_len = 0;
  if (sg_parse(in, len, &g, err) != 0) return -1;
  int rc = sg_optimize_graph(g, ctx, mask, out, out_len, stats, err);
  sg_free(g);
  return rc;
}
