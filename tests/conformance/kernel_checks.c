/*
 * kernel_checks.c - checks of what a plugin's TF_InitKernel registers.
 *
 * TF's plugin loader (pluggable_device_plugin_init.cc,
 * RegisterPluggableDevicePlugin) calls SE_InitPlugin, then TF_InitKernel;
 * the test's process has registered the platform already (conf_setup), so
 * the order is TF's. The test loads libtensorflow_cc.so.2 (its static
 * initializers register TF's ops and CPU kernels), takes the kernel registry
 * through TF's C API (TF_GetAllRegisteredKernels: a serialized KernelList),
 * calls the plugin's TF_InitKernel, takes it again: what was added is what
 * the plugin registered. Each of those kernels is checked against the op
 * registry after TF_InitKernel (TF_GetAllOpList: a serialized OpList, so
 * ops the plugin registers itself count) and against the kernels registered
 * before it, the way TF 2.21 uses them when it places and creates ops
 * (op_kernel.cc, kernel_def_util.cc, memory_types.cc).
 *
 * The messages are decoded by kernel_defs.h (on pbwire.h); nothing is
 * linked from TF. Decoded strings point into TF's buffers, which live until
 * the end of the test. A new kernel's `mark` is set when it is byte for
 * byte one registered before TF_InitKernel.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "kernel_defs.h"
#include "tensorflow/c/tf_buffer.h"
#include "tensorflow/c/tf_datatype.h"

#define KERNEL_RULES(X)                                                        \
  X(R_OP_EXISTS, "kernels.op_exists", RECOMMENDED, "TF_RegisterKernelBuilder", \
    "Every kernel is for an op in TF's op registry (TF's own or one the "      \
    "plugin registers): TF 2.21 accepts any op name and looks kernels up "     \
    "only for nodes of registered ops (op_kernel.cc, "                         \
    "FindKernelRegistration), so a kernel for an unknown op is silently "      \
    "never used (ValidateKernelRegistrations, which would warn, runs on the "  \
    "op registry's first use, before plugins load).")                          \
  X(R_DEVICE_TYPE, "kernels.device_type", RECOMMENDED, "TF_NewKernelBuilder",  \
    "Every kernel is for the plugin's own device type (SP_Platform.type): a "  \
    "kernel for another type (CPU, GPU, DEFAULT) runs the plugin's code on "   \
    "devices it does not own; one that matches the same nodes as TF's own "    \
    "kernel at the same priority also breaks those nodes "                     \
    "(kernels.no_duplicates).")                                                \
  X(R_CONSTRAINT_VALUES, "kernels.constraint_values", REQUIRED,                \
    "TF_KernelBuilder_TypeConstraint",                                         \
    "Each attr constraint lists at least one allowed value, all of one kind "  \
    "(types, strings, ints or bools): TF 2.21's KernelAttrsMatch "             \
    "(kernel_def_util.cc) returns Unimplemented for an empty constraint and "  \
    "InvalidArgument for mixed kinds, which fails every node of the op on "    \
    "that device type and its placement on any device "                        \
    "(SupportedDeviceTypesForNode).")                                          \
  X(R_CONSTRAINT_ATTR, "kernels.constraint_attr_exists", REQUIRED,             \
    "TF_KernelBuilder_TypeConstraint",                                         \
    "Each constrained attr is an attr of the op, of the kind the constraint "  \
    "lists (\"type\" or \"list(type)\" for a type constraint): otherwise TF "  \
    "2.21's KernelAttrsMatch (kernel_def_util.cc) returns InvalidArgument "    \
    "(\"has constraint on attr ... not in NodeDef\") for every node of the "   \
    "op, so FindKernelRegistration fails the op on that device type and "      \
    "SupportedDeviceTypesForNode fails its placement on every device.")        \
  X(R_TYPES_ALLOWED, "kernels.constraint_types_allowed", RECOMMENDED,          \
    "TF_KernelBuilder_TypeConstraint",                                         \
    "The types a kernel allows for an attr are among those the op allows "     \
    "(OpDef allowed_values): TF 2.21 validates a node against its OpDef "      \
    "(ValidateNodeDef) before it looks for a kernel, so a type outside the "   \
    "op's list never reaches the kernel and the registration is dead "         \
    "weight.")                                                                 \
  X(R_HOST_MEMORY, "kernels.host_memory_arg_exists", REQUIRED,                 \
    "TF_KernelBuilder_HostMemory",                                             \
    "Each host-memory argument names an input or output argument of the "      \
    "op: TF 2.21's MemoryTypesForNode (memory_types.cc) returns "              \
    "InvalidArgument \"HostMemory args ... not found in OpDef\" for every "    \
    "node that uses the kernel, so CreateOpKernel fails the op; and if the "   \
    "op registry is first used after the plugin loaded, "                      \
    "ValidateKernelRegistrations' error aborts the process (op.cc).")          \
  X(R_NO_DUP, "kernels.no_duplicates", REQUIRED, "TF_RegisterKernelBuilder",   \
    "No two kernels with the same op, device type, label and priority "        \
    "accept a common node, among the plugin's kernels and against those "      \
    "registered before TF_InitKernel (TF's own): TF 2.21's "                   \
    "FindKernelRegistration (op_kernel.cc) fails such a node with "            \
    "InvalidArgument \"Multiple OpKernel registrations match NodeDef at the "  \
    "same priority\" (for DEFAULT kernels, \"Multiple Default OpKernel "       \
    "registrations\", whatever their priorities).")
CONF_RULES(conf_kernel_rules, KERNEL_RULES)

/* ------------------------------------------------------------ ordering */

