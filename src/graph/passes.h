/*
 * passes.h - the passes and the driver that runs them (pass.c).
 *
 * Each pass is `int sg_pass_<name>(sg_graph*, const sg_ctx*, sg_err*)` in
 * its own file, listed with one line in passes.def (in run order), which
 * declares it here and puts it in pass.c's table.
 * A pass never calls pass.c (tests/layering.py forbids the circle).
 *
 * SIMDEV_GRAPH_PASSES chooses the passes (read once, by TF_InitGraph and
 * simdev_graph_opt). Grammar (blanks around items are ignored):
 *   unset, "all"      every pass (the default)
 *   "none"            no pass: the optimizer leaves every graph to TF
 *   "a,b"             only passes a and b
 *   "-a,-b"           every pass but a and b
 *   "all,-a" ...      items apply left to right: "all"/"none" reset the set,
 *                     "name" adds, "-name" removes; a list whose first item
 *                     is "-name" starts from all, any other from none
 * Anything else (an empty value or item, an unknown name) is an error whose
 * message names the variable, the value and the known passes; TF_InitGraph
 * turns it into an import-time failure, as bad SIMDEV_* settings are.
 *
 * Thread contract: the table is constant; the functions keep no state.
 */
#ifndef SIMDEV_GRAPH_PASSES_H_
#define SIMDEV_GRAPH_PASSES_H_

#include <stdint.h>

#include "graph/sg.h"

/* ---- the passes: one line each in passes.def ---------------------------- */
#define SG_PASS(name, file) \
  int sg_pass_##name(sg_graph* g, const sg_ctx* c, sg_err* err);
#include "graph/passes.def"
#undef SG_PASS

/* ---- the driver (pass.c) --------------------------------------------------
 */
#define SG_PASSES_ENV "SIMDEV_GRAPH_PASSES"
typedef uint32_t sg_pass_mask; /* bit i: table entry i enabled */
#define SG_MAX_PASSES 32

/* The table, in run order. */
int sg_pass_count(void);
const char* sg_pass_name(int i);

/* Parses a SIMDEV_GRAPH_PASSES value (NULL: unset, every pass) against the
 * first n names of `names` (sg_passes_parse: the table's). 0, or -1 with
 * err SG_EINVAL naming the variable, the value and the known passes. */
int sg_passes_parse_names(const char* value, const char* const* names, int n,
                          sg_pass_mask* mask, sg_err* err);
int sg_passes_parse(const char* value, sg_pass_mask* mask, sg_err* err);
/* sg_passes_parse(getenv(SIMDEV_GRAPH_PASSES)). */
int sg_passes_from_env(sg_pass_mask* mask, sg_err* err);
/* The enabled passes as "a,b" (or "none") into buf. */
void sg_passes_describe(sg_pass_mask mask, char* buf, size_t len);

/* Runs the enabled passes once each, in table order. Returns the total
 * number of rewrites (0: g is unchanged), or -1 with err set: a pass
 * failed, or (SG_EINTERNAL, naming the pass: a pass bug caught before TF
 * sees the graph) left an input naming no live node, or removed every
 * node. */
int sg_run_passes(sg_graph* g, const sg_ctx* c, sg_pass_mask mask, sg_err* err);
/* The same over an explicit list (bit i of mask: passes[i]); the unit
 * tests drive the driver's checks with passes of their own. */
typedef struct sg_pass_def {
  const char* name;
  sg_pass_fn fn;
} sg_pass_def;
int sg_run_pass_list(sg_graph* g, const sg_ctx* c, const sg_pass_def* passes,
                     int n, sg_pass_mask mask, sg_err* err);

#endif /* SIMDEV_GRAPH_PASSES_H_ */
