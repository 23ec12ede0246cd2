/*
 * gd_attr.c - attributes (AttrValue) and Const values (TensorProto) of
 * sg.h, decoded on demand from the bytes gd.c keeps.
 *
 * AttrValue is a oneof: list=1 s=2 i=3 f=4 b=5 type=6 shape=7 tensor=8
 * placeholder=9 func=10; the LAST oneof field in the bytes is the value (as
 * protobuf parses). ListValue: s=2 i=3 (packed) f=4 b=5 type=6 shape=7
 * tensor=8 func=9. TensorProto: dtype=1 tensor_shape=2 tensor_content=4
 * int_val=7 int64_val=10; TensorShapeProto: dim=2 (size=1) unknown_rank=3.
 * A getter that meets anything it does not expect returns false: the pass
 * then leaves the node alone.
 *
 * Setters write the new AttrValue into the graph's arena and mark the node
 * modified (its other attributes keep their bytes).
 *
 * Thread contract: as sg.h (a graph belongs to one caller).
 */
#include <stdlib.h>
#include <string.h>

#include "graph/sg_internal.h"
#include "pbwire/pbwire.h"

enum {
  AV_LIST = 1,
  AV_S,
  AV_I,
  AV_F,
  AV_B,
  AV_TYPE,
  AV_SHAPE,
  AV_TENSOR,
  AV_PLACEHOLDER,
  AV_FUNC
};
enum { LV_S = 2, LV_I = 3 };
enum {
  TP_DTYPE = 1,
  TP_SHAPE = 2,
  TP_CONTENT = 4,
  TP_INT_VAL = 7,
  TP_INT64_VAL = 10
};
enum { SHAPE_DIM = 2, SHAPE_UNKNOWN_RANK = 3, DIM_SIZE = 1 };
enum { DT_INT32 = 3, DT_INT64 = 9 };

const sg_attr* sg_attr_find(const sg_node* n, const char* name) {
  for (int i = 0; i < n->nattrs; i++) {
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  }
  return NULL;
}

/* The value field of attribute `name`: its last oneof field. */
static bool value_of(const sg_node* n, const char* name, pbw_field* out) {
  const sg_attr* a = sg_attr_find(n, name);
  if (a == NULL) return false;
  pbw_reader r;
  pbw_field f;
  bool found = false;
  pbw_init(&r, a->value, a->len);
  int rc;
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number >= AV_LIST && f.number <= AV_FUNC) {
      *out = f;
      found = true;
    }
  }
  return rc == PBW_END && found;
}

bool sg_attr_type(const sg_node* n, const char* name, int* dtype) {
  pbw_field f;
  if (!value_of(n, name, &f) || f.number != AV_TYPE || f.wire != PBW_VARINT) {
    return false;
  }
  *dtype = pbw_int32(f.u);
  return true;
}

bool sg_attr_int(const sg_node* n, const char* name, int64_t* v) {
  pbw_field f;
  if (!value_of(n, name, &f) || f.number != AV_I || f.wire != PBW_VARINT) {
    return false;
  }
  *v = (int64_t)f.u;
  return true;
}

bool sg_attr_float(const sg_node* n, const char* name, float* v) {
  pbw_field f;
  if (!value_of(n, name, &f) || f.number != AV_F || f.wire != PBW_I32) {
    return false;
  }
  uint32_t bits = (uint32_t)f.u;
  memcpy(v, &bits, sizeof(*v));
  return true;
}

bool sg_attr_bool(const sg_node* n, const char* name, bool* v) {
  pbw_field f;
  if (!value_of(n, name, &f) || f.number != AV_B || f.wire != PBW_VARINT) {
    return false;
  }
  *v = f.u != 0;
  return true;
}

static bool copy_string(const pbw_field* f, char* buf, size_t len) {
  if (f->len >= len) return false;
  memcpy(buf, f->data, f->len);
  buf[f->len] = '\0';
  return true;
}

bool sg_attr_string(const sg_node* n, const char* name, char* buf, size_t len) {
  pbw_field f;
  if (!value_of(n, name, &f) || f.number != AV_S || f.wire != PBW_LEN) {
    return false;
  }
  return copy_string(&f, buf, len);
}

/* Calls fn on each value field `number` of the list attribute `name`
 * (every ListValue occurrence, in order, as protobuf merges them). false
 * if the attribute is missing, not a list, or malformed. */
typedef bool (*list_fn)(const pbw_field* f, void* arg);
static bool each_list_value(const sg_node* n, const char* name, uint32_t number,
                            list_fn fn, void* arg) {
  pbw_field last;
  if (!value_of(n, name, &last) || last.number != AV_LIST ||
      last.wire != PBW_LEN) {
    return false;
  }
  const sg_attr* a = sg_attr_find(n, name);
  pbw_reader r, lr;
  pbw_field f, e;
  pbw_init(&r, a->value, a->len);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number != AV_LIST) continue;
    if (f.wire != PBW_LEN) return false;
    pbw_init_field(&lr, &f);
    int rc;
    while ((rc = pbw_next(&lr, &e)) == PBW_FIELD) {
      if (e.number == number && !fn(&e, arg)) return false;
    }
    if (rc != PBW_END) return false;
  }
  return true;
}

