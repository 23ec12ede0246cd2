/*
 * sk_internal.h - what the framework's own files share and op families do
 * not see (tests/layering.py allows only sk.h, f16.h and fused.h outside
 * src/kernels/framework/).
 */
#ifndef SIMDEV_KERNELS_SK_INTERNAL_H_
#define SIMDEV_KERNELS_SK_INTERNAL_H_

#include <stdatomic.h>

#include "kernels/framework/sk.h"

/* One launch (launch.c owns its life cycle; fail.c its failure). */
struct sk_launch {
  sim_work work; /* first: the stream sees only this */
  TF_OpKernelContext* ctx;
  void* done; /* our copy of TF's callback (sk_done_take) */
  sim_stream* stream;
  sk_run_fn run;
  const char* label;
  void* args;
  void (*args_cleanup)(void* args); /* see sk_args_cleanup */
  TF_Tensor** held; /* inputs, outputs and temporaries kept alive */
  int nheld, capheld;
  /* A synchronous kernel's launch (compute_sync), the items its compute
   * function queued at once (sk_work_now, sk_copy_now: the launch's own
   * item then goes behind them), and the trace names they carry. */
  bool sync;
  int nnow;
  uint32_t trace_name, trace_type;
  TF_Code code; /* first failure (TF_OK if none) */
  char msg[512];
  /* Status for the TF calls of this launch, made once per launch. Calls stop
   * at the first failure, so it is only ever reused while it is OK. */
  TF_Status* st;
  /* Who completes the launch (see watch_or_hand_over, launch.c). */
  _Atomic int state;
};

/* Launch states. QUEUED: the launching thread is still watching; the worker
 * moves it to RAN and leaves completion to that thread. HANDED_OVER: the
 * launcher stopped watching (or never did); the worker completes. Exactly
 * one side wins the compare-and-swap from QUEUED. */
enum { L_QUEUED = 0, L_RAN = 1, L_HANDED_OVER = 2 };

/* fail.c: a TF_Status failure into the launch ("what: message"); true
 * when st is OK. */
bool sk_status_move(sk_launch* l, TF_Status* st, const char* what);

/* shape.c: the one check of a shape before TF sees it (sk.h, "shapes"):
 * rank, dims, element count, bytes (elsize 0: not checked), and the
 * kernel's own count s->n. False after failing the launch. launch.c calls
 * it in sk_output, sk_output_forward and sk_output_alias. */
bool sk_shape_check(sk_launch* l, const sk_shape* s, size_t elsize);

#endif /* SIMDEV_KERNELS_SK_INTERNAL_H_ */
