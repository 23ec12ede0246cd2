/*
 * pbwire.h - a reader and a writer of the protocol buffers wire format
 * (prefix pbw_), without protobuf. Two users: the conformance harness
 * (TF's C API hands out its kernel and op registries as serialized
 * KernelList and OpList messages) and the graph optimizer (src/graph: TF
 * hands it a serialized GraphDef and takes one back). No TensorFlow, no
 * other simdev module.
 *
 * READER (pbwire.c)
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
 * WRITER (pbwire_write.c)
 *
 * A pbw_buf is a growable malloc'd byte buffer. Writers append a field
 * (tag + payload) or raw bytes; a nested message is written in place
 * between pbw_open and pbw_close, which inserts its tag and length in front
 * of it. The first allocation failure makes the buffer "failed": later
 * writes do nothing, and pbw_buf_take reports it once at the end, so a
 * serializer checks one result instead of every call. Varints are written
 * in their shortest form (as protobuf does).
 *
 * Thread contract: none; a reader or a buffer belongs to its caller.
 */
#ifndef SIMDEV_PBWIRE_PBWIRE_H_
#define SIMDEV_PBWIRE_PBWIRE_H_

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

/* ---- writer ------------------------------------------------------------ */
typedef struct pbw_buf {
  uint8_t* data; /* malloc'd; NULL until the first write */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed: the contents are incomplete */
} pbw_buf;

#define PBW_BUF_INIT \
  { NULL, 0, 0, 0 }

/* Bytes a varint of value v takes (1..10). */
size_t pbw_varint_size(uint64_t v);

void pbw_put_raw(pbw_buf* b, const void* data, size_t len);
void pbw_put_varint(pbw_buf* b, uint64_t v);
void pbw_put_tag(pbw_buf* b, uint32_t number, int wire);
/* Whole fields: tag + payload. */
void pbw_put_uint(pbw_buf* b, uint32_t number, uint64_t v); /* varint */
void pbw_put_int(pbw_buf* b, uint32_t number, int64_t v);   /* int32/64 */
void pbw_put_fixed32(pbw_buf* b, uint32_t number, uint32_t bits);
void pbw_put_fixed64(pbw_buf* b, uint32_t number, uint64_t bits);
void pbw_put_bytes(pbw_buf* b, uint32_t number, const void* data, size_t len);
void pbw_put_string(pbw_buf* b, uint32_t number, const char* s);
/* A packed repeated varint field (int32/int64/enum/bool): one
 * length-delimited field; nothing is written for n == 0 (as protobuf). */
void pbw_put_packed(pbw_buf* b, uint32_t number, const int64_t* v, size_t n);

/* A nested message: mark = pbw_open(b); write its fields; then
 * pbw_close(b, number, mark) turns what was written since mark into one
 * length-delimited field `number`. Marks nest. */
size_t pbw_open(const pbw_buf* b);
void pbw_close(pbw_buf* b, uint32_t number, size_t mark);

/* Hands the bytes over (*out malloc'd, free() it; non-NULL even when
 * empty) and resets b: 0, or -1 if any write failed (b is freed). */
int pbw_buf_take(pbw_buf* b, uint8_t** out, size_t* len);
void pbw_buf_free(pbw_buf* b);

#endif /* SIMDEV_PBWIRE_PBWIRE_H_ */
