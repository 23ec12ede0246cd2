/*
 * test_pbwire.c - the protobuf wire-format reader and writer (src/pbwire)
 * on hand-made buffers: every field kind, skipped groups, packed values,
 * every way a buffer can be malformed; the writer against hand-encoded
 * bytes and read back by the reader.
 *
 * Each buffer is copied to a heap block of exactly its size (bytes()), so
 * that a read one byte past the end is an error under valgrind and ASan,
 * not a silent read of the next array on the stack.
 */
#define _GNU_SOURCE 1 /* the value CMake defines: no redefinition warning */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* cmocka.h relies on the headers above. */
#include <cmocka.h>

#include "pbwire/pbwire.h"

/* The heap copies of one test; freed by its teardown. */
#define MAX_COPIES 64
static uint8_t* copies[MAX_COPIES];
static int ncopies;

static const uint8_t* bytes(const void* data, size_t len) {
  assert_true(ncopies < MAX_COPIES);
  uint8_t* p = malloc(len ? len : 1);
  assert_non_null(p);
  memcpy(p, data, len);
  copies[ncopies++] = p;
  return p;
}

#define BYTES(...) \
  bytes((const uint8_t[]){__VA_ARGS__}, sizeof((const uint8_t[]){__VA_ARGS__}))
#define LEN(...) sizeof((const uint8_t[]){__VA_ARGS__})

static int teardown(void** state) {
  (void)state;
  while (ncopies > 0) free(copies[--ncopies]);
  return 0;
}

/* ------------------------------------------------------------ varints */

static int varint(const uint8_t* p, size_t len, uint64_t* v, size_t* used) {
  const uint8_t* q = p;
  int rc = pbw_read_varint(&q, p + len, v);
  *used = (size_t)(q - p);
  return rc;
}

#define VARINT_OK(expect, ...)                                         \
  do {                                                                 \
    uint64_t v_ = 0;                                                   \
    size_t used_ = 0;                                                  \
    assert_int_equal(                                                  \
        varint(BYTES(__VA_ARGS__), LEN(__VA_ARGS__), &v_, &used_), 0); \
    assert_true(v_ == (uint64_t)(expect));                             \
    assert_int_equal(used_, LEN(__VA_ARGS__));                         \
  } while (0)

#define VARINT_BAD(...)                                                 \
  do {                                                                  \
    uint64_t v_ = 12345;                                                \
    size_t used_ = 99;                                                  \
    assert_int_equal(                                                   \
        varint(BYTES(__VA_ARGS__), LEN(__VA_ARGS__), &v_, &used_), -1); \
    assert_int_equal(used_, 0); /* the cursor did not move */           \
    assert_true(v_ == 12345);   /* nor was the output written */        \
  } while (0)

