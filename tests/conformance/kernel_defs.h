/*
 * kernel_defs.h - TF's kernel and op registries as the C API serializes
 * them (KernelList from TF_GetAllRegisteredKernels, OpList from
 * TF_GetAllOpList), decoded into the few fields the kernel checks need.
 *
 * Decoding follows protobuf's rules (a singular field seen twice keeps the
 * last value, repeated fields accumulate, a known field number with another
 * wire type is an unknown field) and never reads outside the buffer: a
 * malformed message is an error (kd_error says why), never an over-read.
 * Decoded strings point into the caller's buffer; everything else lives in
 * a kd_arena. Only what KernelAttrsMatch, MemoryTypesForNode and the op
 * lookup read is decoded.
 *
 * Thread contract: single-threaded (kd_error is one static buffer).
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_KERNEL_DEFS_H_
#define SIMDEV_TESTS_CONFORMANCE_KERNEL_DEFS_H_

#include <stddef.h>
#include <stdint.h>

#include "pbwire/pbwire.h"

/* A string inside a serialized message (not NUL-terminated). */
typedef struct kd_str {
  const char* p;
  size_t n;
} kd_str;

/* printf arguments for "%.*s". */
#define KD_STR(s) (int)(s).n, (s).p

int kd_str_eq(kd_str a, kd_str b);
int kd_str_eq_c(kd_str a, const char* b);
/* memcmp order, shorter first on a common prefix. */
int kd_str_cmp(kd_str a, kd_str b);

/* The kinds of values KernelAttrsMatch compares: the four lists of a
 * constraint's allowed_values that it reads. */
typedef enum { KD_TYPE, KD_S, KD_I, KD_B, KD_KINDS } kd_kind;

typedef struct kd_val {
  kd_kind kind;
  int64_t i; /* KD_TYPE (a DataType), KD_I, KD_B (0 or 1) */
  kd_str s;  /* KD_S */
} kd_val;

/* KernelDef.AttrConstraint. */
typedef struct kd_constraint {
  kd_str name;
  kd_val* v; /* allowed_values, in order */
  size_t nv;
  unsigned kinds; /* bit (1 << kd_kind) per kind present */
} kd_constraint;

/* KernelDef. */
typedef struct kd_kernel {
  kd_str op, device, label;
  int32_t priority;
  kd_constraint* c;
  size_t nc;
  kd_str* hm; /* host_memory_arg */
  size_t nhm;
  pbw_field src; /* the serialized KernelDef it came from */
  int mark;      /* the caller's; 0 after decoding */
} kd_kernel;

/* OpDef.AttrDef. */
typedef struct kd_attr {
  kd_str name, type; /* type: "type", "list(type)", "int", ... */
  int64_t* allowed;  /* the DataTypes of allowed_values; none: any */
  size_t nallowed;
  int has_minimum;
  int64_t minimum;
} kd_attr;

/* OpDef: its name, argument names and attrs. */
typedef struct kd_op {
  kd_str name;
  kd_str* in;
  size_t nin;
  kd_str* out;
  size_t nout;
  kd_attr* attr;
  size_t nattr;
} kd_op;

/* Bump allocation, freed all at once. Zero-initialize before use. */
typedef struct kd_arena {
  struct kd_chunk* head;
} kd_arena;

/* n zeroed elements of `size` bytes (NULL when n is 0). Aborts when out of
 * memory. */
void* kd_alloc(kd_arena* a, size_t n, size_t size);
void kd_arena_free(kd_arena* a);

/* The entries of a KernelList (KernelDefs) or an OpList (OpDefs), as
 * length-delimited fields pointing into data. 0, or -1 if malformed. */
typedef struct kd_entries {
  pbw_field* e;
  size_t n;
} kd_entries;
int kd_kernel_list(kd_arena* a, const void* data, size_t len, kd_entries* out);
int kd_op_list(kd_arena* a, const void* data, size_t len, kd_entries* out);

/* One entry each. 0, or -1 if malformed. */
int kd_decode_kernel(kd_arena* a, const pbw_field* msg, kd_kernel* k);
int kd_decode_op(kd_arena* a, const pbw_field* msg, kd_op* op);

/* Why the last call that returned -1 failed. */
const char* kd_error(void);

#endif /* SIMDEV_TESTS_CONFORMANCE_KERNEL_DEFS_H_ */
