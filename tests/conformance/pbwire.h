/*
 * pbwire.h - a reader of the protocol buffers wire format, for the kernel
 * checks: TF's C API hands out its kernel and op registries as serialized
 * KernelList and OpList messages, and the harness decodes them without
 * linking protobuf.
 *
 * The reader walks one message's fields in order. It never reads outside the
 * buffer it was given: a truncated varint, a length running past the end, a
 * varint longer than 10 bytes, field number 0 or a wire type that does not
 * exist make pbw_next return PBW_ERROR with a reason, and every later call
 * returns PBW_ERROR too. Unknown fields are the caller's to skip (it simply
 * ignores them: pbw_next has already stepped over their payload), groups
 * included. Nothing is allocated; payload pointers point into the buffer.
 *
 * Encoding facts (protobuf's "Encoding" documentation): a field is a varint
 * tag (number << 3 | wire type) then its payload; wire types 0 varint,
 * 1 fixed 64-bit, 2 length-delimited, 3/4 start/end of a group
 * (deprecated), 5 fixed 32-bit. Varints are little-endian base-128, at most
 * 10 bytes for 64 bits. Packed repeated scalars are one length-delimited
 * field holding the values back to back; parsers accept a repeated scalar
 * both packed and unpacked, and so does pbw_packed_next.
 *
 * Thread contract: none; a reader belongs to its caller.
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_PBWIRE_H_
#define SIMDEV_TESTS_CONFORMANCE_PBWIRE_H_

#include <stddef.h>
#include <stdint.h>

enum {
  PBW_VARINT = 0,
  PBW_I64 = 1,
  PBW_LEN = 2,
  PBW_SGROUP = 3,
  PBW_EGROUP = 4,
  PBW_I32 = 5,
};

/* pbw_next's results. */
enum { PBW_ERROR = -1, PBW_END = 0, PBW_FIELD = 1 };

/* Groups nested deeper than this are refused (a malicious buffer could
 * otherwise nest without end). */
#define PBW_MAX_GROUP_DEPTH 64

typedef struct pbw_reader {
  const uint8_t* p;
  const uint8_t* end;
  const char* err; /* NULL, or why the buffer is malformed */
  size_t err_at;   /* where the malformed field (or tag) starts: an offset */
  const uint8_t* start;
} pbw_reader;

typedef struct pbw_field {
  uint32_t number;
  int wire;
  /* PBW_VARINT: the value; PBW_I64 / PBW_I32: the raw little-endian bits.
   * PBW_SGROUP: 0 (the group, up to its end, has been skipped). */
  uint64_t u;
  /* PBW_LEN: the payload. */
  const uint8_t* data;
  size_t len;
} pbw_field;

void pbw_init(pbw_reader* r, const void* data, size_t len);
/* A reader over a length-delimited field's payload (a sub-message). */
void pbw_init_field(pbw_reader* r, const pbw_field* f);
/* The next field: PBW_FIELD (f filled), PBW_END at the end of the buffer,
 * PBW_ERROR if the buffer is malformed (r->err says why). */
int pbw_next(pbw_reader* r, pbw_field* f);

/* Reads one varint at *p (before end), advancing *p. 0 on success, -1 if it
 * is truncated or longer than 10 bytes or its 10th byte has bits beyond the
 * 64th. */
int pbw_read_varint(const uint8_t** p, const uint8_t* end, uint64_t* out);

/* The values of a repeated varint field, packed or not: `it` must start as
 * NULL. For a PBW_VARINT field, yields f->u once; for a PBW_LEN field, each
 * varint of its payload. Returns PBW_FIELD with *out set, PBW_END, or
 * PBW_ERROR (a truncated varint, or any other wire type). */
int pbw_packed_next(const pbw_field* f, const uint8_t** it, uint64_t* out);

/* Protobuf's int32: the low 32 bits of the varint, as a signed value
 * (negative int32 values are sign-extended to 10-byte varints). */
int32_t pbw_int32(uint64_t v);

#endif /* SIMDEV_TESTS_CONFORMANCE_PBWIRE_H_ */
