/*
 * sg_internal.h - what the files of the graph model share (gd.c defines,
 * gd_attr.c uses; gd.c never calls gd_attr.c). Passes use sg.h only.
 */
#ifndef SIMDEV_GRAPH_SG_INTERNAL_H_
#define SIMDEV_GRAPH_SG_INTERNAL_H_

#include "graph/sg.h"

/* A node as gd.c keeps it: the public part first (sg_node* <-> sgi_node*). */
typedef struct sgi_node {
  sg_node pub;
  /* The whole GraphDef field (tag + length + NodeDef) as it arrived: an
   * untouched node is written back as exactly these bytes. */
  const uint8_t* field;
  size_t field_len;
  int inputs_cap; /* capacity of pub.inputs / pub.attrs (arena arrays) */
  int attrs_cap;
} sgi_node;

static inline sgi_node* sgi_of(sg_node* n) {
  return (sgi_node*)n;
}

/* ---- gd.c --------------------------------------------------------------- */
/* Graph-lifetime memory (freed by sg_free), max_align_t aligned; NULL when
 * out of memory. */
void* sgi_alloc(sg_graph* g, size_t size);
/* A NUL-terminated copy of [s, s + len) in g's arena. */
char* sgi_strndup(sg_graph* g, const char* s, size_t len);
/* Marks n modified and drops the cached consumer index. */
void sgi_touch(sg_graph* g, sg_node* n);

#endif /* SIMDEV_GRAPH_SG_INTERNAL_H_ */