typedef struct ints_arg {
  int64_t* out;
  int max;
  int count;
} ints_arg;

static bool collect_int(const pbw_field* f, void* arg) {
  ints_arg* a = arg;
  const uint8_t* it = NULL;
  uint64_t v;
  int rc;
  while ((rc = pbw_packed_next(f, &it, &v)) == PBW_FIELD) {
    if (a->count < a->max) a->out[a->count] = (int64_t)v;
    if (a->count == INT32_MAX) return false;
    a->count++;
  }
  return rc == PBW_END;
}

bool sg_attr_ints(const sg_node* n, const char* name, int64_t* out, int max,
                  int* count) {
  ints_arg a = {out, max, 0};
  if (!each_list_value(n, name, LV_I, collect_int, &a)) return false;
  *count = a.count;
  return true;
}

typedef struct strings_arg {
  int want;
  char* buf;
  size_t len;
  int count;
  bool ok;
} strings_arg;

static bool collect_string(const pbw_field* f, void* arg) {
  strings_arg* a = arg;
  if (f->wire != PBW_LEN) return false;
  if (a->count == a->want && a->buf != NULL) {
    a->ok = copy_string(f, a->buf, a->len);
  }
  if (a->count == INT32_MAX) return false;
  a->count++;
  return true;
}

bool sg_attr_strings(const sg_node* n, const char* name, int i, char* buf,
                     size_t len, int* count) {
  strings_arg a = {i, buf, len, 0, buf == NULL};
  if (!each_list_value(n, name, LV_S, collect_string, &a)) return false;
  *count = a.count;
  return a.ok;
}

/* ---- setters --------------------------------------------------------------
 */

/* Makes the bytes in b (taken and freed here) the value of attribute
 * `name` of n. */