static void varints(void** state) {
  (void)state;
  VARINT_OK(0, 0x00);
  VARINT_OK(1, 0x01);
  VARINT_OK(127, 0x7f);
  VARINT_OK(128, 0x80, 0x01);
  VARINT_OK(300, 0xac, 0x02);
  VARINT_OK(UINT64_MAX, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x01);
  VARINT_OK(1ull << 63, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x01);
  /* Non-canonical (padded) encodings are valid protobuf. */
  VARINT_OK(0, 0x80, 0x00);
  VARINT_OK(1, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
}

static void varints_malformed(void** state) {
  (void)state;
  uint64_t v;
  size_t used;
  assert_int_equal(varint(bytes("", 0), 0, &v, &used), -1); /* empty */
  VARINT_BAD(0x80);                                         /* truncated */
  VARINT_BAD(0xff, 0xff, 0xff);
  /* The 10th byte may only carry bit 63. */
  VARINT_BAD(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02);
  VARINT_BAD(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f);
  /* Longer than 10 bytes. */
  VARINT_BAD(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00);
  VARINT_BAD(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff);
}

static void int32_values(void** state) {
  (void)state;
  /* A negative int32 is sign-extended to 64 bits on the wire. */
  uint64_t v;
  size_t used;
  assert_int_equal(
      varint(BYTES(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
             10, &v, &used),
      0);
  assert_int_equal(pbw_int32(v), -1);
  assert_int_equal(pbw_int32(0x7fffffffu), INT32_MAX);
  assert_int_equal(pbw_int32(0xffffffff80000000ull), INT32_MIN);
  assert_int_equal(pbw_int32(5), 5);
}

/* ------------------------------------------------------------ fields */

static void all_wire_types(void** state) {
  (void)state;
  static const uint8_t msg[] = {
      0x08, 0x96, 0x01,                                  /* 1: varint 150 */
      0x12, 0x07, 't',  'e',  's',  't',  'i', 'n', 'g', /* 2: "testing" */
      0x1d, 0x01, 0x02, 0x03, 0x04,                      /* 3: fixed32 */
      0x21, 1,    2,    3,    4,    5,    6,   7,   8,   /* 4: fixed64 */
      0x2a, 0x00,                                        /* 5: empty bytes */
      0xf8, 0xff, 0xff, 0xff, 0x0f, 0x07,                /* 2^29-1: varint 7 */
  };
  pbw_reader r;
  pbw_field f;
  pbw_init(&r, bytes(msg, sizeof(msg)), sizeof(msg));
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 1);
  assert_int_equal(f.wire, PBW_VARINT);
  assert_int_equal(f.u, 150);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 2);
  assert_int_equal(f.wire, PBW_LEN);
  assert_int_equal(f.len, 7);
  assert_memory_equal(f.data, "testing", 7);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 3);
  assert_int_equal(f.wire, PBW_I32);
  assert_int_equal(f.u, 0x04030201u);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 4);
  assert_int_equal(f.wire, PBW_I64);
  assert_true(f.u == 0x0807060504030201ull);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 5);
  assert_int_equal(f.len, 0);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, (1u << 29) - 1);
  assert_int_equal(f.u, 7);
  assert_int_equal(pbw_next(&r, &f), PBW_END);
  assert_int_equal(pbw_next(&r, &f), PBW_END);
  assert_null(r.err);
}

static void sub_message(void** state) {
  (void)state;
  /* 3: { 1: "ab", 2: 5 } then 4: 9. */
  pbw_reader r, sub;
  pbw_field f, g;
  pbw_init(&r, BYTES(0x1a, 0x06, 0x0a, 0x02, 'a', 'b', 0x10, 0x05, 0x20, 0x09),
           10);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 3);
  pbw_init_field(&sub, &f);
  assert_int_equal(pbw_next(&sub, &g), PBW_FIELD);
  assert_int_equal(g.number, 1);
  assert_memory_equal(g.data, "ab", 2);
  assert_int_equal(pbw_next(&sub, &g), PBW_FIELD);
  assert_int_equal(g.number, 2);
  assert_int_equal(g.u, 5);
  assert_int_equal(pbw_next(&sub, &g), PBW_END);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 4);
  assert_int_equal(f.u, 9);
  assert_int_equal(pbw_next(&r, &f), PBW_END);
}

static void groups_skipped(void** state) {
  (void)state;
  /* 5: group { 1: 1, 6: group { 2: "x" }, 3: fixed32 } then 7: 42. */
  static const uint8_t msg[] = {
      0x2b,                  /* start group 5 */
      0x08, 0x01,            /* 1: 1 */
      0x33,                  /* start group 6 */
      0x12, 0x01, 'x',       /* 2: "x" */
      0x34,                  /* end group 6 */
      0x1d, 0,    0,   0, 0, /* 3: fixed32 */
      0x2c,                  /* end group 5 */
      0x38, 0x2a,            /* 7: 42 */
  };
  pbw_reader r;
  pbw_field f;
  pbw_init(&r, bytes(msg, sizeof(msg)), sizeof(msg));
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 5);
  assert_int_equal(f.wire, PBW_SGROUP);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 7);
  assert_int_equal(f.u, 42);
  assert_int_equal(pbw_next(&r, &f), PBW_END);
}

