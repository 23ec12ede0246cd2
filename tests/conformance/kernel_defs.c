/*
 * kernel_defs.c - decoding TF's serialized KernelList and OpList
 * (kernel_defs.h) with the wire reader of pbwire.h.
 *
 * Repeated fields are counted in a first pass over a message, then filled
 * in a second, so every array is allocated once, at its size.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include "kernel_defs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Protobuf field numbers of the messages TF's C API returns. */

/* tensorflow/core/framework/kernel_def.proto */
enum {
  KERNELLIST_KERNEL = 1,         /* KernelList.kernel: KernelDef */
  KERNELDEF_OP = 1,              /* string */
  KERNELDEF_DEVICE_TYPE = 2,     /* string */
  KERNELDEF_CONSTRAINT = 3,      /* AttrConstraint */
  KERNELDEF_HOST_MEMORY_ARG = 4, /* string */
  KERNELDEF_LABEL = 5,           /* string */
  KERNELDEF_PRIORITY = 6,        /* int32 */
  CONSTRAINT_NAME = 1,           /* AttrConstraint.name: string */
  CONSTRAINT_ALLOWED = 2,        /* AttrConstraint.allowed_values: AttrValue */
};

/* tensorflow/core/framework/op_def.proto */
enum {
  OPLIST_OP = 1,           /* OpList.op: OpDef */
  OPDEF_NAME = 1,          /* string */
  OPDEF_INPUT_ARG = 2,     /* ArgDef */
  OPDEF_OUTPUT_ARG = 3,    /* ArgDef */
  OPDEF_ATTR = 4,          /* AttrDef */
  ARGDEF_NAME = 1,         /* string */
  ATTRDEF_NAME = 1,        /* string */
  ATTRDEF_TYPE = 2,        /* string: "type", "list(type)", "int", ... */
  ATTRDEF_HAS_MINIMUM = 5, /* bool */
  ATTRDEF_MINIMUM = 6,     /* int64 */
  ATTRDEF_ALLOWED = 7,     /* AttrValue */
};

/* tensorflow/core/framework/attr_value.proto */
enum {
  ATTRVALUE_LIST = 1, /* AttrValue.list: ListValue */
  LIST_S = 2,         /* repeated bytes */
  LIST_I = 3,         /* repeated int64, packed */
  LIST_B = 5,         /* repeated bool, packed */
  LIST_TYPE = 6,      /* repeated DataType, packed */
};

/* ------------------------------------------------------------ arena */

typedef struct kd_chunk {
  struct kd_chunk* next;
  size_t used, cap;
} kd_chunk;

#define KD_ALIGN 16
#define KD_HEADER ((sizeof(kd_chunk) + KD_ALIGN - 1) & ~(size_t)(KD_ALIGN - 1))
#define KD_CHUNK (1u << 20)

