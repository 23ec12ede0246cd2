/*
 * test_dlpack.c - src/dlpack (dlp_): dtype sizes, export of legacy and
 * versioned managed tensors (fields, deleter, bad arguments), the round trip
 * export -> check, every rejection of dlp_check_tensor, the rank limit, and
 * the import decision (dlp_plan_import: share, copy, empty or refuse).
 *
 * Leaks (a deleter that does not free, an error path that keeps its block)
 * are caught by the memcheck variant of this test.
 */
#include "dlp.h"
#include "testutil.h"

/* TF 2.16-2.19 ship DLPack 1.0's header, 2.20 on 1.1's (docs/tf-releases.md).
 * The cases below use codes and a flag 1.1 added, by their 1.1 values, so
 * the same test runs against both: simdev must refuse those dtypes and
 * ignore that flag whichever header it was built with. */
#if DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1
enum { kDLFloat8_e4m3fn = 10, kDLFloat4_e2m1fn = 17 };
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1)
#endif

/* ---------------------------------------------------------------- helpers */

static DLDataType dt(uint8_t code, uint8_t bits, uint16_t lanes) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = lanes;
  return t;
}

static const DLDataType kF32 = {kDLFloat, 32, 1};

/* Never dereferenced by the checks: any non-NULL address will do. */
static float g_buf[64];

/* A valid float32 {2,3} host tensor without strides. */
static int64_t g_shape23[2] = {2, 3};
static DLTensor valid_tensor(void) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = g_buf;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = 2;
  t.dtype = kF32;
  t.shape = g_shape23;
  t.strides = NULL;
  t.byte_offset = 0;
  return t;
}

/* What a release callback saw. Calls from another thread are read by the
 * main thread after a join. */
typedef struct rel_rec {
  int calls;
  void* last_owner;
} rel_rec;

static rel_rec g_rel;

static void release_cb(void* owner) {
  g_rel.calls++;
  g_rel.last_owner = owner;
}

static void reset_rel(void) {
  memset(&g_rel, 0, sizeof(g_rel));
}

/* Compact row-major strides the way the exporter defines them (a zero dim
 * counts as 1, as in PyTorch). */
