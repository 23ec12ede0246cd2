/*
 * sx_internal.h - what the files of src/xla/ share.
 *
 * Who calls whom (no circle): the handler files (matmul.c, conv.c,
 * eltwise.c) call frame.c (decoding and validating the call frame, making
 * errors) and runtime.c (the device, the stream, launching a job);
 * runtime.c calls frame.c for its errors; frame.c calls nobody here.
 *
 * A handler's life: sx_begin (metadata request, stage, arity), the sx_*
 * checks of buffers and attributes, then either a result written at once
 * (zero sizes) or sx_job_new + sx_launch. Every check returns NULL or the
 * XLA_FFI_Error to return; messages start with the target name.
 */
#ifndef SIMDEV_XLA_SX_INTERNAL_H_
#define SIMDEV_XLA_SX_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arith/sa.h"
#include "device_sim/sim.h"
#include "sx.h"

/* Highest rank a buffer may have (XLA's own limit is far above what any
 * program uses; a bound keeps shapes in fixed arrays and messages short). */
#define SX_MAX_RANK 32

/* One handler call, on the calling thread. */
typedef struct sx_call {
  XLA_FFI_CallFrame* frame;
  const XLA_FFI_Api* api;
  const char* target; /* "simdev_matmul": the start of every message */
} sx_call;

/* ---- frame.c: the call frame ------------------------------------------- */

/* Answers XLA's metadata request if frame is one (true: return NULL then).
 * Writes only metadata->api_version's major and minor version. */
bool sx_metadata(XLA_FFI_CallFrame* frame);

/* Starts a call: checks the frame's size and stage and that it has nargs
 * buffer operands and nrets buffer results. Fills *c. */
XLA_FFI_Error* sx_begin(sx_call* c, XLA_FFI_CallFrame* frame,
                        const char* target, int64_t nargs, int64_t nrets);

/* An error "<target>: <fmt...>" with code. */
XLA_FFI_Error* sx_error(const sx_call* c, XLA_FFI_Error_Code code,
                        const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error with msg as is, through api (any thread). */
XLA_FFI_Error* sx_error_msg(const XLA_FFI_Api* api, XLA_FFI_Error_Code code,
                            const char* msg);

/* Out of host memory for a job: the error to return. */
XLA_FFI_Error* sx_no_memory(const sx_call* c);

/* XLA's name of a dtype ("f32", "s32", "pred"). */
const char* sx_dtype_name(XLA_FFI_DataType dt);
/* "[2,3,4]" into buf. */
void sx_fmt_dims(char* buf, size_t len, const int64_t* dims, int64_t rank);

/* Operand i / result i (sx_begin checked that they exist). */
XLA_FFI_Buffer* sx_arg(const sx_call* c, int64_t i);
XLA_FFI_Buffer* sx_ret(const sx_call* c, int64_t i);

/* A checked buffer: what = "operand a" / "result c", used in messages. */
typedef struct sx_buf {
  const char* what;
  void* data;
  int64_t rank;
  const int64_t* dims;
  int64_t elems; /* product of dims; fits with its bytes in int64 */
} sx_buf;

/* Checks b's dtype against *dt: when *dt is 0, b must be float32 or
 * float64 and *dt becomes its type; otherwise b must have that type
 * (other = the operand it must match, for the message, or NULL). Also checks
 * rank
 * (<= SX_MAX_RANK), dims (>= 0), that its byte size fits in int64 and that
 * data is there when it has elements. */
XLA_FFI_Error* sx_buffer(const sx_call* c, const char* what,
                         const XLA_FFI_Buffer* b, sa_dtype* dt,
                         const char* other, sx_buf* out);
/* b must have rank `rank` (why: "like a", or "" for none). */
XLA_FFI_Error* sx_rank(const sx_call* c, const sx_buf* b, int64_t rank,
                       const char* why);
/* b must have rank >= min. */
XLA_FFI_Error* sx_min_rank(const sx_call* c, const sx_buf* b, int64_t min);
/* b's dims must be `dims` (rank b->rank). */
XLA_FFI_Error* sx_shape(const sx_call* c, const sx_buf* b, const int64_t* dims);
/* The first nb dims of b and ref must be equal (the vmap batch dims). */
XLA_FFI_Error* sx_batch(const sx_call* c, const sx_buf* b, const sx_buf* ref,
                        int64_t nb);
/* Product of dims[0..n). Only for checked buffers (no overflow). */
int64_t sx_prod(const int64_t* dims, int64_t n);

/* ---- frame.c: attributes (sorted by name, found by binary search) ------- */

/* Every attribute of the frame must be one of names (n of them). */
XLA_FFI_Error* sx_attrs_known(const sx_call* c, const char* const* names,
                              int n);
XLA_FFI_Error* sx_attr_bool(const sx_call* c, const char* name, bool* out);
XLA_FFI_Error* sx_attr_f32(const sx_call* c, const char* name, float* out);
/* A string attribute; *s is not NUL-terminated. */
XLA_FFI_Error* sx_attr_str(const sx_call* c, const char* name, const char** s,
                           size_t* len);
/* An s64 array of exactly n elements. */
XLA_FFI_Error* sx_attr_i64s(const sx_call* c, const char* name, size_t n,
                            int64_t* out);

/* ---- runtime.c: the device, the stream, jobs ---------------------------- */

typedef struct sx_job sx_job;

/* A job's arithmetic, on the stream's worker: returns XLA_FFI_Error_Code_OK
 * or the code of its failure with a message (without the target name) in
 * msg. dev is the device, for scratch from its region (sim_mem_alloc). */
typedef XLA_FFI_Error_Code (*sx_run_fn)(sx_job* j, sim_device* dev, char* msg,
                                        size_t len);

/* Header of every job; a handler's job struct starts with it. */
struct sx_job {
  sim_work work; /* first: the stream sees only this */
  sx_run_fn run;
  /* Set by sx_launch: */
  const char* target;
  const XLA_FFI_Api* api;
  XLA_FFI_Future* future; /* async; NULL with SIMDEV_SYNC */
  sim_device* dev;
  sim_stream* stream;
  struct sx_wait* wait; /* SIMDEV_SYNC: the handler waiting; else NULL */
  /* Written by the worker: */
  XLA_FFI_Error_Code code;
  char msg[480];
};

/* A zeroed job of `size` bytes (the handler's struct), run = run; NULL when
 * out of host memory. Owned by the caller until sx_launch. */
void* sx_job_new(size_t size, sx_run_fn run);

/* Queues j (taking ownership: it is freed after its done, or now on
 * error): asynchronous (a future in c->frame->future, NULL returned) or,
 * with SIMDEV_SYNC=1, waited for (its error returned). Creates the device
 * and stream on first use (an error naming the setting if that fails). */
XLA_FFI_Error* sx_launch(const sx_call* c, sx_job* j);

#endif /* SIMDEV_XLA_SX_INTERNAL_H_ */