void* kd_alloc(kd_arena* a, size_t n, size_t size) {
  if (n == 0) return NULL;
  /* Counts are bounded by the sizes of buffers in memory: this cannot
   * overflow unless something else is broken. */
  if (n > SIZE_MAX / size / 2) {
    fprintf(stderr, "%s:%d: %zu elements of %zu bytes\n", __FILE__, __LINE__, n,
            size);
    abort();
  }
  size_t bytes = (n * size + KD_ALIGN - 1) & ~(size_t)(KD_ALIGN - 1);
  if (a->head == NULL || a->head->cap - a->head->used < bytes) {
    size_t cap = bytes > KD_CHUNK ? bytes : KD_CHUNK;
    kd_chunk* c = malloc(KD_HEADER + cap);
    if (c == NULL) {
      fprintf(stderr, "%s:%d: out of memory (%zu bytes)\n", __FILE__, __LINE__,
              KD_HEADER + cap);
      abort();
    }
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  char* p = (char*)a->head + KD_HEADER + a->head->used;
  a->head->used += bytes;
  memset(p, 0, bytes);
  return p;
}

void kd_arena_free(kd_arena* a) {
  while (a->head != NULL) {
    kd_chunk* next = a->head->next;
    free(a->head);
    a->head = next;
  }
}

/* ------------------------------------------------------------ decoding
 * Protobuf semantics: a singular field seen twice keeps the last value,
 * repeated ones accumulate, and a known field number with an unexpected
 * wire type is an unknown field (skipped). Each repeated field is counted
 * in a first pass, then filled. */

static char decode_err[256];

static int bad(const pbw_reader* r, const char* what) {
  snprintf(decode_err, sizeof(decode_err), "%s: %s at byte %zu", what,
           r->err ? r->err : "malformed", r->err_at);
  return -1;
}

static kd_str str_of(const pbw_field* f) {
  return (kd_str){(const char*)f->data, f->len};
}

int kd_str_eq(kd_str a, kd_str b) {
  return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

int kd_str_eq_c(kd_str a, const char* b) {
  return kd_str_eq(a, (kd_str){b, strlen(b)});
}

int kd_str_cmp(kd_str a, kd_str b) {
  size_t n = a.n < b.n ? a.n : b.n;
  int c = n ? memcmp(a.p, b.p, n) : 0;
  if (c != 0) return c;
  return a.n < b.n ? -1 : a.n > b.n;
}

/* Visits the values of an AttrValue's list (the only part KernelAttrsMatch
 * reads, and the one OpDef's allowed_values uses). With out == NULL it only
 * counts them into *n; else it fills out[*n...]. */
static int list_values(const pbw_field* attr_value, kd_val* out, size_t* n) {
  pbw_reader r, lr;
  pbw_field f, lf;
  int rc;
  pbw_init_field(&r, attr_value);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number != ATTRVALUE_LIST || f.wire != PBW_LEN) continue;
    pbw_init_field(&lr, &f);
    while ((rc = pbw_next(&lr, &lf)) == PBW_FIELD) {
      kd_kind kind;
      if (lf.number == LIST_S && lf.wire == PBW_LEN) {
        if (out != NULL) out[*n] = (kd_val){KD_S, 0, str_of(&lf)};
        (*n)++;
        continue;
      }
      if (lf.number == LIST_I) {
        kind = KD_I;
      } else if (lf.number == LIST_B) {
        kind = KD_B;
      } else if (lf.number == LIST_TYPE) {
        kind = KD_TYPE;
      } else {
        continue;
      }
      if (lf.wire != PBW_VARINT && lf.wire != PBW_LEN) continue;
      const uint8_t* it = NULL;
      uint64_t u;
      int vr;
      while ((vr = pbw_packed_next(&lf, &it, &u)) == PBW_FIELD) {
        if (out != NULL) {
          int64_t v = kind == KD_B      ? (u != 0)
                      : kind == KD_TYPE ? pbw_int32(u)
                                        : (int64_t)u;
          out[*n] = (kd_val){kind, v, {NULL, 0}};
        }
        (*n)++;
      }
      if (vr == PBW_ERROR) {
        snprintf(decode_err, sizeof(decode_err),
                 "AttrValue.list: malformed packed values");
        return -1;
      }
    }
    if (rc == PBW_ERROR) return bad(&lr, "AttrValue.list");
  }
  return rc == PBW_ERROR ? bad(&r, "AttrValue") : 0;
}

/* The first pass over a message: how many values its AttrValue field
 * `number` lists (a second pass fills them in, into memory sized by this). */
static int count_allowed(const pbw_field* msg, int number, const char* what,
                         size_t* n) {
  pbw_reader r;
  pbw_field f;
  int rc;
  pbw_init_field(&r, msg);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if ((int)f.number == number && f.wire == PBW_LEN &&
        list_values(&f, NULL, n) != 0) {
      return -1;
    }
  }
  return rc == PBW_ERROR ? bad(&r, what) : 0;
}

static int decode_constraint(kd_arena* a, const pbw_field* msg,
                             kd_constraint* c) {
  size_t n = 0;
  if (count_allowed(msg, CONSTRAINT_ALLOWED, "KernelDef.AttrConstraint",
                    &n) != 0) {
    return -1;
  }
  c->v = kd_alloc(a, n, sizeof(*c->v));
  pbw_reader r;
  pbw_field f;
  pbw_init_field(&r, msg);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.wire != PBW_LEN) continue;
    if (f.number == CONSTRAINT_NAME) c->name = str_of(&f);
    if (f.number == CONSTRAINT_ALLOWED) list_values(&f, c->v, &c->nv);
  }
  for (size_t i = 0; i < c->nv; i++) c->kinds |= 1u << c->v[i].kind;
  return 0;
}

int kd_decode_kernel(kd_arena* a, const pbw_field* msg, kd_kernel* k) {
  pbw_reader r;
  pbw_field f;
  int rc;
  size_t nc = 0, nhm = 0;
  k->src = *msg;
  pbw_init_field(&r, msg);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.wire != PBW_LEN) continue;
    nc += f.number == KERNELDEF_CONSTRAINT;
    nhm += f.number == KERNELDEF_HOST_MEMORY_ARG;
  }
  if (rc == PBW_ERROR) return bad(&r, "KernelDef");
  k->c = kd_alloc(a, nc, sizeof(*k->c));
  k->hm = kd_alloc(a, nhm, sizeof(*k->hm));
  pbw_init_field(&r, msg);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number == KERNELDEF_PRIORITY && f.wire == PBW_VARINT) {
      k->priority = pbw_int32(f.u);
    }
    if (f.wire != PBW_LEN) continue;
    switch (f.number) {
      case KERNELDEF_OP: k->op = str_of(&f); break;
      case KERNELDEF_DEVICE_TYPE: k->device = str_of(&f); break;
      case KERNELDEF_LABEL: k->label = str_of(&f); break;
      case KERNELDEF_HOST_MEMORY_ARG: k->hm[k->nhm++] = str_of(&f); break;
      case KERNELDEF_CONSTRAINT:
        if (decode_constraint(a, &f, &k->c[k->nc++]) != 0) return -1;
        break;
      default: break;
    }
  }
  return 0;
}

