/*
 * legacy.c - simdev_xla_legacy_matmul (JAX target simdev_legacy_matmul): one
 * target in XLA's legacy custom-call convention, beside the typed-FFI
 * handlers of the other files, so that plugin authors can compare the two
 * (docs/xla-custom-calls.md, "The legacy convention").
 *
 * The convention, as XLA:CPU in jaxlib 0.10.2 calls it:
 *   void fn(void* out, const void** in, const char* opaque,
 *           size_t opaque_len, XlaCustomCallStatus* status);
 * in holds one pointer per operand; out is the result's buffer (for a tuple
 * result, an array of one pointer per element). Nothing says what the
 * buffers are: no dtypes, no shapes. What the function needs to know about
 * them travels in opaque, bytes fixed when the program is built. JAX:
 *   jax.ffi.register_ffi_target("simdev_legacy_matmul", capsule,
 *                               platform="cpu", api_version=0)
 *   jax.ffi.ffi_call("simdev_legacy_matmul", out_type,
 *                    custom_call_api_version=3,
 *                    legacy_backend_config="m=2,k=3,n=4,dtype=f32")(a, b)
 * Version 3 (API_VERSION_STATUS_RETURNING_UNIFIED) because XLA:CPU passes
 * opaque to no other legacy version: 1 (the seed's fn(out, in)) and 2
 * (fn(out, in, status)) still run, but get neither opaque nor shapes, and
 * XLA logs at compile time that they are being removed. XLA trusts the
 * call site: a function registered with api_version=0 is called with the
 * signature of the call site's version, unchecked.
 *
 * opaque: exactly "m=<m>,k=<k>,n=<n>,dtype=<f32|f64>", decimal sizes in
 * [0, SA_BLAS_MAX]: c[m, n] = a[m, k] x b[k, n], row-major, as
 * simdev_matmul without transposes or batch dims.
 *
 * Errors cannot reach XLA. The convention's error path is
 * XlaCustomCallStatusSetFailure(status, message, length), a function inside
 * XLA that no library of jaxlib 0.10.2 exports (tests/jax/test_jax_legacy.py
 * checks that it still does not), so a plugin has no way to call it, and
 * status is an XLA C++ object a plugin must not write. A bad opaque is
 * therefore reported on stderr, and out is left unwritten: its size is known
 * only from opaque. An opaque that parses but does not match the buffers
 * makes this function read and write out of bounds; the convention gives no
 * way to notice. The caller builds opaque from the operands' shapes (the
 * example's and the test's wrapper do, after checking them). That is why
 * simdev's real targets are typed-FFI handlers.
 *
 * Synchronous: the result must be complete when the function returns, and
 * there is no future to complete later, so the product runs here on the
 * calling thread (sa_gemm, spread over device_sim's pool), not on the simdev
 * stream: a stream failure could not be reported either. The calling thread
 * is whichever runs the program at that point: one of XLA:CPU's, or
 * simdev0-s0 when the call follows a simdev call in the program (completing
 * a simdev future runs XLA's next ops on the worker; docs/xla-custom-calls.md,
 * "Asynchronous handlers"). Either way denormals are flushed: XLA:CPU runs
 * its program with FTZ and DAZ set (MXCSR 0x9fe2 seen from a legacy target
 * on jaxlib 0.10.2; tests/jax/test_jax_legacy.py pins the effect), like
 * simdev's threads and sa_gemm's pool helpers. This function does not change
 * the calling thread's floating-point mode.
 *
 * Thread contract: any thread, also concurrently; the only shared state is
 * the once-flag of sa_blas_init.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sx_internal.h"

#define LEGACY_TARGET "simdev_legacy_matmul"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* Reads "<key>=<decimal>" at *p (< end), then the separator sep (0: none).
 * False with why filled on anything else. */
static bool parse_size(const char** p, const char* end, const char* key,
                       char sep, int64_t* out, char* why, size_t len) {
  size_t kl = strlen(key);
  if ((size_t)(end - *p) < kl + 1 || memcmp(*p, key, kl) != 0 ||
      (*p)[kl] != '=') {
    snprintf(why, len, "expected '%s='", key);
    return false;
  }
  const char* s = *p + kl + 1;
  int64_t v = 0;
  const char* d = s;
  while (d < end && *d >= '0' && *d <= '9') {
    v = v * 10 + (*d - '0');
    if (v > SA_BLAS_MAX) {
      snprintf(why, len, "%s is larger than %d", key, SA_BLAS_MAX);
      return false;
    }
    d++;
  }
  if (d == s) {
    snprintf(why, len, "%s needs a decimal size", key);
    return false;
  }
  if (sep != 0) {
    if (d == end || *d != sep) {
      snprintf(why, len, "expected '%c' after %s=%lld", sep, key, (long long)v);
      return false;
    }
    d++;
  }
  *out = v;
  *p = d;
  return true;
}

