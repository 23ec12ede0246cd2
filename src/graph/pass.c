/*
 * pass.c - the pass table, SIMDEV_GRAPH_PASSES (grammar in passes.h) and
 * the driver that runs the enabled passes over one graph.
 *
 * The driver runs each enabled pass once, in table order. TF itself calls
 * the optimizer again on later meta-optimizer iterations, which is why
 * every pass must be idempotent (sg.h); a fixed point here would only hide
 * a pass that is not.
 *
 * Thread contract: the table is constant; nothing here keeps state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/passes.h"

/* Run order: passes.def's; the NULL line ends the table. */
static const sg_pass_def k_passes[] = {
#define SG_PASS(name, file) {#name, sg_pass_##name},
#include "graph/passes.def"
#undef SG_PASS
    {NULL, NULL},
};
_Static_assert(sizeof(k_passes) / sizeof(k_passes[0]) - 1 <= SG_MAX_PASSES,
               "sg_pass_mask has a bit per pass");

int sg_pass_count(void) {
  return (int)(sizeof(k_passes) / sizeof(k_passes[0])) - 1;
}

const char* sg_pass_name(int i) {
  return i >= 0 && i < sg_pass_count() ? k_passes[i].name : NULL;
}

/* ---- SIMDEV_GRAPH_PASSES --------------------------------------------------
 */

static void known_list(const char* const* names, int n, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len; i++) {
    used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                             names[i]);
  }
  if (n == 0) snprintf(buf, len, "(none in this build)");
}

static int bad_value(const char* value, const char* why,
                     const char* const* names, int n, sg_err* err) {
  char known[160];
  known_list(names, n, known, sizeof(known));
  return sg_fail(err, SG_EINVAL,
                 "invalid %s=\"%s\": %s; expected all, none, or a comma "
                 "list of passes (name, or -name to leave one out) from: %s",
                 SG_PASSES_ENV, value, why, known);
}

int sg_passes_parse_names(const char* value, const char* const* names, int n,
                          sg_pass_mask* mask, sg_err* err) {
  const sg_pass_mask all =
      n >= SG_MAX_PASSES ? ~(sg_pass_mask)0 : ((sg_pass_mask)1 << n) - 1;
  if (value == NULL) {
    *mask = all;
    return 0;
  }
  sg_pass_mask m = 0;
  bool first = true;
  const char* p = value;
  for (;;) {
    const char* end = strchr(p, ',');
    if (end == NULL) end = p + strlen(p);
    const char* a = p;
    const char* b = end;
    while (a < b && (*a == ' ' || *a == '\t')) a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
    size_t len = (size_t)(b - a);
    bool minus = len > 0 && *a == '-';
    if (minus) {
      a++;
      len--;
    }
    if (len == 0) return bad_value(value, "an empty item", names, n, err);
    if (first && minus) m = all;
    first = false;
    if (!minus && len == 3 && strncmp(a, "all", 3) == 0) {
      m = all;
    } else if (!minus && len == 4 && strncmp(a, "none", 4) == 0) {
      m = 0;
    } else {
      int i = 0;
      while (i < n && !(strncmp(names[i], a, len) == 0 && names[i][len] == 0)) {
        i++;
      }
      if (i == n) {
        char why[96];
        snprintf(why, sizeof(why), "no pass named \"%.*s\"",
                 len > 40 ? 40 : (int)len, a);
        return bad_value(value, why, names, n, err);
      }
      if (minus) {
        m &= ~((sg_pass_mask)1 << i);
      } else {
        m |= (sg_pass_mask)1 << i;
      }
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  *mask = m;
  return 0;
}

int sg_passes_parse(const char* value, sg_pass_mask* mask, sg_err* err) {
  const char* names[SG_MAX_PASSES + 1] = {NULL};
  int n = sg_pass_count();
  for (int i = 0; i < n; i++) names[i] = k_passes[i].name;
  return sg_passes_parse_names(value, names, n, mask, err);
}

int sg_passes_from_env(sg_pass_mask* mask, sg_err* err) {
  return sg_passes_parse(getenv(SG_PASSES_ENV), mask, err);
}

void sg_passes_describe(sg_pass_mask mask, char* buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < sg_pass_count() && used < len; i++) {
    if (mask & ((sg_pass_mask)1 << i)) {
      used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                               k_passes[i].name);
    }
  }
  if (buf[0] == '\0') snprintf(buf, len, "none");
}

/* ---- the driver -----------------------------------------------------------
 */

/* Inputs of live nodes that name no live node; the first one's place. */
static int dangling(sg_graph* g, const sg_node** node, const char** input) {
  int count = 0;
  for (int i = 0; i < sg_num_nodes(g); i++) {
    const sg_node* n = sg_node_at(g, i);
    if (n->removed) continue;
    for (int k = 0; k < n->ninputs; k++) {
      if (sg_input(g, n, k).node != NULL) continue;
      if (count++ == 0) {
        *node = n;
        *input = n->inputs[k];
      }
    }
  }
  return count;
}

static int live_nodes(sg_graph* g) {
  int live = 0;
  for (int i = 0; i < sg_num_nodes(g); i++) live += !sg_node_at(g, i)->removed;
  return live;
}

int sg_run_pass_list(sg_graph* g, const sg_ctx* c, const sg_pass_def* passes,
                     int npasses, sg_pass_mask mask, sg_err* err) {
  const sg_node* node = NULL;
  const char* input = NULL;
  int total = 0;
  int before = -1;
  const int live = live_nodes(g);
  for (int i = 0; i < npasses && i < SG_MAX_PASSES; i++) {
    if (!(mask & ((sg_pass_mask)1 << i))) continue;
    /* Inputs that named nothing in TF's graph (there should be none) are
     * not the pass's doing: count them first. */
    if (before < 0) before = dangling(g, &node, &input);
    int n = passes[i].fn(g, c, err);
    if (n < 0) {
      if (err->code == SG_OK) {
        sg_fail(err, SG_EINTERNAL, "pass %s failed without a message",
                passes[i].name);
      }
      return -1;
    }
    int after = dangling(g, &node, &input);
    if (after > before) {
      return sg_fail(err, SG_EINTERNAL,
                     "pass %s left %d input(s) naming no node (first: node "
                     "'%s' input '%s')",
                     passes[i].name, after - before, node->name, input);
    }
    /* TF takes an empty output for an empty graph: never hand one over. */
    if (live > 0 && live_nodes(g) == 0) {
      return sg_fail(err, SG_EINTERNAL, "pass %s removed every node",
                     passes[i].name);
    }
    before = after;
    total += n;
  }
  return total;
}

int sg_run_passes(sg_graph* g, const sg_ctx* c, sg_pass_mask mask,
                  sg_err* err) {
  return sg_run_pass_list(g, c, k_passes, sg_pass_count(), mask, err);
}
