/*
 * common.c - the helpers every file of device_sim shares (as libuv's
 * uv-common.c): error strings, the invariant check's report, condition
 * variables on the monotonic clock, the clock itself, the floating-point
 * mode of device threads, the debugger's stop for stream failures. It calls
 * no other file of device_sim, so any of them may call it without making a
 * circle.
 *
 * No shared state, no locks: every function is safe from any thread (the
 * create-error message is thread-local).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "sim_internal.h"

void sim_invariant_failed(const char* file, int line, const char* what) {
  fprintf(stderr, "simdev: %s:%d: invariant failed: %s\n", file, line, what);
  abort();
}

void sim_pthread_failed(const char* file, int line, const char* what, int rc) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s returned %d (%s)", what, rc, strerror(rc));
  sim_invariant_failed(file, line, buf);
}

/* Empty on purpose: a place for a debugger to stop (docs/debugging.md, "gdb").
 * noinline and the asm keep the call and the symbol in optimised builds. */
__attribute__((noinline)) void sim_stream_failed(const sim_stream* s, int err,
                                                 const char* msg) {
  __asm__ volatile("" : : "r"(s), "r"(err), "r"(msg) : "memory");
}

const char* sim_strerror(int err) {
  switch (err) {
    case SIM_OK: return "ok";
    case SIM_EINVAL: return "invalid argument";
    case SIM_ENOMEM: return "out of device memory";
    case SIM_ESTREAM: return "stream is in an error state";
    case SIM_EFAILED: return "work item failed";
    case SIM_ENOTREADY: return "not ready";
    case SIM_ESYS: return "operating system error";
    default: return "unknown simdev error";
  }
}

void sim_cond_init(pthread_cond_t* c) {
  pthread_condattr_t attr;
  SIM_CHECK_PT(pthread_condattr_init(&attr));
  SIM_CHECK_PT(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC));
  SIM_CHECK_PT(pthread_cond_init(c, &attr));
  SIM_CHECK_PT(pthread_condattr_destroy(&attr));
}

uint64_t sim_now_ns(void) {
  struct timespec ts;
  SIM_CHECK(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sim_thread_fp_mode(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
#endif
}

unsigned sim_fp_mode_push(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned old = _mm_getcsr();
  _mm_setcsr(old | 0x8040u);
  return old;
#else
  return 0;
#endif
}

void sim_fp_mode_pop(unsigned saved) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(saved);
#else
  (void)saved;
#endif
}

static __thread char t_create_error[256];

void sim_create_error_set(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_create_error, sizeof(t_create_error), fmt, ap);
  va_end(ap);
}

const char* sim_create_error_text(void) {
  return t_create_error;
}