/* Copies n bytes of src into dst (n + 1 bytes), each non-printable byte
 * (a NUL included) as '?', and terminates it: opaque is bytes, not text. */
static void shown_bytes(char* dst, const char* src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = isprint((unsigned char)src[i]) ? src[i] : '?';
  dst[n] = '\0';
}

/* Parses opaque into m, k, n and dt; false with why filled. */
static bool parse_opaque(const char* opaque, size_t len, int64_t* m, int64_t* k,
                         int64_t* n, sa_dtype* dt, char* why, size_t why_len) {
  if (opaque == NULL || len == 0) {
    snprintf(why, why_len, "opaque is empty");
    return false;
  }
  const char* p = opaque;
  const char* end = opaque + len;
  if (!parse_size(&p, end, "m", ',', m, why, why_len) ||
      !parse_size(&p, end, "k", ',', k, why, why_len) ||
      !parse_size(&p, end, "n", ',', n, why, why_len))
    return false;
  static const char key[] = "dtype=";
  size_t rest = (size_t)(end - p);
  if (rest < sizeof(key) - 1 || memcmp(p, key, sizeof(key) - 1) != 0) {
    snprintf(why, why_len, "expected 'dtype=' after n");
    return false;
  }
  p += sizeof(key) - 1;
  rest = (size_t)(end - p);
  if (rest == 3 && memcmp(p, "f32", 3) == 0) {
    *dt = SA_F32;
  } else if (rest == 3 && memcmp(p, "f64", 3) == 0) {
    *dt = SA_F64;
  } else {
    char got[17];
    shown_bytes(got, p, rest > 16 ? 16 : rest);
    snprintf(why, why_len, "dtype must be f32 or f64, got '%s'", got);
    return false;
  }
  /* m * k, k * n and m * n elements, in bytes, must fit in int64 (each
   * size is below 2^31, so a product of two fits; the bytes may not). */
  size_t es = sa_dtype_size(*dt);
  int64_t bytes;
  if (__builtin_mul_overflow(*m * *k, (int64_t)es, &bytes) ||
      __builtin_mul_overflow(*k * *n, (int64_t)es, &bytes) ||
      __builtin_mul_overflow(*m * *n, (int64_t)es, &bytes)) {
    snprintf(why, why_len, "the operands' byte sizes overflow int64");
    return false;
  }
  return true;
}

/* The report of a call that cannot be done (see the top): one line, opaque
 * shown with non-printable bytes as '?'. */
static void report(const char* opaque, size_t len, const char* why) {
  char shown[80];
  size_t n = len < sizeof(shown) - 1 ? len : sizeof(shown) - 1;
  shown_bytes(shown, opaque, n);
  fprintf(stderr,
          "%s: bad opaque \"%s%s\": %s (expected "
          "\"m=<m>,k=<k>,n=<n>,dtype=f32|f64\"); the result is left "
          "unwritten: the legacy convention has no error path a plugin can "
          "reach\n",
          LEGACY_TARGET, shown, len > n ? "..." : "", why);
}

void simdev_xla_legacy_matmul(void* out, const void** in, const char* opaque,
                              size_t opaque_len, void* status) {
  (void)status;
  char why[160];
  int64_t m, k, n;
  sa_dtype dt;
  if (!parse_opaque(opaque, opaque_len, &m, &k, &n, &dt, why, sizeof(why))) {
    report(opaque != NULL ? opaque : "", opaque != NULL ? opaque_len : 0, why);
    return;
  }
  if (m == 0 || n == 0) return; /* an empty result: nothing to write */
  if (out == NULL) {
    report(opaque, opaque_len, "XLA passed no result buffer");
    return;
  }
  size_t es = sa_dtype_size(dt);
  if (k == 0) { /* an empty contraction: zeros */
    memset(out, 0, (size_t)(m * n) * es);
    return;
  }
  if (in == NULL || in[0] == NULL || in[1] == NULL) {
    report(opaque, opaque_len, "XLA passed no operand buffers");
    return;
  }
  SIM_CHECK_PT(pthread_once(&blas_once, sa_blas_init));
  sa_gemm(dt, false, false, m, n, k, in[0], k, in[1], n, 0., out, n, NULL);
}
