/*
 * fakeffi.h - a hand-built XLA FFI for driving libsimdev_xla.so's handlers
 * without XLA or Python: the XLA_FFI_Api functions the handlers call
 * (errors and futures; every other entry is NULL, so a handler calling one
 * crashes the test), and call frames built field by field.
 *
 * Futures record the name of the thread that completed them (the contract:
 * the stream worker "simdev0-s0"), and waiting for one has a generous
 * timeout so that a lost completion fails the test instead of hanging it.
 * cmocka asserts only on the main thread.
 */
#ifndef SIMDEV_TESTS_XLA_FAKEFFI_H_
#define SIMDEV_TESTS_XLA_FAKEFFI_H_

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka.h relies on the headers above (stdarg, stddef, setjmp). */
#include <cmocka.h>

#include "sx.h"

#define FF_MAX 8       /* operands, results, attributes per frame */
#define FF_MAX_RANK 40 /* > the handlers' limit of 32 */

/* The fake API (errors and futures only). */
extern const XLA_FFI_Api ff_api;

/* Errors and futures created and not yet destroyed (a leak check). */
int ff_live_errors(void);
int ff_live_futures(void);

/* A call frame and the storage it points into. */
typedef struct ff_frame {
  XLA_FFI_CallFrame cf;
  int nargs, nrets, nattrs;
  XLA_FFI_ArgType atypes[FF_MAX];
  void* args[FF_MAX];
  XLA_FFI_Buffer abufs[FF_MAX];
  int64_t adims[FF_MAX][FF_MAX_RANK];
  XLA_FFI_RetType rtypes[FF_MAX];
  void* rets[FF_MAX];
  XLA_FFI_Buffer rbufs[FF_MAX];
  int64_t rdims[FF_MAX][FF_MAX_RANK];
  /* attributes in the order added; ff_finish sorts them by name */
  struct ff_attr {
    char name[64];
    XLA_FFI_ByteSpan span;
    XLA_FFI_AttrType type;
    XLA_FFI_Scalar scalar;
    XLA_FFI_Array array;
    XLA_FFI_ByteSpan str;
    char strbuf[64];
    unsigned char value[16];
    int64_t arr[8];
  } at[FF_MAX];
  XLA_FFI_AttrType attypes[FF_MAX];
  XLA_FFI_ByteSpan* atnames[FF_MAX];
  void* atvals[FF_MAX];
} ff_frame;

/* An empty frame for the execute stage with ff_api. */
void ff_init(ff_frame* f);
/* Operand / result: dtype, data, rank and dims (copied). */
XLA_FFI_Buffer* ff_arg(ff_frame* f, XLA_FFI_DataType dt, void* data, int rank,
                       const int64_t* dims);
XLA_FFI_Buffer* ff_ret(ff_frame* f, XLA_FFI_DataType dt, void* data, int rank,
                       const int64_t* dims);
void ff_attr_bool(ff_frame* f, const char* name, bool v);
void ff_attr_f32(ff_frame* f, const char* name, float v);
void ff_attr_i64(ff_frame* f, const char* name, int64_t v); /* s64 scalar */
void ff_attr_str(ff_frame* f, const char* name, const char* v);
/* s64 array (dt S64) or another dtype's array of n 8-byte slots. */
void ff_attr_i64s(ff_frame* f, const char* name, int n, const int64_t* v);
void ff_attr_array(ff_frame* f, const char* name, XLA_FFI_DataType dt, int n,
                   const void* v, size_t elem_size);
/* Removes attribute `name` (tests of a missing one). */
void ff_attr_remove(ff_frame* f, const char* name);

/* What a call ended with. */
typedef struct ff_result {
  XLA_FFI_Error_Code code;
  char msg[1024];
  bool returned_error; /* the handler returned it (no future) */
  bool had_future;
  char completer[32]; /* thread that completed the future */
} ff_result;

/* Sorts the attributes, points the frame at its storage, calls h, and if it
 * returned a future waits for it (asserting on a timeout). Also asserts
 * that an error return comes without a future. */
ff_result ff_call(XLA_FFI_Handler* h, ff_frame* f);

/* Calls h without waiting: the future (or NULL) is returned; *err gets a
 * returned error's code (OK if none). */
XLA_FFI_Future* ff_call_async(XLA_FFI_Handler* h, ff_frame* f,
                              XLA_FFI_Error_Code* err);
/* Waits for fut (asserting on a timeout), fills r, frees fut. */
void ff_wait(XLA_FFI_Future* fut, ff_result* r);
/* The same without cmocka (for other threads): 0, or -1 on a timeout or a
 * future completed more than once. */
int ff_wait_quiet(XLA_FFI_Future* fut, ff_result* r);
/* 1 if fut is complete now (no wait). */
int ff_is_complete(XLA_FFI_Future* fut);

/* fn(arg) runs once, on the thread that completes the next future, right
 * after completing it: where XLA runs the rest of its program. */
void ff_set_continuation(void (*fn)(void*), void* arg);

/* fn(arg) runs once, inside the next XLA_FFI_Future_Create, on the
 * handler's thread: a handler stopped there is between taking the device
 * and queuing its job (it counts as a user of the runtime). */
void ff_set_create_hook(void (*fn)(void*), void* arg);

/* SIMDEV_TEST_SCALE (valgrind runs): divides sizes and counts. */
int ff_scale(void);

/* The metadata request XLA makes at registration; returns the handler's
 * answer in *major / *minor and whether it returned NULL. */
bool ff_metadata(XLA_FFI_Handler* h, int* major, int* minor,
                 uint32_t* traits_after, int64_t* type_id_after);

/* Asserts r failed with code and a message containing want (and starting
 * with prefix). */
#define ff_assert_error(r, c, prefix, want) \
  ff_assert_error_at((r), (c), (prefix), (want), __FILE__, __LINE__)
void ff_assert_error_at(const ff_result* r, XLA_FFI_Error_Code code,
                        const char* prefix, const char* want, const char* file,
                        int line);

/* The four convolution attributes; pads may be NULL (zeros). */
void ff_conv_attrs(ff_frame* f, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                   const char* padding, const int64_t* pads);

/* Element i of a float32 / float64 buffer, as a double. */
static inline double ff_get(const void* p, XLA_FFI_DataType dt, int64_t i) {
  return dt == XLA_FFI_DataType_F32 ? ((const float*)p)[i]
                                    : ((const double*)p)[i];
}

/* Calls h on f and asserts it returned (not through a future) an error of
 * code whose message starts with `prefix` (a variable in scope) and
 * contains want. */
#define FF_EXPECT(h, f, code, want)               \
  do {                                            \
    ff_result r_ = ff_call((h), &(f));            \
    assert_true(r_.returned_error);               \
    ff_assert_error(&r_, (code), prefix, (want)); \
  } while (0)

/* A cmocka group teardown: simdev_xla_shutdown (every thread joined, the
 * device released, for valgrind's leak check). */
int ff_teardown_shutdown(void** state);

/* Random values in [-1, 1) from a fixed seed (tests are reproducible). */
void ff_fill(void* p, XLA_FFI_DataType dt, int64_t n, uint64_t* seed);

#endif /* SIMDEV_TESTS_XLA_FAKEFFI_H_ */