/* Reads fields until the end or an error; returns the last result. */
static int drain(pbw_reader* r) {
  pbw_field f;
  int rc;
  int guard = 0;
  while ((rc = pbw_next(r, &f)) == PBW_FIELD) {
    assert_true(++guard < 10000);
  }
  return rc;
}

#define MALFORMED(why_part, ...)                                  \
  do {                                                            \
    pbw_reader r_;                                                \
    pbw_init(&r_, BYTES(__VA_ARGS__), LEN(__VA_ARGS__));          \
    assert_int_equal(drain(&r_), PBW_ERROR);                      \
    assert_non_null(r_.err);                                      \
    assert_non_null(strstr(r_.err, why_part));                    \
    pbw_field f_;                                                 \
    assert_int_equal(pbw_next(&r_, &f_), PBW_ERROR); /* sticky */ \
  } while (0)

static void malformed(void** state) {
  (void)state;
  MALFORMED("past the end", 0x12, 0x05, 'a', 'b');
  MALFORMED("past the end", 0x08, 0x01, 0x12, 0x01);
  /* A length that would wrap a pointer around. */
  MALFORMED("past the end", 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0x01, 'a');
  MALFORMED("length", 0x12, 0x80);
  MALFORMED("varint", 0x08, 0x80);
  MALFORMED("varint", 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0x01);
  MALFORMED("fixed", 0x09, 0x01, 0x02);
  MALFORMED("fixed", 0x0d, 0x01, 0x02, 0x03);
  MALFORMED("tag", 0x80); /* truncated tag */
  MALFORMED("field number 0", 0x00, 0x00);
  MALFORMED("field number 0", 0x02, 0x00);
  MALFORMED("wire type", 0x0e);
  MALFORMED("wire type", 0x0f, 0x00);
  MALFORMED("32 bits", 0x80, 0x80, 0x80, 0x80, 0x10); /* tag 2^32 */
  MALFORMED("without a start", 0x0c);
  MALFORMED("not closed", 0x0b, 0x08, 0x01);
  MALFORMED("another field", 0x0b, 0x14);
  MALFORMED("past the end", 0x0b, 0x12, 0x05, 'a', 0x0c);
}

static void malformed_offset(void** state) {
  (void)state;
  pbw_reader r;
  pbw_init(&r, BYTES(0x08, 0x01, 0x10, 0x02, 0x1a, 0x09, 'a'), 7);
  assert_int_equal(drain(&r), PBW_ERROR);
  assert_int_equal(r.err_at, 4); /* the field whose length is wrong */
}

static void groups_too_deep(void** state) {
  (void)state;
  uint8_t buf[PBW_MAX_GROUP_DEPTH + 1];
  memset(buf, 0x0b, sizeof(buf)); /* start group 1, nested */
  pbw_reader r;
  pbw_init(&r, bytes(buf, sizeof(buf)), sizeof(buf));
  assert_int_equal(drain(&r), PBW_ERROR);
  assert_non_null(strstr(r.err, "deeply"));
  /* As deep as allowed, closed: fine. */
  uint8_t ok[2 * PBW_MAX_GROUP_DEPTH];
  memset(ok, 0x0b, PBW_MAX_GROUP_DEPTH);
  memset(ok + PBW_MAX_GROUP_DEPTH, 0x0c, PBW_MAX_GROUP_DEPTH);
  pbw_init(&r, bytes(ok, sizeof(ok)), sizeof(ok));
  assert_int_equal(drain(&r), PBW_END);
}

/* Every prefix of a valid message is read to its end or an error, within
 * its bytes (the heap copy has exactly that size). */
