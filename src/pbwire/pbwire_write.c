/*
 * pbwire_write.c - the protocol buffers wire-format writer (pbwire.h).
 *
 * One growable buffer; a nested message is written in place and its header
 * (tag + length) inserted in front of it when it closes, so a serializer
 * never needs to know a message's size before writing it. Inserting moves
 * the payload once per nesting level; GraphDefs nest three or four levels.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include <stdlib.h>
#include <string.h>

#include "pbwire/pbwire.h"

size_t pbw_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Room for `more` bytes past b->len; 0, or -1 with b failed. */
static int reserve(pbw_buf* b, size_t more) {
  if (b->failed) return -1;
  if (more <= b->cap - b->len) return 0;
  if (more > SIZE_MAX / 2 - b->len) {
    b->failed = 1;
    return -1;
  }
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < more) cap *= 2;
  uint8_t* p = realloc(b->data, cap);
  if (p == NULL) {
    b->failed = 1;
    return -1;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

/* Writes v at p (room checked by the caller); returns the bytes used. */
static size_t encode_varint(uint8_t* p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

void pbw_put_raw(pbw_buf* b, const void* data, size_t len) {
  if (len == 0 || reserve(b, len) != 0) return;
  memcpy(b->data + b->len, data, len);
  b->len += len;
}

void pbw_put_varint(pbw_buf* b, uint64_t v) {
  if (reserve(b, 10) != 0) return;
  b->len += encode_varint(b->data + b->len, v);
}

void pbw_put_tag(pbw_buf* b, uint32_t number, int wire) {
  pbw_put_varint(b, ((uint64_t)number << 3) | (uint64_t)(wire & 7));
}

void pbw_put_uint(pbw_buf* b, uint32_t number, uint64_t v) {
  pbw_put_tag(b, number, PBW_VARINT);
  pbw_put_varint(b, v);
}

void pbw_put_int(pbw_buf* b, uint32_t number, int64_t v) {
  /* int32 and int64 both encode negative values as 10-byte varints of the
   * two's complement (protobuf sign-extends int32). */
  pbw_put_uint(b, number, (uint64_t)v);
}

void pbw_put_fixed32(pbw_buf* b, uint32_t number, uint32_t bits) {
  uint8_t le[4];
  for (int i = 0; i < 4; i++) le[i] = (uint8_t)(bits >> (8 * i));
  pbw_put_tag(b, number, PBW_I32);
  pbw_put_raw(b, le, sizeof(le));
}

void pbw_put_fixed64(pbw_buf* b, uint32_t number, uint64_t bits) {
  uint8_t le[8];
  for (int i = 0; i < 8; i++) le[i] = (uint8_t)(bits >> (8 * i));
  pbw_put_tag(b, number, PBW_I64);
  pbw_put_raw(b, le, sizeof(le));
}

void pbw_put_bytes(pbw_buf* b, uint32_t number, const void* data, size_t len) {
  pbw_put_tag(b, number, PBW_LEN);
  pbw_put_varint(b, len);
  pbw_put_raw(b, data, len);
}

void pbw_put_string(pbw_buf* b, uint32_t number, const char* s) {
  pbw_put_bytes(b, number, s, strlen(s));
}

void pbw_put_packed(pbw_buf* b, uint32_t number, const int64_t* v, size_t n) {
  if (n == 0) return;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) len += pbw_varint_size((uint64_t)v[i]);
  pbw_put_tag(b, number, PBW_LEN);
  pbw_put_varint(b, len);
  if (reserve(b, len) != 0) return;
  for (size_t i = 0; i < n; i++) {
    b->len += encode_varint(b->data + b->len, (uint64_t)v[i]);
  }
}

size_t pbw_open(const pbw_buf* b) {
  return b->len;
}

void pbw_close(pbw_buf* b, uint32_t number, size_t mark) {
  if (b->failed) return;
  size_t payload = b->len - mark;
  uint8_t head[20];
  size_t n = encode_varint(head, ((uint64_t)number << 3) | PBW_LEN);
  n += encode_varint(head + n, payload);
  if (reserve(b, n) != 0) return;
  memmove(b->data + mark + n, b->data + mark, payload);
  memcpy(b->data + mark, head, n);
  b->len += n;
}

int pbw_buf_take(pbw_buf* b, uint8_t** out, size_t* len) {
  if (!b->failed && b->data == NULL) reserve(b, 1); /* non-NULL when empty */
  if (b->failed) {
    pbw_buf_free(b);
    return -1;
  }
  *out = b->data;
  *len = b->len;
  b->data = NULL;
  b->len = b->cap = 0;
  return 0;
}

void pbw_buf_free(pbw_buf* b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