static void compact_strides(int ndim, const int64_t* shape, int64_t* st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

/* Asserts the DLTensor an exporter built. */
static void assert_exported(const DLTensor* t, void* data, DLDataType dtype,
                            int ndim, const int64_t* shape) {
  assert_ptr_equal(t->data, data);
  assert_int_equal(t->device.device_type, kDLCPU);
  assert_int_equal(t->device.device_id, 0);
  assert_int_equal(t->ndim, ndim);
  assert_int_equal(t->dtype.code, dtype.code);
  assert_int_equal(t->dtype.bits, dtype.bits);
  assert_int_equal(t->dtype.lanes, dtype.lanes);
  assert_int_equal(t->byte_offset, 0);
  if (ndim == 0) {
    assert_null(t->shape);
    assert_null(t->strides);
    return;
  }
  assert_non_null(t->shape);
  assert_non_null(t->strides);
  /* Copied, not aliased: the caller's array may go away. */
  assert_ptr_not_equal(t->shape, shape);
  int64_t want[DLP_MAX_DIMS];
  compact_strides(ndim, shape, want);
  for (int i = 0; i < ndim; i++) {
    assert_int_equal(t->shape[i], shape[i]);
    assert_int_equal(t->strides[i], want[i]);
  }
}

/* ---------------------------------------------------------------- dtype */

static void dtype_sizes(void** state) {
  static const struct {
    uint8_t code, bits;
    uint16_t lanes;
    size_t want;
  } cases[] = {
      /* supported */
      {kDLFloat, 16, 1, 2},
      {kDLFloat, 32, 1, 4},
      {kDLFloat, 64, 1, 8},
      {kDLBfloat, 16, 1, 2},
      {kDLInt, 8, 1, 1},
      {kDLInt, 16, 1, 2},
      {kDLInt, 32, 1, 4},
      {kDLInt, 64, 1, 8},
      {kDLUInt, 8, 1, 1},
      {kDLUInt, 16, 1, 2},
      {kDLUInt, 32, 1, 4},
      {kDLUInt, 64, 1, 8},
      {kDLBool, 8, 1, 1},
      {kDLComplex, 64, 1, 8},
      {kDLComplex, 128, 1, 16},
      /* unsupported */
      {kDLFloat, 32, 2, 0},
      {kDLFloat, 32, 0, 0},
      {kDLInt, 8, 4, 0},
      {kDLFloat, 8, 1, 0},
      {kDLFloat, 128, 1, 0},
      {kDLInt, 4, 1, 0},
      {kDLInt, 1, 1, 0},
      {kDLUInt, 4, 1, 0},
      {kDLInt, 128, 1, 0},
      {kDLBool, 16, 1, 0},
      {kDLBool, 1, 1, 0},
      {kDLBfloat, 32, 1, 0},
      {kDLBfloat, 8, 1, 0},
      {kDLComplex, 32, 1, 0},
      {kDLOpaqueHandle, 64, 1, 0},
      {kDLOpaqueHandle, 8, 1, 0},
      {kDLFloat8_e4m3fn, 8, 1, 0},
      {kDLFloat4_e2m1fn, 4, 1, 0},
      {200, 32, 1, 0},
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(cases); i++) {
    size_t got =
        dlp_dtype_size(dt(cases[i].code, cases[i].bits, cases[i].lanes));
    if (got != cases[i].want) {
      print_message("case %zu: code %u bits %u lanes %u: size %zu, want %zu\n",
                    i, cases[i].code, cases[i].bits, cases[i].lanes, got,
                    cases[i].want);
      fail();
    }
  }
}

/* ---------------------------------------------------------------- export */

typedef struct shape_case {
  int ndim;
  int64_t shape[6];
} shape_case;

static const shape_case kShapes[] = {
    {0, {0}},       {1, {5}},
    {2, {2, 3}},    {3, {4, 1, 7}},
    {3, {2, 0, 3}}, {2, {0, 0}},
    {1, {0}},       {4, {2, 3, 4, 5}},
    {2, {1, 1}},    {6, {1, 2, 1, 3, 1, 2}},
};

static void export_legacy_fields(void** state) {
  const DLDataType types[] = {kF32, dt(kDLInt, 8, 1), dt(kDLComplex, 128, 1),
                              dt(kDLBool, 8, 1)};
  for (size_t i = 0; i < TU_ARRAY_SIZE(kShapes); i++) {
    for (size_t k = 0; k < TU_ARRAY_SIZE(types); k++) {
      /* The caller's shape array is a copy that is scribbled over after the
       * export: the tensor must keep its own. */
      int64_t shape[6];
      memcpy(shape, kShapes[i].shape, sizeof(shape));
      int owner_tag = 0;
      DLManagedTensor* m = NULL;
      reset_rel();
      assert_int_equal(dlp_export_legacy(g_buf, types[k], kShapes[i].ndim,
                                         kShapes[i].ndim ? shape : NULL,
                                         &owner_tag, release_cb, &m),
                       DLP_OK);
      assert_non_null(m);
      assert_non_null(m->deleter);
      for (int d = 0; d < 6; d++) shape[d] = -99;
      assert_exported(&m->dl_tensor, g_buf, types[k], kShapes[i].ndim,
                      kShapes[i].shape);
      assert_int_equal(g_rel.calls, 0);
      m->deleter(m);
      assert_int_equal(g_rel.calls, 1);
      assert_ptr_equal(g_rel.last_owner, &owner_tag);
    }
  }
}

static void export_versioned_fields(void** state) {
  for (size_t i = 0; i < TU_ARRAY_SIZE(kShapes); i++) {
    for (int ro = 0; ro < 2; ro++) {
      int64_t shape[6];
      memcpy(shape, kShapes[i].shape, sizeof(shape));
      int owner_tag = 0;
      DLManagedTensorVersioned* m = NULL;
      reset_rel();
      assert_int_equal(
          dlp_export_versioned(g_buf, kF32, kShapes[i].ndim,
                               kShapes[i].ndim ? shape : NULL, ro != 0,
                               &owner_tag, release_cb, &m),
          DLP_OK);
      assert_non_null(m);
      assert_non_null(m->deleter);
      for (int d = 0; d < 6; d++) shape[d] = -99;
      assert_int_equal(m->version.major, DLPACK_MAJOR_VERSION);
      assert_int_equal(m->version.minor, DLPACK_MINOR_VERSION);
      /* READ_ONLY only when asked; no other flag (not a copy). */
      assert_int_equal(m->flags, ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
      assert_exported(&m->dl_tensor, g_buf, kF32, kShapes[i].ndim,
                      kShapes[i].shape);
      assert_int_equal(g_rel.calls, 0);
      m->deleter(m);
      assert_int_equal(g_rel.calls, 1);
      assert_ptr_equal(g_rel.last_owner, &owner_tag);
    }
  }
}

/* A scalar export ignores a non-NULL shape pointer. */
static void export_scalar_with_shape_pointer(void** state) {
  int64_t shape[1] = {7};
  DLManagedTensor* m = NULL;
  assert_int_equal(dlp_export_legacy(g_buf, kF32, 0, shape, NULL, NULL, &m),
                   DLP_OK);
  assert_exported(&m->dl_tensor, g_buf, kF32, 0, NULL);
  m->deleter(m);
}

/* The deleter with a NULL release only frees (memcheck checks it does). */
static void export_null_release(void** state) {
  int64_t shape[2] = {3, 4};
  DLManagedTensor* l = NULL;
  DLManagedTensorVersioned* v = NULL;
  reset_rel();
  assert_int_equal(dlp_export_legacy(g_buf, kF32, 2, shape, &g_rel, NULL, &l),
                   DLP_OK);
  assert_int_equal(
      dlp_export_versioned(g_buf, kF32, 2, shape, true, &g_rel, NULL, &v),
      DLP_OK);
  assert_non_null(l);
  assert_non_null(v);
  l->deleter(l);
  v->deleter(v);
  assert_int_equal(g_rel.calls, 0);
}

/* Two exports are independent: deleting one releases only its owner. */
static void export_independent(void** state) {
  int64_t sa[1] = {4}, sb[2] = {2, 2};
  int a = 0, b = 0;
  DLManagedTensor* ma = NULL;
  DLManagedTensorVersioned* mb = NULL;
  reset_rel();
  assert_int_equal(dlp_export_legacy(g_buf, kF32, 1, sa, &a, release_cb, &ma),
                   DLP_OK);
  assert_int_equal(
      dlp_export_versioned(g_buf + 4, kF32, 2, sb, false, &b, release_cb, &mb),
      DLP_OK);
  assert_ptr_not_equal(ma->dl_tensor.shape, mb->dl_tensor.shape);
  mb->deleter(mb);
  assert_int_equal(g_rel.calls, 1);
  assert_ptr_equal(g_rel.last_owner, &b);
  assert_int_equal(ma->dl_tensor.shape[0], 4);
  ma->deleter(ma);
  assert_int_equal(g_rel.calls, 2);
  assert_ptr_equal(g_rel.last_owner, &a);
}

/* The deleter may run on any thread (the release callback with it). */
static void* delete_on_thread(void* p) {
  DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)p;
  m->deleter(m);
  return NULL;
}

static void export_delete_other_thread(void** state) {
  int64_t shape[2] = {2, 3};
  int owner_tag = 0;
  DLManagedTensorVersioned* m = NULL;
  reset_rel();
  assert_int_equal(dlp_export_versioned(g_buf, kF32, 2, shape, false,
                                        &owner_tag, release_cb, &m),
                   DLP_OK);
  pthread_t th;
  TU_PT(pthread_create(&th, NULL, delete_on_thread, m));
  TU_PT(pthread_join(th, NULL));
  assert_int_equal(g_rel.calls, 1);
  assert_ptr_equal(g_rel.last_owner, &owner_tag);
}

static void export_bad_args(void** state) {
  int64_t good[2] = {2, 3};
  int64_t neg[3] = {2, -1, 3};
  int64_t neg_last[2] = {2, -5};
  int64_t big[DLP_MAX_DIMS + 1];
  for (size_t i = 0; i < TU_ARRAY_SIZE(big); i++) big[i] = 1;
  static const struct {
    int ndim;
    int which; /* 0 good, 1 NULL, 2 neg, 3 neg_last, 4 big */
    DLDataType dtype;
  } cases[] = {
      {-1, 0, {kDLFloat, 32, 1}},
      {DLP_MAX_DIMS + 1, 4, {kDLFloat, 32, 1}},
      {2, 1, {kDLFloat, 32, 1}},
      {1, 1, {kDLFloat, 32, 1}},
      {3, 2, {kDLFloat, 32, 1}},
      {2, 3, {kDLFloat, 32, 1}},
      {2, 0, {kDLFloat, 32, 2}},
      {2, 0, {kDLFloat, 8, 1}},
      {2, 0, {kDLOpaqueHandle, 64, 1}},
      {2, 0, {kDLBool, 16, 1}},
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(cases); i++) {
    const int64_t* shape = cases[i].which == 0   ? good
                           : cases[i].which == 1 ? NULL
                           : cases[i].which == 2 ? neg
                           : cases[i].which == 3 ? neg_last
                                                 : big;
    DLManagedTensor* l = (DLManagedTensor*)&g_rel; /* must stay untouched */
    DLManagedTensorVersioned* v = (DLManagedTensorVersioned*)&g_rel;
    reset_rel();
    int rl = dlp_export_legacy(g_buf, cases[i].dtype, cases[i].ndim, shape,
                               &g_rel, release_cb, &l);
    int rv = dlp_export_versioned(g_buf, cases[i].dtype, cases[i].ndim, shape,
                                  true, &g_rel, release_cb, &v);
    if (rl != DLP_EINVAL || rv != DLP_EINVAL) {
      print_message("case %zu: legacy %d, versioned %d, want %d\n", i, rl, rv,
                    DLP_EINVAL);
      fail();
    }
    /* *out untouched, release not called; memcheck sees no leak. */
    assert_ptr_equal(l, (DLManagedTensor*)&g_rel);
    assert_ptr_equal(v, (DLManagedTensorVersioned*)&g_rel);
    assert_int_equal(g_rel.calls, 0);
  }
  /* DLP_MAX_DIMS itself is fine. */
  DLManagedTensor* m = NULL;
  assert_int_equal(
      dlp_export_legacy(g_buf, kF32, DLP_MAX_DIMS, big, NULL, NULL, &m),
      DLP_OK);
  assert_int_equal(m->dl_tensor.ndim, DLP_MAX_DIMS);
  m->deleter(m);
  /* NULL out. */
  reset_rel();
  assert_int_equal(
      dlp_export_legacy(g_buf, kF32, 2, good, &g_rel, release_cb, NULL),
      DLP_EINVAL);
  assert_int_equal(dlp_export_versioned(g_buf, kF32, 2, good, false, &g_rel,
                                        release_cb, NULL),
                   DLP_EINVAL);
  assert_int_equal(g_rel.calls, 0);
}

/* ---------------------------------------------------------------- round trip
 */

static void assert_view(const dlp_view* v, void* data, DLDataType dtype,
                        int ndim, const int64_t* shape, size_t esize) {
  assert_ptr_equal(v->data, data);
  assert_int_equal(v->dtype.code, dtype.code);
  assert_int_equal(v->dtype.bits, dtype.bits);
  assert_int_equal(v->dtype.lanes, dtype.lanes);
  assert_int_equal(v->ndim, ndim);
  int64_t elements = 1;
  for (int i = 0; i < ndim; i++) {
    assert_int_equal(v->shape[i], shape[i]);
    elements *= shape[i];
  }
  assert_int_equal(v->elements, elements);
  assert_int_equal(v->nbytes, (uint64_t)elements * esize);
}

static void round_trip(void** state) {
  /* 128 float32 (the largest shape has 120), a multiple of 64 bytes. */
  float* buf = (float*)aligned_alloc(64, 512);
  assert_non_null(buf);
  for (size_t i = 0; i < TU_ARRAY_SIZE(kShapes); i++) {
    int ndim = kShapes[i].ndim;
    const int64_t* shape = kShapes[i].shape;
    char msg[256];
    dlp_view v;

    DLManagedTensor* l = NULL;
    assert_int_equal(dlp_export_legacy(buf, kF32, ndim, shape, NULL, NULL, &l),
                     DLP_OK);
    memset(&v, 0xa5, sizeof(v));
    msg[0] = '\0';
    int rc = dlp_check_legacy(l, &v, msg, sizeof(msg));
    if (rc != DLP_OK) print_message("shape case %zu: %s\n", i, msg);
    assert_int_equal(rc, DLP_OK);
    assert_view(&v, buf, kF32, ndim, shape, 4);
    assert_true(v.aligned64);
    assert_false(v.read_only);
    l->deleter(l);

    for (int ro = 0; ro < 2; ro++) {
      DLManagedTensorVersioned* m = NULL;
      assert_int_equal(
          dlp_export_versioned(buf, kF32, ndim, shape, ro != 0, NULL, NULL, &m),
          DLP_OK);
      memset(&v, 0xa5, sizeof(v));
      msg[0] = '\0';
      rc = dlp_check_versioned(m, &v, msg, sizeof(msg));
      if (rc != DLP_OK) print_message("shape case %zu: %s\n", i, msg);
      assert_int_equal(rc, DLP_OK);
      assert_view(&v, buf, kF32, ndim, shape, 4);
      assert_true(v.aligned64);
      assert_int_equal(v.read_only, ro != 0);
      m->deleter(m);
    }
  }

  /* Off the 64-byte boundary: still accepted, aligned64 false. */
  int64_t shape[1] = {8};
  DLManagedTensorVersioned* m = NULL;
  assert_int_equal(
      dlp_export_versioned(buf + 1, kF32, 1, shape, false, NULL, NULL, &m),
      DLP_OK);
  dlp_view v;
  assert_int_equal(dlp_check_versioned(m, &v, NULL, 0), DLP_OK);
  assert_ptr_equal(v.data, buf + 1);
  assert_false(v.aligned64);
  assert_int_equal(v.nbytes, 32);
  m->deleter(m);

  /* Other dtypes: nbytes follows the element size. */
  int64_t s2[2] = {3, 5};
  const DLDataType types[] = {dt(kDLUInt, 8, 1), dt(kDLFloat, 16, 1),
                              dt(kDLComplex, 128, 1), dt(kDLInt, 64, 1)};
  for (size_t k = 0; k < TU_ARRAY_SIZE(types); k++) {
    DLManagedTensor* l = NULL;
    assert_int_equal(dlp_export_legacy(buf, types[k], 2, s2, NULL, NULL, &l),
                     DLP_OK);
    assert_int_equal(dlp_check_legacy(l, &v, NULL, 0), DLP_OK);
    assert_view(&v, buf, types[k], 2, s2, dlp_dtype_size(types[k]));
    l->deleter(l);
  }
  free(buf);
}

/* ----------------------------------------------------------------- gather */

/* dlp_gather reads exactly the elements the strides name, in row-major
 * order: transposed, padded, reversed (negative stride) and broadcast. */
static void gather_layouts(void** state) {
  (void)state;
  int32_t src[12];
  for (int i = 0; i < 12; i++) src[i] = 100 + i;
  DLTensor t = valid_tensor(); /* 2x3 */
  t.dtype = dt(kDLInt, 32, 1);
  dlp_view v;
  int32_t out[12];
  struct {
    const char* name;
    int64_t strides[2];
    int offset; /* element the data pointer starts at */
    int32_t want[6];
  } cases[] = {
      {"compact", {3, 1}, 0, {100, 101, 102, 103, 104, 105}},
      {"transposed", {1, 2}, 0, {100, 102, 104, 101, 103, 105}},
      {"padded", {4, 1}, 0, {100, 101, 102, 104, 105, 106}},
      {"reversed rows", {-3, 1}, 3, {103, 104, 105, 100, 101, 102}},
      {"reversed cols", {3, -1}, 2, {102, 101, 100, 105, 104, 103}},
      {"broadcast", {0, 1}, 0, {100, 101, 102, 100, 101, 102}},
  };
  for (size_t c = 0; c < TU_ARRAY_SIZE(cases); c++) {
    t.data = src + cases[c].offset;
    t.strides = cases[c].strides;
    assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
    assert_int_equal(v.nbytes, 24);
    memset(out, 0, sizeof(out));
    dlp_gather(&v, out);
    for (int i = 0; i < 6; i++)
      if (out[i] != cases[c].want[i]) {
        print_message("%s: element %d is %d, want %d\n", cases[c].name, i,
                      out[i], cases[c].want[i]);
        fail();
      }
    assert_int_equal(out[6], 0); /* nothing past nbytes */
  }
  /* Scalars, rank 1 and empty tensors. */
  int64_t st1[1] = {3};
  int64_t sh1[1] = {4};
  t.ndim = 1;
  t.shape = sh1;
  t.strides = st1;
  t.data = src;
  assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
  dlp_gather(&v, out);
  assert_int_equal(out[0], 100);
  assert_int_equal(out[3], 109);
  t.ndim = 0;
  t.data = src + 5;
  assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
  dlp_gather(&v, out);
  assert_int_equal(out[0], 105);
  sh1[0] = 0;
  t.ndim = 1;
  t.data = NULL;
  assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
  dlp_gather(&v, NULL); /* nothing to read or write */
  /* 16-byte elements (complex128). */
  double cplx[8];
  for (int i = 0; i < 8; i++) cplx[i] = i;
  int64_t sh2[1] = {2};
  int64_t st2[1] = {2}; /* every other complex number */
  t.dtype = dt(kDLComplex, 128, 1);
  t.shape = sh2;
  t.strides = st2;
  t.data = cplx;
  assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
  double got[4];
  dlp_gather(&v, got);
  assert_true(got[0] == 0 && got[1] == 1 && got[2] == 4 && got[3] == 5);
  /* A dimension of size 1 with a stride whose byte size overflows (found by
   * the fuzz target; UBSan flags the multiplication): never stepped over,
   * so valid, and the view's stride for it is 0. */
  int64_t sh31[2] = {3, 1};
  int64_t st31[2] = {2, INT64_MAX};
  t = valid_tensor();
  t.dtype = dt(kDLInt, 32, 1);
  t.shape = sh31;
  t.strides = st31;
  t.data = src;
  assert_int_equal(dlp_check_tensor(&t, &v, NULL, 0), DLP_OK);
  assert_false(v.compact);
  assert_int_equal(v.strides[1], 0);
  memset(out, 0, sizeof(out));
  dlp_gather(&v, out);
  assert_true(out[0] == 100 && out[1] == 102 && out[2] == 104 && out[3] == 0);
}

/* ------------------------------------------------------ device round trip */

/* The paths the plugin's DLPack ops take, on a real simulated device and
 * stream, without TensorFlow (so memcheck and helgrind can watch them):
 * export of device memory whose owner is released by the consumer's
 * deleter; zero-copy import of a foreign host buffer mapped into the
 * device (stream copies accept it while mapped); the copy import of a
 * strided tensor, gathered on the stream worker, then deleted there. */
typedef struct dev_owner {
  sim_device* dev;
  void* buf;
  int released;
} dev_owner;

static void release_dev_buf(void* owner) {
  dev_owner* o = owner;
  sim_mem_free(o->dev, o->buf);
  o->released++;
}

static void release_host_buf(void* owner) {
  free(owner);
}

typedef struct gather_job {
  dlp_view view;
  void* dst;
  DLManagedTensor* producer; /* deleted after the copy */
} gather_job;

static int gather_on_stream(void* arg, int stream_status, char* msg,
                            size_t len) {
  (void)msg;
  (void)len;
  gather_job* j = arg;
  if (stream_status == SIM_OK) dlp_gather(&j->view, j->dst);
  j->producer->deleter(j->producer);
  return SIM_OK;
}

static void device_round_trip(void** state) {
  (void)state;
  sim_device* dev = NULL;
  sim_stream* s = NULL;
  assert_int_equal(tu_device_create(0, 16, &dev), SIM_OK);
  assert_int_equal(sim_stream_create(dev, &s), SIM_OK);
  enum { N = 1024 };
  float host[N];
  for (int i = 0; i < N; i++) host[i] = (float)i;

  /* Export: a device buffer written by the stream. */
  dev_owner owner = {dev, sim_mem_alloc(dev, N * sizeof(float)), 0};
  assert_non_null(owner.buf);
  assert_int_equal(sim_memcpy_async(s, owner.buf, host, sizeof(host)), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  int64_t shape[1] = {N};
  DLManagedTensorVersioned* out = NULL;
  /* Exported at the host-accessible address, as dlpack_ops.c does (the
   * alias on a discrete device: SIMDEV_DISCRETE=1 variant). */
  float* buf_host = tu_bytes(owner.buf);
  assert_int_equal(dlp_export_versioned(buf_host, kF32, 1, shape, false, &owner,
                                        release_dev_buf, &out),
                   DLP_OK);
  dlp_view v;
  assert_int_equal(dlp_check_versioned(out, &v, NULL, 0), DLP_OK);
  assert_true(v.compact && v.aligned64 && !v.read_only);
  assert_ptr_equal(v.data, buf_host);
  assert_true(((float*)v.data)[N - 1] == (float)(N - 1));
  out->deleter(out);
  assert_int_equal(owner.released, 1);

  /* Zero-copy import of a foreign host buffer: mapped while in use. */
  float* foreign = NULL;
  assert_int_equal(posix_memalign((void**)&foreign, 64, sizeof(host)), 0);
  memcpy(foreign, host, sizeof(host));
  DLManagedTensor* in = NULL;
  assert_int_equal(dlp_export_legacy(foreign, kF32, 1, shape, foreign,
                                     release_host_buf, &in),
                   DLP_OK);
  assert_int_equal(dlp_check_legacy(in, &v, NULL, 0), DLP_OK);
  assert_false(sim_mem_contains(dev, v.data, v.nbytes));
  assert_int_equal(sim_mem_register_host(dev, v.data, v.nbytes), SIM_OK);
  assert_true(sim_mem_contains(dev, v.data, v.nbytes));
  float* dst = sim_mem_alloc(dev, v.nbytes);
  assert_int_equal(sim_memcpy_async(s, dst, v.data, v.nbytes), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  float* dst_host = tu_bytes(dst); /* host view of device memory */
  assert_memory_equal(dst_host, host, sizeof(host));
  assert_int_equal(sim_mem_unregister_host(dev, v.data, v.nbytes), SIM_OK);
  in->deleter(in); /* frees `foreign` */

  /* Copy import of a strided tensor (every other element), on the worker. */
  foreign = malloc(sizeof(host));
  memcpy(foreign, host, sizeof(host));
  int64_t half[1] = {N / 2};
  assert_int_equal(
      dlp_export_legacy(foreign, kF32, 1, half, foreign, release_host_buf, &in),
      DLP_OK);
  static int64_t every_other[1] = {2};
  in->dl_tensor.strides = every_other; /* the producer's own layout */
  gather_job job = {.dst = dst_host, .producer = in};
  assert_int_equal(dlp_check_legacy(in, &job.view, NULL, 0), DLP_OK);
  assert_false(job.view.compact);
  memset(dst_host, 0, sizeof(host));
  assert_int_equal(sim_host_callback_async(s, gather_on_stream, &job), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  for (int i = 0; i < N / 2; i++) assert_true(dst_host[i] == (float)(2 * i));
  assert_true(dst_host[N / 2] == 0.0f); /* nothing past the copy */

  sim_mem_free(dev, dst);
  sim_stream_destroy(s);
  sim_device_destroy(dev);
}

/* ---------------------------------------------------------------- rejects */

enum { OUT_TENSOR = 0, OUT_NULL_TENSOR, OUT_NULL_VIEW };

typedef struct reject_case {
  const char* name;
  DLTensor t;
  int which; /* OUT_* */
  int want;
  const char* word;
} reject_case;

static int64_t g_neg[3] = {2, -3, 4};
static int64_t g_over[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
static int64_t g_over3[3] = {2, INT64_C(1) << 30, INT64_C(1) << 33};
/* 2^62 elements fit in int64; their 2^64 bytes do not. */
static int64_t g_over_bytes[2] = {INT64_C(1) << 31, INT64_C(1) << 31};
static int64_t g_over_edge[1] = {INT64_MAX / 4 + 1};
static int64_t g_huge_strides[2] = {INT64_MAX / 2, 1};
static int64_t g_min_strides[2] = {INT64_MIN, 1};
static int64_t g_shape33[DLP_MAX_DIMS + 1];

static size_t make_rejects(reject_case* c, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < TU_ARRAY_SIZE(g_shape33); i++) g_shape33[i] = 1;
#define ADD(nm, which_, want_, word_) \
  do {                                \
    if (n == cap) abort();            \
    c[n].name = nm;                   \
    c[n].which = which_;              \
    c[n].want = want_;                \
    c[n].word = word_;                \
    n++;                              \
  } while (0)
  for (size_t i = 0; i < cap; i++) c[i].t = valid_tensor();

  ADD("NULL tensor", OUT_NULL_TENSOR, DLP_EINVAL, "NULL");
  ADD("NULL view", OUT_NULL_VIEW, DLP_EINVAL, "NULL");
  c[n].t.ndim = -1;
  ADD("ndim -1", OUT_TENSOR, DLP_EINVAL, "ndim");
  c[n].t.ndim = INT32_MIN;
  ADD("ndim INT32_MIN", OUT_TENSOR, DLP_EINVAL, "ndim");
  c[n].t.ndim = DLP_MAX_DIMS + 1;
  c[n].t.shape = g_shape33;
  ADD("ndim DLP_MAX_DIMS + 1", OUT_TENSOR, DLP_EUNSUPPORTED, "rank");
  c[n].t.ndim = INT32_MAX;
  ADD("ndim INT32_MAX", OUT_TENSOR, DLP_EUNSUPPORTED, "rank");
  c[n].t.shape = NULL;
  ADD("NULL shape", OUT_TENSOR, DLP_EINVAL, "shape");
  c[n].t.ndim = 3;
  c[n].t.shape = g_neg;
  ADD("negative dim", OUT_TENSOR, DLP_EINVAL, "-3");
  c[n].t.shape = g_over;
  ADD("overflow {2^40,2^40} f32", OUT_TENSOR, DLP_EINVAL, "overflow");
  c[n].t.ndim = 3;
  c[n].t.shape = g_over3;
  ADD("overflow {2,2^30,2^33} f32", OUT_TENSOR, DLP_EINVAL, "overflow");
  c[n].t.shape = g_over_bytes;
  ADD("overflow bytes {2^31,2^31} f32", OUT_TENSOR, DLP_EINVAL, "overflow");
  c[n].t.ndim = 1;
  c[n].t.shape = g_over_edge;
  ADD("overflow bytes INT64_MAX/4+1 f32", OUT_TENSOR, DLP_EINVAL, "overflow");
  c[n].t.dtype = dt(kDLFloat, 32, 2);
  ADD("dtype lanes 2", OUT_TENSOR, DLP_EUNSUPPORTED, "dtype");
  c[n].t.dtype = dt(kDLOpaqueHandle, 64, 1);
  ADD("dtype opaque", OUT_TENSOR, DLP_EUNSUPPORTED, "dtype");
  c[n].t.dtype = dt(kDLFloat8_e4m3fn, 8, 1);
  ADD("dtype float8", OUT_TENSOR, DLP_EUNSUPPORTED, "dtype");
  c[n].t.device.device_type = kDLCUDA;
  ADD("device CUDA", OUT_TENSOR, DLP_EUNSUPPORTED, "device");
  c[n].t.device.device_type = kDLExtDev;
  ADD("device ExtDev", OUT_TENSOR, DLP_EUNSUPPORTED, "device");
  c[n].t.device.device_type = kDLCUDAHost;
  ADD("device CUDAHost", OUT_TENSOR, DLP_EUNSUPPORTED, "device");
  c[n].t.byte_offset = 8;
  ADD("byte_offset 8", OUT_TENSOR, DLP_EUNSUPPORTED, "byte_offset");
  c[n].t.strides = g_huge_strides;
  ADD("stride span overflows", OUT_TENSOR, DLP_EINVAL, "strides overflow");
  c[n].t.strides = g_min_strides;
  ADD("stride INT64_MIN", OUT_TENSOR, DLP_EINVAL, "strides overflow");
  c[n].t.data = NULL;
  ADD("NULL data", OUT_TENSOR, DLP_EINVAL, "data");
  c[n].t.data = NULL;
  c[n].t.ndim = 0;
  c[n].t.shape = NULL;
  ADD("NULL data scalar", OUT_TENSOR, DLP_EINVAL, "data");
#undef ADD
  return n;
}

static int run_reject(const reject_case* c, char* msg, size_t len) {
  dlp_view v;
  if (c->which == OUT_NULL_TENSOR) return dlp_check_tensor(NULL, &v, msg, len);
  if (c->which == OUT_NULL_VIEW) return dlp_check_tensor(&c->t, NULL, msg, len);
  return dlp_check_tensor(&c->t, &v, msg, len);
}

static void check_rejects(void** state) {
  reject_case cases[32];
  size_t n = make_rejects(cases, TU_ARRAY_SIZE(cases));
  for (size_t i = 0; i < n; i++) {
    char msg[256];
    memset(msg, 'X', sizeof(msg));
    int rc = run_reject(&cases[i], msg, sizeof(msg));
    int terminated = memchr(msg, '\0', sizeof(msg)) != NULL;
    if (rc != cases[i].want || !terminated ||
        strstr(msg, cases[i].word) == NULL) {
      print_message("%s: rc %d (want %d), msg \"%.*s\" (want \"%s\")\n",
                    cases[i].name, rc, cases[i].want, terminated ? 255 : 40,
                    msg, cases[i].word);
      fail();
    }
    /* No message buffer: same verdict, nothing written. */
    assert_int_equal(run_reject(&cases[i], NULL, 0), cases[i].want);
    char one = 'Y';
    assert_int_equal(run_reject(&cases[i], &one, 0), cases[i].want);
    assert_int_equal(one, 'Y');
  }
}

/* An 8-byte buffer gets 7 characters and a NUL, and nothing past it. */
static void message_truncated(void** state) {
  reject_case cases[32];
  size_t n = make_rejects(cases, TU_ARRAY_SIZE(cases));
  for (size_t i = 0; i < n; i++) {
    char buf[24];
    memset(buf, 'X', sizeof(buf));
    int rc = run_reject(&cases[i], buf, 8);
    assert_int_equal(rc, cases[i].want);
    if (buf[7] != '\0' || strlen(buf) != 7) {
      print_message("%s: not NUL-terminated at 7\n", cases[i].name);
      fail();
    }
    for (size_t k = 8; k < sizeof(buf); k++) {
      if (buf[k] != 'X') {
        print_message("%s: byte %zu written\n", cases[i].name, k);
        fail();
      }
    }
    /* len 1: just the NUL. */
    memset(buf, 'X', sizeof(buf));
    assert_int_equal(run_reject(&cases[i], buf, 1), cases[i].want);
    assert_int_equal(buf[0], '\0');
    assert_int_equal(buf[1], 'X');
  }
  /* The managed forms too. */
  char buf[24];
  memset(buf, 'X', sizeof(buf));
  dlp_view v;
  assert_int_equal(dlp_check_legacy(NULL, &v, buf, 8), DLP_EINVAL);
  assert_int_equal(strlen(buf), 7);
  assert_int_equal(buf[8], 'X');
  memset(buf, 'X', sizeof(buf));
  assert_int_equal(dlp_check_versioned(NULL, &v, buf, 8), DLP_EINVAL);
  assert_int_equal(strlen(buf), 7);
  assert_int_equal(buf[8], 'X');
}

/* ---------------------------------------------------------------- accepts */

static void check_ok_layout(const char* name, const DLTensor* t,
                            int64_t elements, uint64_t nbytes, bool compact) {
  char msg[256] = "";
  dlp_view v;
  memset(&v, 0xa5, sizeof(v));
  int rc = dlp_check_tensor(t, &v, msg, sizeof(msg));
  if (rc != DLP_OK) {
    print_message("%s: rc %d: %s\n", name, rc, msg);
    fail();
  }
  if (v.elements != elements || v.nbytes != nbytes || v.ndim != t->ndim ||
      v.data != t->data || v.read_only || v.compact != compact) {
    print_message("%s: elements %lld nbytes %llu (want %lld %llu)\n", name,
                  (long long)v.elements, (unsigned long long)v.nbytes,
                  (long long)elements, (unsigned long long)nbytes);
    fail();
  }
  for (int i = 0; i < t->ndim; i++) assert_int_equal(v.shape[i], t->shape[i]);
}

static void check_ok(const char* name, const DLTensor* t, int64_t elements,
                     uint64_t nbytes) {
  check_ok_layout(name, t, elements, nbytes, true);
}

static void check_accepts(void** state) {
  DLTensor t = valid_tensor();
  check_ok("NULL strides", &t, 6, 24);

  int64_t st[2] = {3, 1};
  t.strides = st;
  check_ok("compact strides", &t, 6, 24);

  /* Size-1 dims: any stride, even negative or zero. */
  int64_t sh1[3] = {2, 1, 3};
  int64_t st1[3] = {3, 999, 1};
  t = valid_tensor();
  t.ndim = 3;
  t.shape = sh1;
  t.strides = st1;
  check_ok("size-1 stride 999", &t, 6, 24);
  st1[1] = -7;
  check_ok("size-1 stride -7", &t, 6, 24);
  st1[1] = 0;
  check_ok("size-1 stride 0", &t, 6, 24);
  int64_t sh14[2] = {1, 4};
  int64_t st14[2] = {123456, 1};
  t = valid_tensor();
  t.shape = sh14;
  t.strides = st14;
  check_ok("leading size-1", &t, 4, 16);
  int64_t sh41[2] = {4, 1};
  int64_t st41[2] = {1, 42};
  t.shape = sh41;
  t.strides = st41;
  check_ok("trailing size-1", &t, 4, 16);

  /* Zero elements: any strides, and NULL data. */
  int64_t sh0[3] = {2, 0, 3};
  int64_t st0[3] = {1, 2, 5};
  t = valid_tensor();
  t.ndim = 3;
  t.shape = sh0;
  t.strides = st0;
  check_ok("zero dim odd strides", &t, 0, 0);
  t.data = NULL;
  check_ok("zero dim NULL data", &t, 0, 0);
  t.strides = NULL;
  check_ok("zero dim NULL data NULL strides", &t, 0, 0);

  /* Strided: valid, but only for a copy (compact false). */
  int64_t t_strides[2] = {1, 2};   /* 2x3 transposed (column-major) */
  int64_t pad_strides[2] = {4, 1}; /* rows padded to 4 */
  int64_t neg_strides[2] = {-3, 1};
  int64_t bcast_strides[2] = {0, 1};
  t = valid_tensor();
  t.strides = t_strides;
  check_ok_layout("transposed strides", &t, 6, 24, false);
  t.strides = pad_strides;
  check_ok_layout("padded strides", &t, 6, 24, false);
  t.strides = neg_strides;
  check_ok_layout("negative strides", &t, 6, 24, false);
  t.strides = bcast_strides;
  check_ok_layout("broadcast stride 0", &t, 6, 24, false);
  int64_t s123[3] = {1, 2, 3};
  int64_t bad3[3] = {6, 3, 2}; /* compact would be {6,3,1} */
  t.ndim = 3;
  t.shape = s123;
  t.strides = bad3;
  check_ok_layout("inner stride 2", &t, 6, 24, false);

  /* Scalar: no shape needed. */
  t = valid_tensor();
  t.ndim = 0;
  t.shape = NULL;
  check_ok("scalar", &t, 1, 4);

  /* Rank DLP_MAX_DIMS. */
  int64_t sh32[DLP_MAX_DIMS];
  for (int i = 0; i < DLP_MAX_DIMS; i++) sh32[i] = i == 5 ? 3 : 1;
  t = valid_tensor();
  t.ndim = DLP_MAX_DIMS;
  t.shape = sh32;
  check_ok("rank DLP_MAX_DIMS", &t, 3, 12);

  /* The byte count at the edge of int64. */
  int64_t edge[1] = {INT64_MAX / 4};
  t = valid_tensor();
  t.ndim = 1;
  t.shape = edge;
  check_ok("f32 INT64_MAX/4", &t, INT64_MAX / 4, (uint64_t)(INT64_MAX / 4) * 4);
  int64_t edge8[1] = {INT64_MAX};
  t.dtype = dt(kDLUInt, 8, 1);
  t.shape = edge8;
  check_ok("u8 INT64_MAX", &t, INT64_MAX, (uint64_t)INT64_MAX);
  int64_t over8[2] = {INT64_C(1) << 32, INT64_C(1) << 31};
  t.ndim = 2;
  t.shape = over8;
  char msg[64];
  dlp_view v;
  assert_int_equal(dlp_check_tensor(&t, &v, msg, sizeof(msg)), DLP_EINVAL);

  /* device_id is not checked: any host memory. */
  t = valid_tensor();
  t.device.device_id = 3;
  check_ok("device_id 3", &t, 6, 24);
}

/* ---------------------------------------------------------------- managed */

static void check_managed(void** state) {
  int64_t shape[2] = {2, 3};
  char msg[128];
  dlp_view v;

  assert_int_equal(dlp_check_legacy(NULL, &v, msg, sizeof(msg)), DLP_EINVAL);
  assert_non_null(strstr(msg, "NULL"));
  assert_int_equal(dlp_check_versioned(NULL, &v, msg, sizeof(msg)), DLP_EINVAL);
  assert_non_null(strstr(msg, "NULL"));

  DLManagedTensorVersioned* m = NULL;
  assert_int_equal(
      dlp_export_versioned(g_buf, kF32, 2, shape, true, NULL, NULL, &m),
      DLP_OK);
  /* Another major version: refused before its tensor is looked at. */
  m->version.major = DLPACK_MAJOR_VERSION + 1;
  msg[0] = '\0';
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)), DLP_EVERSION);
  assert_non_null(strstr(msg, "version"));
  m->dl_tensor.ndim = -1;
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)), DLP_EVERSION);
  m->version.major = 0;
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)), DLP_EVERSION);
  /* A newer minor of the same major is fine. */
  m->dl_tensor.ndim = 2;
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION + 5;
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)), DLP_OK);
  assert_true(v.read_only);
  /* Other flag bits do not make it read-only. */
  m->flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)), DLP_OK);
  assert_false(v.read_only);
  /* The tensor's own errors come through. */
  m->dl_tensor.device.device_type = kDLCUDA;
  assert_int_equal(dlp_check_versioned(m, &v, msg, sizeof(msg)),
                   DLP_EUNSUPPORTED);
  assert_non_null(strstr(msg, "device"));
  m->deleter(m);

  DLManagedTensor* l = NULL;
  assert_int_equal(dlp_export_legacy(g_buf, kF32, 2, shape, NULL, NULL, &l),
                   DLP_OK);
  l->dl_tensor.byte_offset = 8;
  assert_int_equal(dlp_check_legacy(l, &v, msg, sizeof(msg)), DLP_EUNSUPPORTED);
  assert_non_null(strstr(msg, "byte_offset"));
  l->deleter(l);
}

