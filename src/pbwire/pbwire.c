/*
 * pbwire.c - the protocol buffers wire-format reader (pbwire.h).
 *
 * Every read checks the bytes left before it touches them; the first
 * malformed byte stops the reader for good (r->err), so a caller that
 * forgets to check one result still cannot read past the end.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include "pbwire/pbwire.h"

#include <string.h>

void pbw_init(pbw_reader* r, const void* data, size_t len) {
  r->start = (const uint8_t*)data;
  r->p = r->start;
  r->end = r->start + len;
  r->err = NULL;
  r->err_at = 0;
}

void pbw_init_field(pbw_reader* r, const pbw_field* f) {
  pbw_init(r, f->data, f->len);
}

static int fail(pbw_reader* r, const uint8_t* at, const char* why) {
  if (r->err == NULL) {
    r->err = why;
    r->err_at = (size_t)(at - r->start);
  }
  r->p = r->end;
  return PBW_ERROR;
}

int pbw_read_varint(const uint8_t** p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  const uint8_t* q = *p;
  for (int i = 0; i < 10; i++) {
    if (q >= end) return -1; /* truncated */
    uint8_t b = *q++;
    /* The 10th byte holds bit 63 only; more bits would not fit 64. */
    if (i == 9 && (b & 0x7e) != 0) return -1;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) {
      *p = q;
      *out = v;
      return 0;
    }
  }
  return -1; /* an 11th byte would follow */
}

int32_t pbw_int32(uint64_t v) {
  uint32_t low = (uint32_t)v;
  int32_t s;
  memcpy(&s, &low, sizeof(s));
  return s;
}

/* The tag at r->p: field number and wire type, validated. */
static int read_tag(pbw_reader* r, uint32_t* number, int* wire) {
  const uint8_t* at = r->p;
  uint64_t tag;
  if (pbw_read_varint(&r->p, r->end, &tag) != 0) {
    return fail(r, at, "truncated or overlong varint in a field's tag");
  }
  if (tag > UINT32_MAX) return fail(r, at, "field tag wider than 32 bits");
  if ((tag >> 3) == 0) return fail(r, at, "field number 0");
  *number = (uint32_t)(tag >> 3);
  *wire = (int)(tag & 7);
  if (*wire > PBW_I32) return fail(r, at, "wire type 6 or 7 (none exists)");
  return PBW_FIELD;
}

/* Reads the payload of a non-group field into f; `at` is where the field
 * starts (errors are reported there). */
static int read_payload(pbw_reader* r, pbw_field* f, const uint8_t* at) {
  size_t left = (size_t)(r->end - r->p);
  f->u = 0;
  f->data = NULL;
  f->len = 0;
  switch (f->wire) {
    case PBW_VARINT:
      if (pbw_read_varint(&r->p, r->end, &f->u) != 0) {
        return fail(r, at, "truncated or overlong varint");
      }
      return PBW_FIELD;
    case PBW_I64:
    case PBW_I32: {
      size_t n = f->wire == PBW_I64 ? 8 : 4;
      if (left < n) return fail(r, at, "truncated fixed-width value");
      for (size_t i = 0; i < n; i++) f->u |= (uint64_t)r->p[i] << (8 * i);
      r->p += n;
      return PBW_FIELD;
    }
    case PBW_LEN: {
      uint64_t len;
      if (pbw_read_varint(&r->p, r->end, &len) != 0) {
        return fail(r, at, "truncated or overlong length");
      }
      left = (size_t)(r->end - r->p);
      if (len > left) return fail(r, at, "length runs past the end");
      f->data = r->p;
      f->len = (size_t)len;
      r->p += len;
      return PBW_FIELD;
    }
    default: return fail(r, at, "group tag where a payload was expected");
  }
}

/* Skips a group whose start tag (field `number`) was just read, up to and
 * including its matching end tag. Nested groups must close in order. */
static int skip_group(pbw_reader* r, uint32_t number) {
  uint32_t open[PBW_MAX_GROUP_DEPTH];
  int depth = 0;
  open[depth++] = number;
  while (depth > 0) {
    if (r->p >= r->end) return fail(r, r->p, "group not closed");
    const uint8_t* at = r->p;
    pbw_field f;
    if (read_tag(r, &f.number, &f.wire) != PBW_FIELD) return PBW_ERROR;
    if (f.wire == PBW_SGROUP) {
      if (depth == PBW_MAX_GROUP_DEPTH) {
        return fail(r, at, "groups nested too deeply");
      }
      open[depth++] = f.number;
    } else if (f.wire == PBW_EGROUP) {
      if (f.number != open[depth - 1]) {
        return fail(r, at, "end-group tag of another field");
      }
      depth--;
    } else if (read_payload(r, &f, at) != PBW_FIELD) {
      return PBW_ERROR;
    }
  }
  return PBW_FIELD;
}

int pbw_next(pbw_reader* r, pbw_field* f) {
  if (r->err != NULL) return PBW_ERROR;
  if (r->p >= r->end) return PBW_END;
  const uint8_t* at = r->p;
  if (read_tag(r, &f->number, &f->wire) != PBW_FIELD) return PBW_ERROR;
  if (f->wire == PBW_EGROUP) {
    return fail(r, at, "end-group tag without a start-group tag");
  }
  if (f->wire == PBW_SGROUP) {
    f->u = 0;
    f->data = NULL;
    f->len = 0;
    return skip_group(r, f->number);
  }
  return read_payload(r, f, at);
}

int pbw_packed_next(const pbw_field* f, const uint8_t** it, uint64_t* out) {
  if (f->wire == PBW_VARINT) {
    /* One unpacked value: the field itself marks it as taken. */
    if (*it != NULL) return PBW_END;
    *it = (const uint8_t*)f;
    *out = f->u;
    return PBW_FIELD;
  }
  if (f->wire != PBW_LEN) return PBW_ERROR;
  const uint8_t* end = f->data + f->len;
  if (*it == NULL) *it = f->data;
  if (*it >= end) return PBW_END;
  if (pbw_read_varint(it, end, out) != 0) {
    *it = end;
    return PBW_ERROR;
  }
  return PBW_FIELD;
}