static int set_value(sg_graph* g, sg_node* n, const char* name, pbw_buf* b,
                     sg_err* err) {
  uint8_t* bytes;
  size_t len;
  if (pbw_buf_take(b, &bytes, &len) != 0) {
    return sg_fail(err, SG_ENOMEM, "out of memory setting attr %s", name);
  }
  uint8_t* v = sgi_alloc(g, len);
  if (v != NULL) memcpy(v, bytes, len);
  free(bytes);
  if (v == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  for (int i = 0; i < n->nattrs; i++) {
    if (strcmp(n->attrs[i].name, name) == 0) {
      n->attrs[i].value = v;
      n->attrs[i].len = len;
      sgi_touch(g, n);
      return 0;
    }
  }
  sgi_node* s = sgi_of(n);
  if (n->nattrs == s->attrs_cap) {
    int cap = s->attrs_cap ? s->attrs_cap * 2 : 4;
    sg_attr* a = sgi_alloc(g, sizeof(sg_attr) * (size_t)cap);
    if (a == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
    if (n->nattrs) memcpy(a, n->attrs, sizeof(sg_attr) * (size_t)n->nattrs);
    n->attrs = a;
    s->attrs_cap = cap;
  }
  const char* key = sgi_strndup(g, name, strlen(name));
  if (key == NULL) return sg_fail(err, SG_ENOMEM, "out of memory");
  n->attrs[n->nattrs++] = (sg_attr){key, v, len};
  sgi_touch(g, n);
  return 0;
}

int sg_set_attr_type(sg_graph* g, sg_node* n, const char* name, int dtype,
                     sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_int(&b, AV_TYPE, dtype);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_int(sg_graph* g, sg_node* n, const char* name, int64_t v,
                    sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_int(&b, AV_I, v);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_float(sg_graph* g, sg_node* n, const char* name, float v,
                      sg_err* err) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof(bits));
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_fixed32(&b, AV_F, bits);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_bool(sg_graph* g, sg_node* n, const char* name, bool v,
                     sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_uint(&b, AV_B, v ? 1 : 0);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_string(sg_graph* g, sg_node* n, const char* name, const char* v,
                       sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_string(&b, AV_S, v);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_ints(sg_graph* g, sg_node* n, const char* name,
                     const int64_t* v, int count, sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  size_t mark = pbw_open(&b);
  pbw_put_packed(&b, LV_I, v, count > 0 ? (size_t)count : 0);
  pbw_close(&b, AV_LIST, mark);
  return set_value(g, n, name, &b, err);
}

int sg_set_attr_strings(sg_graph* g, sg_node* n, const char* name,
                        const char* const* v, int count, sg_err* err) {
  pbw_buf b = PBW_BUF_INIT;
  size_t mark = pbw_open(&b);
  for (int i = 0; i < count; i++) pbw_put_string(&b, LV_S, v[i]);
  pbw_close(&b, AV_LIST, mark);
  return set_value(g, n, name, &b, err);
}

int sg_copy_attr(sg_graph* g, sg_node* dst, const sg_node* src,
                 const char* name, sg_err* err) {
  const sg_attr* a = sg_attr_find(src, name);
  if (a == NULL) return 0;
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_raw(&b, a->value, a->len);
  return set_value(g, dst, name, &b, err);
}

int sg_remove_attr(sg_graph* g, sg_node* n, const char* name, sg_err* err) {
  (void)err;
  for (int i = 0; i < n->nattrs; i++) {
    if (strcmp(n->attrs[i].name, name) == 0) {
      memmove(&n->attrs[i], &n->attrs[i + 1],
              sizeof(sg_attr) * (size_t)(n->nattrs - i - 1));
      n->nattrs--;
      sgi_touch(g, n);
      return 0;
    }
  }
  return 0;
}

/* ---- Const ints -----------------------------------------------------------
 */

/* Elements of a TensorShapeProto: false if unknown rank, a dim < 0, or more
 * than INT32_MAX elements. */
static bool shape_elements(const pbw_field* shape, int64_t* count) {
  pbw_reader r, dr;
  pbw_field f, d;
  int64_t n = 1;
  pbw_init_field(&r, shape);
  int rc;
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number == SHAPE_UNKNOWN_RANK && f.u != 0) return false;
    if (f.number != SHAPE_DIM) continue;
    if (f.wire != PBW_LEN) return false;
    int64_t size = 0;
    pbw_init_field(&dr, &f);
    int drc;
    while ((drc = pbw_next(&dr, &d)) == PBW_FIELD) {
      if (d.number == DIM_SIZE && d.wire == PBW_VARINT) size = (int64_t)d.u;
    }
    if (drc != PBW_END || size < 0) return false;
    if (size != 0 && n > INT32_MAX / size) return false;
    n *= size;
  }
  *count = n;
  return rc == PBW_END;
}

bool sg_const_ints(const sg_node* n, int64_t* out, int max, int* count) {
  int dtype;
  pbw_field t;
  if (strcmp(n->op, "Const") != 0 || !sg_attr_type(n, "dtype", &dtype) ||
      (dtype != DT_INT32 && dtype != DT_INT64) || !value_of(n, "value", &t) ||
      t.number != AV_TENSOR || t.wire != PBW_LEN) {
    return false;
  }
  pbw_reader r;
  pbw_field f, content = {0}, shape = {0};
  bool has_content = false, has_shape = false;
  int64_t nvals = 0, last = 0;
  pbw_init_field(&r, &t);
  int rc;
  /* First pass: dtype, shape, content, and the count of *_val values. */
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number == TP_DTYPE && pbw_int32(f.u) != dtype) return false;
    if (f.number == TP_SHAPE && f.wire == PBW_LEN) {
      shape = f;
      has_shape = true;
    } else if (f.number == TP_CONTENT && f.wire == PBW_LEN) {
      content = f;
      has_content = true;
    } else if (f.number == (dtype == DT_INT32 ? TP_INT_VAL : TP_INT64_VAL)) {
      const uint8_t* it = NULL;
      uint64_t v;
      int prc;
      while ((prc = pbw_packed_next(&f, &it, &v)) == PBW_FIELD) {
        last = dtype == DT_INT32 ? pbw_int32(v) : (int64_t)v;
        nvals++;
      }
      if (prc != PBW_END) return false;
    }
  }
  if (rc != PBW_END) return false;
  int64_t elems = 1;
  if (has_shape && !shape_elements(&shape, &elems)) return false;
  size_t esize = dtype == DT_INT32 ? 4 : 8;
  if (has_content) {
    if (content.len != (size_t)elems * esize) return false;
    for (int64_t i = 0; i < elems && i < max; i++) {
      uint64_t u = 0;
      for (size_t b = 0; b < esize; b++) {
        u |= (uint64_t)content.data[(size_t)i * esize + b] << (8 * b);
      }
      out[i] = dtype == DT_INT32 ? pbw_int32(u) : (int64_t)u;
    }
    *count = (int)elems;
    return true;
  }
  /* *_val: fewer values than elements repeat the last one (TF's rule for
   * Const); none means zeros; more than elements is malformed. */
  if (nvals > elems) return false;
  int64_t i = 0;
  pbw_init_field(&r, &t);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number != (dtype == DT_INT32 ? TP_INT_VAL : TP_INT64_VAL)) continue;
    const uint8_t* it = NULL;
    uint64_t v;
    while (pbw_packed_next(&f, &it, &v) == PBW_FIELD) {
      if (i < max) out[i] = dtype == DT_INT32 ? pbw_int32(v) : (int64_t)v;
      i++;
    }
  }
  for (; i < elems && i < max; i++) out[i] = last;
  *count = (int)elems;
  return true;
}