/* ---------------------------------------------------------------- rank */

/* The limit is the kernels' (SK_MAX_DIMS, 16): above it a tensor is
 * refused with a message naming both numbers, on import and on export. */
static void rank_limit(void** state) {
  assert_int_equal(DLP_MAX_DIMS, 16);
  int64_t ones[20];
  for (int i = 0; i < 20; i++) ones[i] = 1;
  DLTensor t = valid_tensor();
  t.shape = ones;
  char msg[160];
  dlp_view v;
  for (int rank = 17; rank <= 20; rank++) {
    t.ndim = rank;
    assert_int_equal(dlp_check_tensor(&t, &v, msg, sizeof(msg)),
                     DLP_EUNSUPPORTED);
    char want[32];
    snprintf(want, sizeof(want), "rank %d", rank);
    assert_non_null(strstr(msg, want));
    assert_non_null(strstr(msg, "rank <= 16"));
    DLManagedTensor* m = NULL;
    assert_int_equal(dlp_export_legacy(g_buf, kF32, rank, ones, NULL, NULL, &m),
                     DLP_EINVAL);
    assert_null(m);
  }
  t.ndim = 16;
  assert_int_equal(dlp_check_tensor(&t, &v, msg, sizeof(msg)), DLP_OK);
  assert_int_equal(v.ndim, 16);
}