static int cmp_bytes(const void* x, const void* y) {
  const pbw_field* a = x;
  const pbw_field* b = y;
  if (a->len != b->len) return a->len < b->len ? -1 : 1;
  return a->len ? memcmp(a->data, b->data, a->len) : 0;
}

/* Kernels TF finds under one registry key: op, device type, label. */
static int cmp_key(const kd_kernel* a, const kd_kernel* b) {
  int c = kd_str_cmp(a->op, b->op);
  if (c == 0) c = kd_str_cmp(a->device, b->device);
  if (c == 0) c = kd_str_cmp(a->label, b->label);
  return c;
}

static int cmp_kernel(const void* x, const void* y) {
  const kd_kernel* a = x;
  const kd_kernel* b = y;
  int c = cmp_key(a, b);
  if (c == 0 && a->priority != b->priority) {
    c = a->priority < b->priority ? -1 : 1;
  }
  return c;
}

static int cmp_op(const void* x, const void* y) {
  return kd_str_cmp(((const kd_op*)x)->name, ((const kd_op*)y)->name);
}

static const kd_op* find_op(const kd_op* ops, size_t n, kd_str name) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = kd_str_cmp(ops[mid].name, name);
    if (c == 0) return &ops[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* The first of the sorted kernels with k's key (or n). */
static size_t key_lower_bound(const kd_kernel* ks, size_t n,
                              const kd_kernel* k) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cmp_key(&ks[mid], k) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static const kd_attr* find_attr(const kd_op* op, kd_str name) {
  for (size_t i = 0; i < op->nattr; i++) {
    if (kd_str_eq(op->attr[i].name, name)) return &op->attr[i];
  }
  return NULL;
}

static int has_name(const kd_str* names, size_t n, kd_str name) {
  for (size_t i = 0; i < n; i++) {
    if (kd_str_eq(names[i], name)) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------ text */

typedef struct kc_text {
  char s[320];
  size_t n;
} kc_text;

static void add(kc_text* t, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add(kc_text* t, const char* fmt, ...) {
  if (t->n >= sizeof(t->s) - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(t->s + t->n, sizeof(t->s) - t->n, fmt, ap);
  va_end(ap);
  if (w > 0) t->n += (size_t)w;
  if (t->n >= sizeof(t->s)) t->n = sizeof(t->s) - 1;
}

/* TF's names of its DataTypes (DataTypeString), by tf_datatype.h's values
 * (the same as types.proto's). */
static const char* const dtype_names[] = {
    [TF_FLOAT] = "float",
    [TF_DOUBLE] = "double",
    [TF_INT32] = "int32",
    [TF_UINT8] = "uint8",
    [TF_INT16] = "int16",
    [TF_INT8] = "int8",
    [TF_STRING] = "string",
    [TF_COMPLEX64] = "complex64",
    [TF_INT64] = "int64",
    [TF_BOOL] = "bool",
    [TF_QINT8] = "qint8",
    [TF_QUINT8] = "quint8",
    [TF_QINT32] = "qint32",
    [TF_BFLOAT16] = "bfloat16",
    [TF_QINT16] = "qint16",
    [TF_QUINT16] = "quint16",
    [TF_UINT16] = "uint16",
    [TF_COMPLEX128] = "complex128",
    [TF_HALF] = "half",
    [TF_RESOURCE] = "resource",
    [TF_VARIANT] = "variant",
    [TF_UINT32] = "uint32",
    [TF_UINT64] = "uint64",
    [TF_FLOAT8_E5M2] = "float8_e5m2",
    [TF_FLOAT8_E4M3FN] = "float8_e4m3fn",
    [TF_INT4] = "int4",
    [TF_UINT4] = "uint4",
    /* types.proto's values of the types later releases added to
     * tf_datatype.h (FNUZ float8 in 2.19, int2/uint2 in 2.20, float4 in
     * 2.21): by number, so a harness built against an older release still
     * names what a newer registry holds. */
    [26] = "float8_e4m3fnuz",
    [27] = "float8_e4m3b11fnuz",
    [28] = "float8_e5m2fnuz",
    [31] = "int2",
    [32] = "uint2",
    [33] = "float4_e2m1fn",
};
#define N_DTYPES (int64_t)(sizeof(dtype_names) / sizeof(dtype_names[0]))

static void add_dtype(kc_text* t, int64_t v) {
  /* Reference types are their base type + 100 (types.proto). */
  int64_t base = v > 100 ? v - 100 : v;
  if (base > 0 && base < N_DTYPES && dtype_names[base] != NULL) {
    add(t, "%s%s", dtype_names[base], v > 100 ? "_ref" : "");
  } else {
    add(t, "DataType %lld", (long long)v);
  }
}

static void add_value(kc_text* t, const kd_val* v) {
  switch (v->kind) {
    case KD_TYPE: add_dtype(t, v->i); break;
    case KD_S: add(t, "'%.*s'", KD_STR(v->s)); break;
    case KD_I: add(t, "%lld", (long long)v->i); break;
    default: add(t, "%s", v->i ? "true" : "false"); break;
  }
}

static void add_names(kc_text* t, const kd_str* names, size_t n) {
  if (n == 0) add(t, "none");
  for (size_t i = 0; i < n; i++)
    add(t, "%s%.*s", i ? ", " : "", KD_STR(names[i]));
}

static void add_attr_names(kc_text* t, const kd_op* op) {
  if (op->nattr == 0) add(t, "none");
  for (size_t i = 0; i < op->nattr; i++) {
    add(t, "%s%.*s", i ? ", " : "", KD_STR(op->attr[i].name));
  }
}

/* "'MatMul' on SIMDEV {T: float, half}" with label and priority if set. */
static void add_kernel(kc_text* t, const kd_kernel* k) {
  add(t, "'%.*s' on %.*s", KD_STR(k->op), KD_STR(k->device));
  if (k->label.n > 0) add(t, " label '%.*s'", KD_STR(k->label));
  if (k->priority != 0) add(t, " priority %d", (int)k->priority);
  if (k->nc > 0) add(t, " {");
  for (size_t i = 0; i < k->nc; i++) {
    add(t, "%s%.*s:", i ? "; " : "", KD_STR(k->c[i].name));
    for (size_t j = 0; j < k->c[i].nv; j++) {
      add(t, "%s", j ? ", " : " ");
      add_value(t, &k->c[i].v[j]);
    }
  }
  if (k->nc > 0) add(t, "}");
}

/* ------------------------------------------------------------ checks */

static int one_kind(const kd_constraint* c) {
  return c->kinds != 0 && (c->kinds & (c->kinds - 1)) == 0;
}

static kd_kind kind_of(const kd_constraint* c) {
  kd_kind k = KD_TYPE;
  while (!(c->kinds & (1u << k))) k++;
  return k;
}

static const char* const kind_names[KD_KINDS] = {"types", "strings", "ints",
                                                 "bools"};

/* Whether an attr of OpDef type `type` can hold a value the constraint's
 * kind compares against, as KernelAttrsMatch requires. */
static int kind_fits(kd_kind kind, kd_str type) {
  switch (kind) {
    case KD_TYPE:
      return kd_str_eq_c(type, "type") || kd_str_eq_c(type, "list(type)");
    case KD_S: return kd_str_eq_c(type, "string");
    case KD_I: return kd_str_eq_c(type, "int");
    default: return kd_str_eq_c(type, "bool");
  }
}

static int allowed_type(const kd_attr* at, int64_t t) {
  for (size_t i = 0; i < at->nallowed; i++) {
    if (at->allowed[i] == t) return 1;
  }
  return 0;
}

static void check_constraints(const kd_kernel* k, const kd_op* op) {
  for (size_t i = 0; i < k->nc; i++) {
    const kd_constraint* c = &k->c[i];
    kc_text d = {.n = 0};
    add_kernel(&d, k);
    /* Two places, so that both cases show when both occur. */
    if (c->nv == 0) {
      EXPECT(R_CONSTRAINT_VALUES, 0,
             "kernel for %s: the constraint on attr '%.*s' lists no type, "
             "string, int or bool value",
             d.s, KD_STR(c->name));
      continue;
    }
    if (!EXPECT(R_CONSTRAINT_VALUES, one_kind(c),
                "kernel for %s: the constraint on attr '%.*s' lists values "
                "of more than one kind",
                d.s, KD_STR(c->name))) {
      continue;
    }
    if (op == NULL) continue;
    kd_kind kind = kind_of(c);
    const kd_attr* at = find_attr(op, c->name);
    if (at == NULL) {
      kc_text names = {.n = 0};
      add_attr_names(&names, op);
      EXPECT(R_CONSTRAINT_ATTR, 0,
             "kernel for '%.*s' constrains attr '%.*s', which %.*s does not "
             "have (attrs: %s)",
             KD_STR(k->op), KD_STR(c->name), KD_STR(k->op), names.s);
      continue;
    }
    if (!EXPECT(R_CONSTRAINT_ATTR, kind_fits(kind, at->type),
                "kernel for '%.*s' constrains attr '%.*s' to %s, but "
                "%.*s's '%.*s' is of type '%.*s'",
                KD_STR(k->op), KD_STR(c->name), kind_names[kind], KD_STR(k->op),
                KD_STR(c->name), KD_STR(at->type))) {
      continue;
    }
    if (kind != KD_TYPE || at->nallowed == 0) continue;
    kc_text outside = {.n = 0};
    size_t nout = 0;
    for (size_t j = 0; j < c->nv; j++) {
      if (allowed_type(at, c->v[j].i)) continue;
      add(&outside, "%s", nout++ ? ", " : "");
      add_dtype(&outside, c->v[j].i);
    }
    kc_text allowed = {.n = 0};
    for (size_t j = 0; j < at->nallowed && nout > 0; j++) {
      add(&allowed, "%s", j ? ", " : "");
      add_dtype(&allowed, at->allowed[j]);
    }
    EXPECT(R_TYPES_ALLOWED, nout == 0,
           "kernel for '%.*s' on %.*s allows %.*s = %s, which %.*s does not "
           "allow for %.*s (allowed: %s)",
           KD_STR(k->op), KD_STR(k->device), KD_STR(c->name), outside.s,
           KD_STR(k->op), KD_STR(c->name), allowed.s);
  }
}

static void check_host_memory(const kd_kernel* k, const kd_op* op) {
  for (size_t i = 0; i < k->nhm; i++) {
    int ok = has_name(op->in, op->nin, k->hm[i]) ||
             has_name(op->out, op->nout, k->hm[i]);
    kc_text in = {.n = 0}, out = {.n = 0};
    if (!ok) {
      add_names(&in, op->in, op->nin);
      add_names(&out, op->out, op->nout);
    }
    EXPECT(R_HOST_MEMORY, ok,
           "kernel for '%.*s' on %.*s puts '%.*s' in host memory, which is "
           "not an argument of %.*s (inputs: %s; outputs: %s)",
           KD_STR(k->op), KD_STR(k->device), KD_STR(k->hm[i]), KD_STR(k->op),
           in.s, out.s);
  }
}

/* Whether value v passes every constraint named `name` of kernels a and b
 * (KernelAttrsMatch requires each to hold). */
static int passes_all(const kd_kernel* const ks[2], kd_str name,
                      const kd_val* v) {
  for (int s = 0; s < 2; s++) {
    for (size_t i = 0; i < ks[s]->nc; i++) {
      const kd_constraint* c = &ks[s]->c[i];
      if (!kd_str_eq(c->name, name)) continue;
      int in = 0;
      for (size_t j = 0; j < c->nv && !in; j++) {
        in = c->v[j].kind == v->kind &&
             (v->kind == KD_S ? kd_str_eq(c->v[j].s, v->s) : c->v[j].i == v->i);
      }
      if (!in) return 0;
    }
  }
  return 1;
}

/* Whether some node matches both kernels (same key assumed): for every attr
 * either constrains, a value all constraints on it accept (and the op
 * allows). A list(type) attr that may be empty matches any type
 * constraint. `why` gets the witness ("T=float"). */
static int overlap(const kd_kernel* a, const kd_kernel* b, const kd_op* op,
                   kc_text* why) {
  const kd_kernel* const ks[2] = {a, b};
  for (int s = 0; s < 2; s++) {
    for (size_t i = 0; i < ks[s]->nc; i++) {
      const kd_constraint* c = &ks[s]->c[i];
      /* TF fails the node before it compares (kernels.constraint_values). */
      if (!one_kind(c)) return 0;
      int seen = 0; /* this attr was handled with an earlier constraint */
      for (size_t j = 0; j < (s == 0 ? i : a->nc) && !seen; j++) {
        seen = kd_str_eq(a->c[j].name, c->name);
      }
      for (size_t j = 0; s == 1 && j < i && !seen; j++) {
        seen = kd_str_eq(b->c[j].name, c->name);
      }
      if (seen) continue;
      const kd_attr* at = op != NULL ? find_attr(op, c->name) : NULL;
      if (at != NULL && kd_str_eq_c(at->type, "list(type)") &&
          (!at->has_minimum || at->minimum <= 0)) {
        add(why, "%s%.*s=[]", why->n ? ", " : "", KD_STR(c->name));
        continue;
      }
      const kd_val* hit = NULL;
      for (size_t j = 0; j < c->nv && hit == NULL; j++) {
        const kd_val* v = &c->v[j];
        if (v->kind == KD_TYPE && at != NULL && at->nallowed > 0 &&
            !allowed_type(at, v->i)) {
          continue;
        }
        if (passes_all(ks, c->name, v)) hit = v;
      }
      if (hit == NULL) return 0;
      add(why, "%s%.*s=", why->n ? ", " : "", KD_STR(c->name));
      add_value(why, hit);
    }
  }
  if (why->n == 0) add(why, "any attrs (neither constrains one)");
  return 1;
}

/* kernels.no_duplicates for news[i] (sorted): against the plugin's earlier
 * kernels with its key, then against the kernels registered before. */
static void check_duplicates(const kd_kernel* news, size_t i,
                             const kd_kernel* olds, size_t nold,
                             const kd_op* op) {
  const kd_kernel* k = &news[i];
  kc_text d = {.n = 0};
  add_kernel(&d, k);
  /* FindKernelRegistration lets the higher priority win among the device
   * type's own kernels, but fails on any two matching DEFAULT kernels. */
  int any_priority = kd_str_eq_c(k->device, "DEFAULT");
  for (size_t j = i; j-- > 0 && cmp_key(&news[j], k) == 0;) {
    kc_text why = {.n = 0};
    if ((!any_priority && news[j].priority != k->priority) ||
        !overlap(&news[j], k, op, &why)) {
      continue;
    }
    if (cmp_bytes(&news[j].src, &k->src) == 0) {
      EXPECT(R_NO_DUP, 0, "the plugin registers the kernel for %s twice", d.s);
    } else {
      kc_text other = {.n = 0};
      add_kernel(&other, &news[j]);
      EXPECT(R_NO_DUP, 0,
             "the plugin's kernels for %s and for %s both match a node "
             "with %s",
             other.s, d.s, why.s);
    }
    return;
  }
  for (size_t j = key_lower_bound(olds, nold, k);
       j < nold && cmp_key(&olds[j], k) == 0; j++) {
    kc_text why = {.n = 0};
    if ((!any_priority && olds[j].priority != k->priority) ||
        !overlap(&olds[j], k, op, &why)) {
      continue;
    }
    if (k->mark) {
      EXPECT(R_NO_DUP, 0,
             "the kernel for %s is identical to one registered before "
             "TF_InitKernel",
             d.s);
    } else {
      kc_text other = {.n = 0};
      add_kernel(&other, &olds[j]);
      EXPECT(R_NO_DUP, 0,
             "the kernel for %s and %s, registered before TF_InitKernel, "
             "both match a node with %s",
             d.s, other.s, why.s);
    }
    return;
  }
  EXPECT(R_NO_DUP, 1, "-");
}

/* ------------------------------------------------------------ analysis */

/* What TF_InitKernel added: the entries of `after` beyond those of `before`
 * (both sorted), as a multiset, so a second copy of an existing kernel
 * counts as new. same[i] is set if new[i] equals an entry of before. */
static size_t added(const kd_entries* before, const kd_entries* after,
                    pbw_field* out, int* same) {
  size_t i = 0, n = 0;
  for (size_t j = 0; j < after->n; j++) {
    while (i < before->n && cmp_bytes(&before->e[i], &after->e[j]) < 0) i++;
    if (i < before->n && cmp_bytes(&before->e[i], &after->e[j]) == 0) {
      i++;
      continue;
    }
    same[n] = i > 0 && cmp_bytes(&before->e[i - 1], &after->e[j]) == 0;
    out[n++] = after->e[j];
  }
  return n;
}

static int decode_kernels(kd_arena* a, const pbw_field* e, size_t n,
                          kd_kernel* out) {
  for (size_t i = 0; i < n; i++) {
    if (kd_decode_kernel(a, &e[i], &out[i]) != 0) return -1;
  }
  return 0;
}

/* The TF buffers of one run: kernels before and after TF_InitKernel, ops
 * before and after. */
typedef struct kc_snapshots {
  TF_Buffer *kernels_before, *kernels_after, *ops_before, *ops_after;
} kc_snapshots;

static void analyze(conf_env* e, kd_arena* a, const kc_snapshots* s) {
  kd_entries kb, ka, ob, oa;
  if (kd_kernel_list(a, s->kernels_before->data, s->kernels_before->length,
                     &kb) != 0 ||
      kd_kernel_list(a, s->kernels_after->data, s->kernels_after->length,
                     &ka) != 0 ||
      kd_op_list(a, s->ops_before->data, s->ops_before->length, &ob) != 0 ||
      kd_op_list(a, s->ops_after->data, s->ops_after->length, &oa) != 0) {
    conf_skip("cannot decode TF's registries: %s", kd_error());
    return;
  }
  qsort(kb.e, kb.n, sizeof(*kb.e), cmp_bytes);
  qsort(ka.e, ka.n, sizeof(*ka.e), cmp_bytes);
  pbw_field* fresh = kd_alloc(a, ka.n, sizeof(*fresh));
  int* same = kd_alloc(a, ka.n, sizeof(*same));
  size_t n = added(&kb, &ka, fresh, same);
  if (n == 0) {
    conf_note(
        "TF_InitKernel registered no kernel (%zu kernels before and "
        "after)",
        kb.n);
    return;
  }
  kd_kernel* news = kd_alloc(a, n, sizeof(*news));
  kd_kernel* olds = kd_alloc(a, kb.n, sizeof(*olds));
  kd_op* ops = kd_alloc(a, oa.n, sizeof(*ops));
  if (decode_kernels(a, fresh, n, news) != 0 ||
      decode_kernels(a, kb.e, kb.n, olds) != 0) {
    conf_skip("cannot decode TF's KernelList: %s", kd_error());
    return;
  }
  for (size_t i = 0; i < n; i++) news[i].mark = same[i];
  for (size_t i = 0; i < oa.n; i++) {
    if (kd_decode_op(a, &oa.e[i], &ops[i]) != 0) {
      conf_skip("cannot decode TF's OpList: %s", kd_error());
      return;
    }
  }
  qsort(news, n, sizeof(*news), cmp_kernel);
  qsort(olds, kb.n, sizeof(*olds), cmp_kernel);
  qsort(ops, oa.n, sizeof(*ops), cmp_op);

  size_t nops = 0, foreign = 0;
  kd_str type = {e->platform.type, strlen(e->platform.type)};
  for (size_t i = 0; i < n; i++) {
    const kd_kernel* k = &news[i];
    nops += i == 0 || !kd_str_eq(news[i - 1].op, k->op);
    foreign += !kd_str_eq(k->device, type);
    const kd_op* op = find_op(ops, oa.n, k->op);
    EXPECT(R_OP_EXISTS, op != NULL,
           "kernel for '%.*s' on %.*s: no op '%.*s' is registered (by "
           "TF's C API library or by the plugin)",
           KD_STR(k->op), KD_STR(k->device), KD_STR(k->op));
    EXPECT(R_DEVICE_TYPE, kd_str_eq(k->device, type),
           "kernel for '%.*s' is for device type '%.*s'; the platform's type "
           "is '%s'",
           KD_STR(k->op), KD_STR(k->device), e->platform.type);
    check_constraints(k, op);
    if (op != NULL) check_host_memory(k, op);
    check_duplicates(news, i, olds, kb.n, op);
  }
  conf_note(
      "TF_InitKernel registered %zu kernels for %zu ops (%zu for "
      "another device type than %s); %zu new ops (%zu ops, %zu kernels "
      "registered before it)",
      n, nops, foreign, e->platform.type, oa.n > ob.n ? oa.n - ob.n : 0, ob.n,
      kb.n);
}

/* ------------------------------------------------------------ the test */

typedef TF_Buffer* (*kernels_fn)(TF_Status*);
typedef TF_Buffer* (*ops_fn)(void);
typedef void (*delete_buffer_fn)(TF_Buffer*);

typedef struct kc_tf {
  kernels_fn kernels;
  ops_fn ops;
  delete_buffer_fn del;
} kc_tf;

/* POSIX: dlsym's object pointer converts to a function pointer. */
static int tf_sym(const char* name, void* fn, char* err, size_t len) {
  void* s = conf_tf_cc_sym(name, err, len);
  if (s != NULL) memcpy(fn, &s, sizeof(s));
  return s != NULL;
}

static TF_Buffer* get_kernels(const kc_tf* tf, TF_Status* st) {
  conf_status_set(st, TF_OK, "");
  TF_Buffer* b = tf->kernels(st);
  if (conf_status_code(st) != TF_OK || b == NULL) {
    conf_skip("TF_GetAllRegisteredKernels failed: %s: %s",
              conf_code_name(conf_status_code(st)), conf_status_msg(st));
    if (b != NULL) tf->del(b);
    return NULL;
  }
  return b;
}

static void test_registrations(conf_env* e) {
  /* TF's loader looks the symbol up the same way (FindSymbol). */
  void* init_sym = dlsym(e->dl, "TF_InitKernel");
  if (init_sym == NULL) {
    conf_skip("the plugin registers no kernels (no TF_InitKernel)");
    return;
  }
  void (*init_kernel)(void);
  memcpy(&init_kernel, &init_sym, sizeof(init_sym));

  kc_tf tf;
  char err[1024];
  uint64_t t0 = conf_now_ns();
  if (!tf_sym("TF_GetAllRegisteredKernels", &tf.kernels, err, sizeof(err)) ||
      !tf_sym("TF_GetAllOpList", &tf.ops, err, sizeof(err)) ||
      !tf_sym("TF_DeleteBuffer", &tf.del, err, sizeof(err))) {
    conf_skip(
        "the kernel checks need TF's op and kernel registries: %s "
        "(--tf-dir: the tensorflow directory with libtensorflow_cc.so.2, or "
        "python/_pywrap_tensorflow_internal.so before TF 2.11)",
        err);
    return;
  }
  conf_note("TF's op and kernel registries loaded in %.1f s",
            (double)(conf_now_ns() - t0) / 1e9);

  kc_snapshots s = {NULL, NULL, NULL, NULL};
  kd_arena a = {NULL};
  TF_Status* st = conf_status_new();
  s.kernels_before = get_kernels(&tf, st);
  if (s.kernels_before == NULL) goto out;
  s.ops_before = tf.ops();
  init_kernel();
  s.kernels_after = get_kernels(&tf, st);
  if (s.kernels_after == NULL) goto out;
  s.ops_after = tf.ops();
  if (s.ops_before == NULL || s.ops_after == NULL) {
    conf_skip("TF_GetAllOpList returned NULL");
    goto out;
  }
  analyze(e, &a, &s);
out:
  kd_arena_free(&a);
  TF_Buffer* all[] = {s.kernels_before, s.kernels_after, s.ops_before,
                      s.ops_after};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
    if (all[i] != NULL) tf.del(all[i]);
  }
  conf_status_free(st);
}

/* Deviceless: TF calls TF_InitKernel whatever get_device_count says. */
const harness_test conf_kernel_tests[] = {
    {"kernels.registrations", test_registrations, CONF_DEVICELESS},
    {NULL, NULL, 0},
};