static int decode_attr(kd_arena* a, const pbw_field* msg, kd_attr* at) {
  size_t n = 0;
  if (count_allowed(msg, ATTRDEF_ALLOWED, "OpDef.AttrDef", &n) != 0) {
    return -1;
  }
  pbw_reader r;
  pbw_field f;
  kd_val* v = kd_alloc(a, n, sizeof(*v));
  size_t nv = 0;
  pbw_init_field(&r, msg);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number == ATTRDEF_NAME && f.wire == PBW_LEN) at->name = str_of(&f);
    if (f.number == ATTRDEF_TYPE && f.wire == PBW_LEN) at->type = str_of(&f);
    if (f.number == ATTRDEF_HAS_MINIMUM && f.wire == PBW_VARINT) {
      at->has_minimum = f.u != 0;
    }
    if (f.number == ATTRDEF_MINIMUM && f.wire == PBW_VARINT) {
      at->minimum = (int64_t)f.u;
    }
    if (f.number == ATTRDEF_ALLOWED && f.wire == PBW_LEN) {
      list_values(&f, v, &nv);
    }
  }
  /* Only the allowed types matter here (type constraints). */
  at->allowed = kd_alloc(a, nv, sizeof(*at->allowed));
  for (size_t i = 0; i < nv; i++) {
    if (v[i].kind == KD_TYPE) at->allowed[at->nallowed++] = v[i].i;
  }
  return 0;
}

/* An ArgDef's name. */
static int decode_arg(const pbw_field* msg, kd_str* name) {
  pbw_reader r;
  pbw_field f;
  int rc;
  pbw_init_field(&r, msg);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.number == ARGDEF_NAME && f.wire == PBW_LEN) *name = str_of(&f);
  }
  return rc == PBW_ERROR ? bad(&r, "OpDef.ArgDef") : 0;
}

int kd_decode_op(kd_arena* a, const pbw_field* msg, kd_op* op) {
  pbw_reader r;
  pbw_field f;
  int rc;
  size_t nin = 0, nout = 0, nattr = 0;
  pbw_init_field(&r, msg);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    if (f.wire != PBW_LEN) continue;
    nin += f.number == OPDEF_INPUT_ARG;
    nout += f.number == OPDEF_OUTPUT_ARG;
    nattr += f.number == OPDEF_ATTR;
  }
  if (rc == PBW_ERROR) return bad(&r, "OpDef");
  op->in = kd_alloc(a, nin, sizeof(*op->in));
  op->out = kd_alloc(a, nout, sizeof(*op->out));
  op->attr = kd_alloc(a, nattr, sizeof(*op->attr));
  pbw_init_field(&r, msg);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.wire != PBW_LEN) continue;
    int err = 0;
    switch (f.number) {
      case OPDEF_NAME: op->name = str_of(&f); break;
      case OPDEF_INPUT_ARG: err = decode_arg(&f, &op->in[op->nin++]); break;
      case OPDEF_OUTPUT_ARG: err = decode_arg(&f, &op->out[op->nout++]); break;
      case OPDEF_ATTR: err = decode_attr(a, &f, &op->attr[op->nattr++]); break;
      default: break;
    }
    if (err != 0) return -1;
  }
  return 0;
}

/* The top-level entries (field `number`, length-delimited) of a list
 * message: KernelList.kernel or OpList.op. */
static int list_entries(kd_arena* a, const void* data, size_t len,
                        uint32_t number, const char* what, kd_entries* out) {
  pbw_reader r;
  pbw_field f;
  int rc;
  size_t n = 0;
  pbw_init(&r, data, len);
  while ((rc = pbw_next(&r, &f)) == PBW_FIELD) {
    n += f.number == number && f.wire == PBW_LEN;
  }
  if (rc == PBW_ERROR) return bad(&r, what);
  out->e = kd_alloc(a, n, sizeof(*out->e));
  out->n = 0;
  pbw_init(&r, data, len);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number == number && f.wire == PBW_LEN) out->e[out->n++] = f;
  }
  return 0;
}

int kd_kernel_list(kd_arena* a, const void* data, size_t len, kd_entries* out) {
  return list_entries(a, data, len, KERNELLIST_KERNEL, "KernelList", out);
}

int kd_op_list(kd_arena* a, const void* data, size_t len, kd_entries* out) {
  return list_entries(a, data, len, OPLIST_OP, "OpList", out);
}

const char* kd_error(void) {
  return decode_err;
}