static void dtype_names(void** state) {
  static const struct {
    uint8_t code, bits;
    const char* want;
  } cases[] = {
      {kDLFloat, 16, "float16"},
      {kDLFloat, 32, "float32"},
      {kDLFloat, 64, "float64"},
      {kDLBfloat, 16, "bfloat16"},
      {kDLInt, 8, "int8"},
      {kDLInt, 16, "int16"},
      {kDLInt, 32, "int32"},
      {kDLInt, 64, "int64"},
      {kDLUInt, 8, "uint8"},
      {kDLUInt, 16, "uint16"},
      {kDLUInt, 32, "uint32"},
      {kDLUInt, 64, "uint64"},
      {kDLBool, 8, "bool"},
      {kDLComplex, 64, "complex64"},
      {kDLComplex, 128, "complex128"},
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(cases); i++) {
    const char* got = dlp_dtype_name(dt(cases[i].code, cases[i].bits, 1));
    assert_non_null(got);
    assert_string_equal(got, cases[i].want);
  }
  assert_null(dlp_dtype_name(dt(kDLFloat, 32, 2)));
  assert_null(dlp_dtype_name(dt(kDLFloat8_e4m3fn, 8, 1)));
  assert_null(dlp_dtype_name(dt(kDLOpaqueHandle, 64, 1)));
}

