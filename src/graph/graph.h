/*
 * graph.h - simdev's graph optimizer (src/graph, prefix sg_), as the rest
 * of simdev and the tools see it.
 *
 * TensorFlow finds the optimizer by dlsym("TF_InitGraph") in libsimdev.so
 * (declared in TF's grappler.h, defined in plugin.c, exported by
 * src/se/exports.map). TF_InitGraph reads the settings once:
 *   SIMDEV_GRAPH_PASSES  which passes run (grammar in passes.h; default all)
 *   SIMDEV_GRAPH_LOG     0 (default) or 1: one line on stderr per graph the
 *                        optimizer is given (nodes, nodes on SIMDEV, passes,
 *                        rewrites, size of the preserve list), to see when
 *                        and on what TF calls it
 * A bad value fails TF_InitGraph with a message naming the variable (TF then
 * aborts `import tensorflow`, as for every bad SIMDEV_* setting).
 *
 * sg_optimize is the whole optimizer without TensorFlow: plugin.c calls it
 * with TF's buffers, simdev_graph_opt (tool.c) with a file's bytes, and
 * tests/fuzz/fuzz_graph.c with arbitrary bytes. docs/graph-optimizer.md
 * tells plugin authors how TF drives it.
 *
 * Thread contract: sg_optimize keeps no state; TF may call it on several
 * threads at once for different graphs.
 */
#ifndef SIMDEV_GRAPH_GRAPH_H_
#define SIMDEV_GRAPH_GRAPH_H_

#include <stddef.h>
#include <stdint.h>

#include "graph/passes.h"
#include "graph/sg.h"

typedef struct sg_stats {
  int nodes;        /* in the input */
  int simdev_nodes; /* of those, placed on SIMDEV */
  int rewrites;     /* by the passes run */
} sg_stats;

/* Parses the serialized GraphDef [in, in + len), runs the passes in mask
 * with the preserve list, and serializes the result if anything changed.
 * Returns 1 with *out (malloc'd, free() it) and *out_len when the graph
 * changed; 0 with *out = NULL when nothing did (the input stands); -1 with
 * err set (SG_EINVAL: a malformed GraphDef; SG_EINTERNAL: a pass broke an
 * invariant, e.g. left no node, which TF would take for an empty graph;
 * SG_ENOMEM).
 * stats may be NULL. */
int sg_optimize(const void* in, size_t len, const sg_ctx* ctx,
                sg_pass_mask mask, uint8_t** out, size_t* out_len,
                sg_stats* stats, sg_err* err);
/* The same on a graph already parsed (g is changed in place; the caller
 * frees it). */
int sg_optimize_graph(sg_graph* g, const sg_ctx* ctx, sg_pass_mask mask,
                      uint8_t** out, size_t* out_len, sg_stats* stats,
                      sg_err* err);

#endif /* SIMDEV_GRAPH_GRAPH_H_ */