static void every_truncation(void** state) {
  (void)state;
  static const uint8_t msg[] = {
      0x0a, 0x0c, 0x0a, 0x04, 'T',  'a',  'n',  'h',  0x1a, 0x04, 0x0a,
      0x02, 0x30, 0x01, 0x2b, 0x08, 0x01, 0x2c, 0x21, 1,    2,    3,
      4,    5,    6,    7,    8,    0x32, 0x03, 0x01, 0x8e, 0x02,
  };
  for (size_t n = 0; n <= sizeof(msg); n++) {
    pbw_reader r;
    pbw_init(&r, bytes(msg, n), n);
    int rc = drain(&r);
    /* The boundaries between top-level fields end cleanly; others fail. */
    int boundary = n == 0 || n == 14 || n == 18 || n == 27 || n == sizeof(msg);
    assert_int_equal(rc, boundary ? PBW_END : PBW_ERROR);
    teardown(NULL);
  }
}

/* ------------------------------------------------------------ packed */

static void packed_values(void** state) {
  (void)state;
  pbw_reader r;
  pbw_field f;
  const uint8_t* it = NULL;
  uint64_t v;
  /* 4: packed [3, 270, 86942] */
  pbw_init(&r, BYTES(0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05), 8);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_FIELD);
  assert_int_equal(v, 3);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_FIELD);
  assert_int_equal(v, 270);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_FIELD);
  assert_int_equal(v, 86942);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_END);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_END);

  /* The same field unpacked: one value per field. */
  pbw_init(&r, BYTES(0x20, 0x03), 2);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  it = NULL;
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_FIELD);
  assert_int_equal(v, 3);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_END);

  /* Empty packed field. */
  pbw_init(&r, BYTES(0x22, 0x00), 2);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  it = NULL;
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_END);
}

static void packed_malformed(void** state) {
  (void)state;
  pbw_reader r;
  pbw_field f;
  const uint8_t* it = NULL;
  uint64_t v;
  /* The last varint of the payload is cut by the field's length. */
  pbw_init(&r, BYTES(0x22, 0x02, 0x01, 0x80, 0x01), 5);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_FIELD);
  assert_int_equal(v, 1);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_ERROR);
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_END);
  /* Fixed-width fields are not varints. */
  pbw_init(&r, BYTES(0x25, 0x01, 0x00, 0x00, 0x00), 5);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  it = NULL;
  assert_int_equal(pbw_packed_next(&f, &it, &v), PBW_ERROR);
}

/* ------------------------------------------------------------- writer */

/* Takes b's bytes and compares them with the expected encoding. */
static void expect_bytes(pbw_buf* b, const uint8_t* want, size_t n) {
  uint8_t* got = NULL;
  size_t len = 0;
  assert_int_equal(pbw_buf_take(b, &got, &len), 0);
  assert_non_null(got);
  assert_int_equal(len, n);
  if (n > 0) assert_memory_equal(got, want, n);
  free(got);
}
#define EXPECT(b, ...) \
  expect_bytes(b, (const uint8_t[]){__VA_ARGS__}, LEN(__VA_ARGS__))