/* ---------------------------------------------------------------- plan */

/* TF's alignment (TF_TensorDefaultAlignment() is 64). */
static _Alignas(64) float g_abuf[64];

static int plan(const void* m, bool versioned, DLDataType want,
                dlp_copy_mode copy, dlp_import_plan* p, char* msg, size_t len) {
  msg[0] = '\0';
  return dlp_plan_import(m, versioned, want, copy, 64, p, msg, len);
}

/* A compact, aligned, writable tensor is shared unless a copy is asked
 * for; the plan's view and byte count are the tensor's. */
static void plan_share(void** state) {
  int64_t shape[2] = {4, 8};
  DLManagedTensor* m = NULL;
  assert_int_equal(dlp_export_legacy(g_abuf, kF32, 2, shape, NULL, NULL, &m),
                   DLP_OK);
  dlp_import_plan p;
  char msg[160];
  assert_int_equal(plan(m, false, kF32, DLP_COPY_NEVER, &p, msg, sizeof(msg)),
                   DLP_OK);
  assert_int_equal(p.action, DLP_IMPORT_SHARE);
  assert_null(p.unshareable);
  assert_ptr_equal(p.view.data, g_abuf);
  assert_int_equal(p.view.nbytes, 4 * 8 * 4);
  assert_int_equal(p.view.ndim, 2);
  assert_int_equal(p.view.shape[1], 8);
  assert_int_equal(
      plan(m, false, kF32, DLP_COPY_IF_NEEDED, &p, msg, sizeof(msg)), DLP_OK);
  assert_int_equal(p.action, DLP_IMPORT_SHARE);
  assert_int_equal(plan(m, false, kF32, DLP_COPY_ALWAYS, &p, msg, sizeof(msg)),
                   DLP_OK);
  assert_int_equal(p.action, DLP_IMPORT_COPY);
  assert_int_equal(p.view.nbytes, 4 * 8 * 4);
  /* The wrong dtype is refused, naming both. */
  assert_int_equal(plan(m, false, dt(kDLFloat, 64, 1), DLP_COPY_ALWAYS, &p, msg,
                        sizeof(msg)),
                   DLP_EINVAL);
  assert_non_null(strstr(msg, "holds float32, not float64"));
  /* A legacy tensor read as versioned is refused (its first field is not a
   * version 1.x), not misread. */
  dlp_import_plan q;
  assert_int_not_equal(
      plan(m, true, kF32, DLP_COPY_ALWAYS, &q, msg, sizeof(msg)), DLP_OK);
  m->deleter(m);
  /* Alignment must be a power of two. */
  assert_int_equal(dlp_plan_import(NULL, false, kF32, DLP_COPY_ALWAYS, 48, &p,
                                   msg, sizeof(msg)),
                   DLP_EINVAL);
  assert_int_equal(dlp_plan_import(NULL, false, kF32, DLP_COPY_ALWAYS, 0, &p,
                                   msg, sizeof(msg)),
                   DLP_EINVAL);
  /* The validator's errors come through. */
  assert_int_equal(
      plan(NULL, false, kF32, DLP_COPY_ALWAYS, &p, msg, sizeof(msg)),
      DLP_EINVAL);
  assert_non_null(strstr(msg, "NULL"));
}

