/*
 * plugin.c - TF_InitGraph and optimize_func: the graph optimizer's only
 * contact with TensorFlow (grappler.h). Errors are sg_err codes inside and
 * become a TF_Status once, here (set_status).
 *
 * How TF 2.21 drives it (docs/graph-optimizer.md has the long form):
 * - TF_InitGraph runs once, at `import tensorflow`, after SE_InitPlugin.
 *   An error status makes TF abort the import; so does a missing
 *   device_type or optimize_func.
 * - TF's meta-optimizer creates simdev's optimizer for every graph with a
 *   node placed on a SIMDEV device (the device types of the graph's nodes
 *   decide) and runs it after TF's own passes, on each meta-optimizer
 *   iteration (two by default), on the output of the last; even 3-node
 *   function graphs (tests/tf/test_graph_core.py).
 * - optimize_func gets the serialized GraphDef (its function library
 *   replaced by a stub) and a TF_GrapplerItem for the preserve list. It
 *   answers with a serialized GraphDef and TF_OK; or TF_ABORTED, TF's
 *   convention for "nothing changed" (TF keeps its graph, logs nothing);
 *   any other error: TF keeps its graph and logs the message at ERROR.
 *   An OK with an empty buffer would be taken as an EMPTY GRAPH.
 *
 * Configs: every TP_OptimizerConfigs toggle stays TF_TriState_Default. TF
 * treats Default as "on" and Off as "off for the whole graph", CPU nodes
 * included (an Off here would switch TF's pass off for every graph holding
 * a SIMDEV node); no simdev pass needs one of TF's passes off.
 *
 * Thread contract: g_mask, g_log and the g_preserve_* pointers are
 * written once by TF_InitGraph,
 * before TF can call optimize_func (TF registers the optimizer after
 * TF_InitGraph returns); optimize_func keeps no other state and may run on
 * several threads at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "tensorflow/c/experimental/grappler/grappler.h"
#include "tfcompat/tfc.h"

/* TF_GetNodesToPreserveList[Size] are defined in libtensorflow_cc.so.2
 * (the wheel's C API library), not in libtensorflow_framework.so.2. The
 * plugin does not link it: a 1 GB library loaded into every process that
 * opens libsimdev.so (the conformance harness, valgrind runs: memcheck of
 * the harness went from under a minute to nine) for two functions that
 * only a process running TensorFlow's Grappler calls, and that process has
 * it loaded already. TF_InitGraph looks them up there (resolve_preserve). */
typedef void (*preserve_size_fn)(const TF_GrapplerItem* item, int* num_values,
                                 size_t* storage_size, TF_Status* status);
typedef void (*preserve_list_fn)(const TF_GrapplerItem* item, char** values,
                                 size_t* lengths, int num_values, void* storage,
                                 size_t storage_size, TF_Status* status);
static preserve_size_fn g_preserve_size; /* set by TF_InitGraph, or NULL */
static preserve_list_fn g_preserve_list;

#define LOG_ENV "SIMDEV_GRAPH_LOG"

static sg_pass_mask g_mask; /* SIMDEV_GRAPH_PASSES, read by TF_InitGraph */
static int g_log;           /* SIMDEV_GRAPH_LOG */

static void set_status(TF_Status* status, const sg_err* err) {
  TF_Code code = TF_INTERNAL;
  switch (err->code) {
    case SG_OK: code = TF_OK; break;
    case SG_EINVAL: code = TF_INVALID_ARGUMENT; break;
    case SG_ENOMEM: code = TF_RESOURCE_EXHAUSTED; break;
    default: code = TF_INTERNAL;
  }
  char msg[320];
  snprintf(msg, sizeof(msg), "simdev graph optimizer: %s", err->msg);
  TF_SetStatus(status, code, code == TF_OK ? "" : msg);
}

/* The item's nodes to preserve, NUL-terminated, in one malloc'd block
 * (*block; free it). 0, or -1 with err set. */
static int preserve_list(const TF_GrapplerItem* item, sg_ctx* ctx, void** block,
                         sg_err* err) {
  *block = NULL;
  ctx->preserve = NULL;
  ctx->npreserve = 0;
  if (g_preserve_size == NULL || g_preserve_list == NULL)
    return sg_fail(err, SG_EINTERNAL,
                   "TF_GetNodesToPreserveList is not in this process (TF's "
                   "libtensorflow_cc.so.2 was not loaded when TF_InitGraph "
                   "ran): the preserve list cannot be read, the graph is "
                   "left alone");
  TF_Status* s = TF_NewStatus();
  int num = 0;
  size_t storage = 0;
  g_preserve_size(item, &num, &storage, s);
  if (TF_GetCode(s) != TF_OK || num < 0) {
    sg_fail(err, SG_EINTERNAL, "TF_GetNodesToPreserveListSize: %s",
            TF_Message(s));
    TF_DeleteStatus(s);
    return -1;
  }
  if (num == 0) {
    TF_DeleteStatus(s);
    return 0;
  }
  /* values, lengths and TF's unterminated bytes, then our copies. */
  size_t n = (size_t)num;
  size_t size = n * (sizeof(char*) * 2 + sizeof(size_t)) + storage * 2 + n;
  char* mem = malloc(size);
  if (mem == NULL) {
    TF_DeleteStatus(s);
    return sg_fail(err, SG_ENOMEM, "out of memory for the preserve list");
  }
  char** values = (char**)mem;
  const char** names = (const char**)(values + n);
  size_t* lengths = (size_t*)(names + n);
  char* raw = (char*)(lengths + n);
  char* copy = raw + storage;
  g_preserve_list(item, values, lengths, num, raw, storage, s);
  if (TF_GetCode(s) != TF_OK) {
    sg_fail(err, SG_EINTERNAL, "TF_GetNodesToPreserveList: %s", TF_Message(s));
    TF_DeleteStatus(s);
    free(mem);
    return -1;
  }
  TF_DeleteStatus(s);
  for (size_t i = 0; i < n; i++) {
    memcpy(copy, values[i], lengths[i]);
    copy[lengths[i]] = '\0';
    names[i] = copy;
    copy += lengths[i] + 1;
  }
  ctx->preserve = names;
  ctx->npreserve = num;
  *block = mem;
  return 0;
}