static void writer_scalars(void** state) {
  (void)state;
  assert_int_equal(pbw_varint_size(0), 1);
  assert_int_equal(pbw_varint_size(127), 1);
  assert_int_equal(pbw_varint_size(128), 2);
  assert_int_equal(pbw_varint_size(UINT64_MAX), 10);
  pbw_buf b = PBW_BUF_INIT;
  pbw_put_uint(&b, 1, 150);
  EXPECT(&b, 0x08, 0x96, 0x01);
  pbw_put_int(&b, 2, -1); /* ten bytes, as protobuf writes negative ints */
  EXPECT(&b, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  pbw_put_fixed32(&b, 3, 0x3f800000u); /* 1.0f */
  pbw_put_fixed64(&b, 4, 0x0102030405060708ull);
  EXPECT(&b, 0x1d, 0x00, 0x00, 0x80, 0x3f, 0x21, 0x08, 0x07, 0x06, 0x05, 0x04,
         0x03, 0x02, 0x01);
  pbw_put_string(&b, 5, "ab");
  pbw_put_bytes(&b, 6, NULL, 0);
  pbw_put_tag(&b, 1000, PBW_VARINT);
  EXPECT(&b, 0x2a, 0x02, 'a', 'b', 0x32, 0x00, 0xc0, 0x3e);
  /* An empty buffer still hands out a pointer. */
  EXPECT(&b);
}

static void writer_packed_and_nested(void** state) {
  (void)state;
  pbw_buf b = PBW_BUF_INIT;
  int64_t v[] = {1, 300, -1};
  pbw_put_packed(&b, 4, v, 3);
  pbw_put_packed(&b, 5, v, 0); /* nothing */
  EXPECT(&b, 0x22, 0x0d, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0x01);
  /* message { 1: "x", 2: { 1: 7 } } built in place. */
  size_t outer = pbw_open(&b);
  pbw_put_string(&b, 1, "x");
  size_t inner = pbw_open(&b);
  pbw_put_uint(&b, 1, 7);
  pbw_close(&b, 2, inner);
  pbw_close(&b, 3, outer);
  EXPECT(&b, 0x1a, 0x07, 0x0a, 0x01, 'x', 0x12, 0x02, 0x08, 0x07);
  /* A payload of 200 bytes: the length takes two bytes, the payload moves. */
  size_t m = pbw_open(&b);
  uint8_t big[200];
  for (int i = 0; i < 200; i++) big[i] = (uint8_t)i;
  pbw_put_raw(&b, big, sizeof(big));
  pbw_close(&b, 1, m);
  uint8_t* got;
  size_t len;
  assert_int_equal(pbw_buf_take(&b, &got, &len), 0);
  assert_int_equal(len, 203);
  pbw_reader r;
  pbw_field f;
  pbw_init(&r, got, len);
  assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
  assert_int_equal(f.number, 1);
  assert_int_equal(f.len, 200);
  assert_memory_equal(f.data, big, 200);
  assert_int_equal(pbw_next(&r, &f), PBW_END);
  free(got);
}

/* What the writer writes, the reader reads back, field for field. */
static void writer_read_back(void** state) {
  (void)state;
  pbw_buf b = PBW_BUF_INIT;
  for (uint32_t i = 1; i <= 64; i++) {
    pbw_put_uint(&b, i, (uint64_t)1 << (i - 1));
  }
  uint8_t* got;
  size_t len;
  assert_int_equal(pbw_buf_take(&b, &got, &len), 0);
  pbw_reader r;
  pbw_field f;
  pbw_init(&r, got, len);
  for (uint32_t i = 1; i <= 64; i++) {
    assert_int_equal(pbw_next(&r, &f), PBW_FIELD);
    assert_int_equal(f.number, i);
    assert_int_equal(f.wire, PBW_VARINT);
    assert_true(f.u == (uint64_t)1 << (i - 1));
  }
  assert_int_equal(pbw_next(&r, &f), PBW_END);
  free(got);
  pbw_buf_free(&b); /* on a taken buffer: harmless */
}

int main(int argc, char** argv) {
  if (argc > 1 && argv[1] != NULL && argv[1][0] != '\0') {
    cmocka_set_test_filter(argv[1]);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(varints, teardown),
      cmocka_unit_test_teardown(varints_malformed, teardown),
      cmocka_unit_test_teardown(int32_values, teardown),
      cmocka_unit_test_teardown(all_wire_types, teardown),
      cmocka_unit_test_teardown(sub_message, teardown),
      cmocka_unit_test_teardown(groups_skipped, teardown),
      cmocka_unit_test_teardown(malformed, teardown),
      cmocka_unit_test_teardown(malformed_offset, teardown),
      cmocka_unit_test_teardown(groups_too_deep, teardown),
      cmocka_unit_test_teardown(every_truncation, teardown),
      cmocka_unit_test_teardown(packed_values, teardown),
      cmocka_unit_test_teardown(packed_malformed, teardown),
      cmocka_unit_test(writer_scalars),
      cmocka_unit_test(writer_packed_and_nested),
      cmocka_unit_test(writer_read_back),
  };
  return cmocka_run_group_tests_name("pbwire", tests, NULL, NULL);
}
