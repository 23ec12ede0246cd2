/*
 * tool.c - simdev_graph_opt: simdev's graph optimizer on a GraphDef file,
 * without TensorFlow. Installed with the plugin (site-packages/simdev/bin/).
 *
 *   simdev_graph_opt [--preserve NAME]... IN.pb OUT.pb
 *
 * Reads a binary GraphDef (e.g. graphutil's post-optimization graph,
 * SerializeToString()), runs the passes SIMDEV_GRAPH_PASSES enables
 * (passes.h; default all) exactly as TF_InitGraph's optimize_func does
 * (sg_optimize), with NAME... as TF's nodes-to-preserve list, and writes
 * the result to OUT.pb: the rewritten graph, or IN's bytes unchanged when
 * no pass rewrote anything. One JSON line on stdout:
 *   {"nodes": N, "simdev_nodes": M, "passes": "a,b", "rewrites": K}
 * Feeding OUT.pb back must give rewrites 0 and identical bytes (every pass
 * is idempotent; tests rely on this).
 *
 * Exit status: 0 done; 1 the input is malformed, unreadable, or a pass
 * failed (message on stderr, OUT.pb not written); 2 usage or a bad
 * SIMDEV_GRAPH_PASSES.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

static int usage(void) {
  fprintf(stderr,
          "usage: simdev_graph_opt [--preserve NAME]... IN.pb OUT.pb\n"
          "  runs the passes %s enables (default all) on the binary GraphDef\n"
          "  IN.pb and writes the result to OUT.pb (IN's bytes if nothing "
          "changed)\n",
          SG_PASSES_ENV);
  return 2;
}

/* The whole file, malloc'd; NULL with a message on failure. */
static uint8_t* slurp(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t* buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t* more = realloc(buf, cap * 2);
    if (more == NULL) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = more;
    cap *= 2;
  }
  int bad = ferror(f) || buf == NULL;
  fclose(f);
  if (bad) {
    fprintf(stderr, "%s: read error or out of memory\n", path);
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

static int spill(const char* path, const uint8_t* data, size_t len) {
  FILE* f = fopen(path, "wb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t w = len ? fwrite(data, 1, len, f) : 0;
  if (fclose(f) != 0 || w != len) {
    fprintf(stderr, "%s: write error\n", path);
    return -1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char** preserve = calloc((size_t)argc, sizeof(char*));
  const char* files[2];
  int npreserve = 0, nfiles = 0;
  if (preserve == NULL) return 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--preserve") == 0 && i + 1 < argc) {
      preserve[npreserve++] = argv[++i];
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      free(preserve);
      usage();
      return 0;
    } else if (argv[i][0] == '-' || nfiles == 2) {
      free(preserve);
      return usage();
    } else {
      files[nfiles++] = argv[i];
    }
  }
  if (nfiles != 2) {
    free(preserve);
    return usage();
  }
  sg_err err = {0};
  sg_pass_mask mask;
  if (sg_passes_from_env(&mask, &err) != 0) {
    fprintf(stderr, "simdev_graph_opt: %s\n", err.msg);
    free(preserve);
    return 2;
  }
  size_t len = 0;
  uint8_t* in = slurp(files[0], &len);
  if (in == NULL) {
    free(preserve);
    return 1;
  }
  sg_ctx ctx = {preserve, npreserve};
  uint8_t* out = NULL;
  size_t out_len = 0;
  sg_stats st = {0, 0, 0};
  int rc = sg_optimize(in, len, &ctx, mask, &out, &out_len, &st, &err);
  int status = 0;
  if (rc < 0) {
    fprintf(stderr, "simdev_graph_opt: %s: %s\n", files[0], err.msg);
    status = 1;
  } else if (spill(files[1], rc ? out : in, rc ? out_len : len) != 0) {
    status = 1;
  } else {
    char passes[256];
    sg_passes_describe(mask, passes, sizeof(passes));
    printf(
        "{\"nodes\": %d, \"simdev_nodes\": %d, \"passes\": \"%s\", "
        "\"rewrites\": %d}\n",
        st.nodes, st.simdev_nodes, passes, st.rewrites);
  }
  free(out);
  free(in);
  free(preserve);
  return status;
}