/* Each reason sharing is impossible: copied when allowed, refused with the
 * reason when not. Empty tensors need neither. */
static void plan_copy_or_refuse(void** state) {
  int64_t shape[2] = {4, 4};
  int64_t strided[2] = {8, 2}; /* every other column */
  DLManagedTensorVersioned* m = NULL;
  assert_int_equal(
      dlp_export_versioned(g_abuf, kF32, 2, shape, false, NULL, NULL, &m),
      DLP_OK);
  DLTensor* t = &m->dl_tensor;
  int64_t* own_strides = t->strides;
  static const struct {
    const char* name;
    const char* word;
  } cases[] = {
      {"strided", "strides"},
      {"unaligned", "aligned"},
      {"read-only", "read-only"},
  };
  for (size_t i = 0; i < TU_ARRAY_SIZE(cases); i++) {
    t->strides = i == 0 ? strided : own_strides;
    t->data = i == 1 ? (void*)(g_abuf + 1) : (void*)g_abuf;
    m->flags = i == 2 ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
    dlp_import_plan p;
    char msg[200];
    assert_int_equal(
        plan(m, true, kF32, DLP_COPY_IF_NEEDED, &p, msg, sizeof(msg)), DLP_OK);
    if (p.action != DLP_IMPORT_COPY || p.unshareable == NULL ||
        strstr(p.unshareable, cases[i].word) == NULL) {
      print_message("%s: action %d, reason %s\n", cases[i].name, p.action,
                    p.unshareable ? p.unshareable : "(none)");
      fail();
    }
    assert_int_equal(p.view.nbytes, 16 * 4); /* the compact copy's bytes */
    assert_int_equal(plan(m, true, kF32, DLP_COPY_NEVER, &p, msg, sizeof(msg)),
                     DLP_EINVAL);
    if (strstr(msg, cases[i].word) == NULL ||
        strstr(msg, "without a copy") == NULL) {
      print_message("%s: message '%s'\n", cases[i].name, msg);
      fail();
    }
  }
  /* No elements: nothing to share or copy, whatever the layout. */
  int64_t empty[2] = {0, 4};
  t->shape = empty;
  for (int copy = DLP_COPY_NEVER; copy <= DLP_COPY_ALWAYS; copy++) {
    dlp_import_plan p;
    char msg[200];
    assert_int_equal(
        plan(m, true, kF32, (dlp_copy_mode)copy, &p, msg, sizeof(msg)), DLP_OK);
    assert_int_equal(p.action, DLP_IMPORT_EMPTY);
    assert_int_equal(p.view.nbytes, 0);
  }
  m->deleter(m); /* frees its own block; t's fields are not read */
}

int main(int argc, char** argv) {
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dtype_sizes),
      cmocka_unit_test(export_legacy_fields),
      cmocka_unit_test(export_versioned_fields),
      cmocka_unit_test(export_scalar_with_shape_pointer),
      cmocka_unit_test(export_null_release),
      cmocka_unit_test(export_independent),
      cmocka_unit_test(export_delete_other_thread),
      cmocka_unit_test(export_bad_args),
      cmocka_unit_test(round_trip),
      cmocka_unit_test(check_rejects),
      cmocka_unit_test(message_truncated),
      cmocka_unit_test(check_accepts),
      cmocka_unit_test(check_managed),
      cmocka_unit_test(gather_layouts),
      cmocka_unit_test(device_round_trip),
      cmocka_unit_test(rank_limit),
      cmocka_unit_test(dtype_names),
      cmocka_unit_test(plan_share),
      cmocka_unit_test(plan_copy_or_refuse),
  };
  return cmocka_run_group_tests_name("dlpack", tests, NULL, NULL);
}