static void free_output(void* data, size_t length) {
  (void)length;
  free(data);
}

static void optimize(void* state, const TF_Buffer* graph_def,
                     const TF_GrapplerItem* item, TF_Buffer* out,
                     TF_Status* status) {
  (void)state;
  sg_err err = {0};
  if (graph_def == NULL || out == NULL ||
      (graph_def->data == NULL && graph_def->length != 0)) {
    sg_fail(&err, SG_EINVAL, "no input GraphDef or no output buffer");
    set_status(status, &err);
    return;
  }
  /* Parsed even with every pass off: a malformed graph is always an
   * error, reported before the item is asked for the preserve list (a
   * NULL item is an error too, not a crash). */
  sg_graph* g = NULL;
  if (sg_parse(graph_def->data, graph_def->length, &g, &err) != 0) {
    set_status(status, &err);
    return;
  }
  sg_ctx ctx;
  void* block = NULL;
  if (item == NULL) {
    sg_fail(&err, SG_EINVAL, "no TF_GrapplerItem (the preserve list)");
  }
  if (item == NULL || preserve_list(item, &ctx, &block, &err) != 0) {
    sg_free(g);
    set_status(status, &err);
    return;
  }
  uint8_t* bytes = NULL;
  size_t len = 0;
  sg_stats st;
  int rc = sg_optimize_graph(g, &ctx, g_mask, &bytes, &len, &st, &err);
  sg_free(g);
  if (g_log) {
    char passes[160];
    sg_passes_describe(g_mask, passes, sizeof(passes));
    fprintf(stderr,
            "simdev graph optimizer: %d nodes, %d on SIMDEV, passes "
            "%s: %d rewrites, %d preserved%s%s\n",
            st.nodes, st.simdev_nodes, passes, rc < 0 ? 0 : st.rewrites,
            ctx.npreserve, rc < 0 ? ", error: " : "", rc < 0 ? err.msg : "");
  }
  free(block);
  if (rc < 0) {
    set_status(status, &err);
    return;
  }
  if (rc == 0) { /* TF's "did nothing": it keeps its graph */
    TF_SetStatus(status, TF_ABORTED,
                 g_mask ? "simdev graph optimizer: nothing to rewrite"
                        : "simdev graph optimizer: every pass is off");
    return;
  }
  out->data = bytes;
  out->length = len;
  out->data_deallocator = free_output;
  TF_SetStatus(status, TF_OK, "");
}

/* Strict 0/1, as every SIMDEV_* switch (src/device_sim/config.c). */
static int parse_log(sg_err* err) {
  const char* v = getenv(LOG_ENV);
  if (v == NULL) return 0;
  if (strcmp(v, "0") == 0) return 0;
  if (strcmp(v, "1") == 0) return 1;
  return sg_fail(err, SG_EINVAL, "invalid %s=\"%s\": expected 0 or 1", LOG_ENV,
                 v);
}

/* Finds TF_GetNodesToPreserveList[Size] in the process (tfcompat/tfc.h:
 * they live in libtensorflow_cc, which TF's Python package may load
 * privately, so they are never linked). */
static void resolve_preserve(void) {
  __typeof__(g_preserve_size) size_fn = NULL;
  __typeof__(g_preserve_list) list_fn = NULL;
  if (!TFC_FIND(size_fn, TF_GetNodesToPreserveListSize) ||
      !TFC_FIND(list_fn, TF_GetNodesToPreserveList))
    return; /* optimize says so */
  g_preserve_size = size_fn;
  g_preserve_list = list_fn;
}

__attribute__((visibility("default"))) void TF_InitGraph(
    TP_OptimizerRegistrationParams* params, TF_Status* status) {
  sg_err err = {0};
  sg_pass_mask mask;
  int log = parse_log(&err);
  if (log < 0 || sg_passes_from_env(&mask, &err) != 0) {
    set_status(status, &err);
    return;
  }
  g_mask = mask;
  g_log = log;
  resolve_preserve();
  /* Fields at the offsets every grappler.h since API 0.0.1 has; configs
   * keep TF's zero-initialized toggles (Default). */
  params->struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->major_version = GO_MAJOR;
  params->minor_version = GO_MINOR;
  params->patch_version = GO_PATCH;
  params->device_type = "SIMDEV";
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->create_func = NULL; /* no per-optimizer state */
  params->optimizer->optimize_func = optimize;
  params->optimizer->destroy_func = NULL;
  TF_SetStatus(status, TF_OK, "");
}
