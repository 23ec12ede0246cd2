/*
 * mini.c - the smallest correct PluggableDevice plugin (StreamExecutor C API,
 * TensorFlow 2.21), written to be read by plugin authors. It is also the
 * reference the conformance harness must pass, and the base of the mutant
 * plugins that each break one rule (mutant_*.c, see README.md).
 *
 * The "device" is the host: device memory is host memory, and each stream is
 * one worker thread running a FIFO queue of work items. That is enough to
 * honour every contract TF relies on:
 *   - work runs in stream order, after the enqueue returns, never at enqueue
 *     time (TF enqueues copies behind kernels it has not run yet);
 *   - events complete when the work recorded before them has run;
 *   - host callbacks run on the stream, get a live TF_Status, and an error
 *     they return sticks to the stream (get_stream_status reports it);
 *   - allocator stats and memory usage are counted, not made up.
 *
 * Locks: each device, stream and event has one mutex, and no code path
 * holds two of them at once, so there is no lock order to get wrong. Work
 * items run with no lock held, so a host callback may even enqueue more work
 * on its own stream (TF does not need that; CUDA forbids it).
 *
 * Build by hand (TF = site-packages/tensorflow):
 *   cc -std=c11 -shared -fPIC -fvisibility=hidden -I$TF/include mini.c \
 *     $TF/libtensorflow_framework.so.2 -lpthread -o libmini.so
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include "mini.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#ifndef MINI_DEVICES
#define MINI_DEVICES 1
#endif
/* A fixed capacity per device: what device_memory_usage reports as total. */
#define MINI_LIMIT ((int64_t)256 << 20)
/* TF aligns tensors to 64 bytes (Allocator::kAllocatorAlignment). The same
 * 64 bytes in front of each device allocation hold its size, because TF may
 * deallocate with the size field 0. */
#define MINI_ALIGN 64

/* A failing pthread call on a valid object is a broken invariant. */
#define MINI_CHECK(x)                                                        \
  do {                                                                       \
    if (!(x)) {                                                              \
      fprintf(stderr, "mini: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
              #x);                                                           \
      abort();                                                               \
    }                                                                        \
  } while (0)
#define LOCK(mu) MINI_CHECK(pthread_mutex_lock(mu) == 0)
#define UNLOCK(mu) MINI_CHECK(pthread_mutex_unlock(mu) == 0)
#define WAIT(cv, mu) MINI_CHECK(pthread_cond_wait(cv, mu) == 0)
#define BROADCAST(cv) MINI_CHECK(pthread_cond_broadcast(cv) == 0)

/* Defined only in mutant builds (mini.h). */
extern void mini_mutate(SE_PlatformRegistrationParams* params)
    __attribute__((weak));
void (*mini_mutate_se)(SP_StreamExecutor* se);

/* ------------------------------------------------------------ objects */

typedef struct mini_device {
  pthread_mutex_t mu;  /* guards every field below */
  pthread_cond_t idle; /* broadcast when pending drops to 0 */
  int64_t pending;     /* items enqueued on any stream, not finished */
  int64_t in_use, peak, num_allocs, largest;
} mini_device;

/* Events count generations: record_event starts generation ++recorded and
 * enqueues an item that sets done to it. The event is complete when done
 * has caught up (a never-recorded event: 0 >= 0). Reused events, TF's
 * normal case, need nothing more. */
struct SP_Event_st {
  pthread_mutex_t mu; /* guards every field below */
  pthread_cond_t cv;  /* broadcast when done advances */
  uint64_t recorded, done;
  int refs; /* the owner's, plus one per queued item naming the event */
};

typedef enum { W_COPY, W_SET8, W_SET32, W_CALLBACK, W_MARK, W_WAIT } w_kind;

typedef struct w_item {
  struct w_item* next;
  w_kind kind;
  void* dst;
  const void* src;
  uint64_t n;
  uint32_t pattern;
  SE_StatusCallbackFn fn;
  void* arg;
  SP_Event ev;
  uint64_t gen;
} w_item;

struct SP_Stream_st {
  mini_device* dev;
  pthread_t thread;
  pthread_mutex_t mu;  /* guards every field below but cb_status */
  pthread_cond_t work; /* the worker waits: item queued or stop */
  pthread_cond_t idle; /* hosts wait: queue empty and worker not busy */
  w_item *head, *tail;
  int busy, stop;
  TF_Status* error;     /* sticky: the first failure, else OK */
  TF_Status* cb_status; /* handed to host callbacks; worker thread only */
};

static mini_device* dev_of(const SP_Device* device) {
  return device->device_handle;
}

/* ------------------------------------------------------------ events */

static SP_Event event_new(void) {
  SP_Event ev = calloc(1, sizeof(*ev));
  if (ev == NULL) return NULL;
  MINI_CHECK(pthread_mutex_init(&ev->mu, NULL) == 0);
  MINI_CHECK(pthread_cond_init(&ev->cv, NULL) == 0);
  ev->refs = 1;
  return ev;
}

static void event_unref(SP_Event ev) {
  LOCK(&ev->mu);
  int left = --ev->refs;
  UNLOCK(&ev->mu);
  if (left > 0) return;
  pthread_cond_destroy(&ev->cv);
  pthread_mutex_destroy(&ev->mu);
  free(ev);
}

/* ------------------------------------------------------------ streams */

/* Runs one item on the stream's worker, with no lock held. */
static void run_item(SP_Stream s, w_item* it) {
  switch (it->kind) {
    case W_COPY: memcpy(it->dst, it->src, it->n); break;
    case W_SET8: memset(it->dst, (int)it->pattern, it->n); break;
    case W_SET32:
      for (uint64_t i = 0; i < it->n / 4; i++) {
        memcpy((char*)it->dst + 4 * i, &it->pattern, 4);
      }
      break;
    case W_CALLBACK:
      /* TF's callback writes its result into the status it is given. */
      TF_SetStatus(s->cb_status, TF_OK, "");
      it->fn(it->arg, s->cb_status);
      if (TF_GetCode(s->cb_status) != TF_OK) {
        LOCK(&s->mu);
        if (TF_GetCode(s->error) == TF_OK) {
          TF_SetStatus(s->error, TF_GetCode(s->cb_status),
                       TF_Message(s->cb_status));
        }
        UNLOCK(&s->mu);
      }
      break;
    case W_MARK:
      LOCK(&it->ev->mu);
      if (it->gen > it->ev->done) it->ev->done = it->gen;
      BROADCAST(&it->ev->cv);
      UNLOCK(&it->ev->mu);
      event_unref(it->ev);
      break;
    case W_WAIT:
      /* Blocks this stream only: the worker is its whole "device". */
      LOCK(&it->ev->mu);
      while (it->ev->done < it->gen) WAIT(&it->ev->cv, &it->ev->mu);
      UNLOCK(&it->ev->mu);
      event_unref(it->ev);
      break;
  }
}

/* The worker: FIFO until stop is set and the queue is drained, so that
 * destroy_stream never drops enqueued work. An error does not stop the
 * queue: events behind it must still complete, or TF would wait forever. */
static void* worker_main(void* arg) {
  SP_Stream s = arg;
  LOCK(&s->mu);
  for (;;) {
    while (s->head == NULL && !s->stop) WAIT(&s->work, &s->mu);
    w_item* it = s->head;
    if (it == NULL) break;
    s->head = it->next;
    if (s->head == NULL) s->tail = NULL;
    s->busy = 1;
    UNLOCK(&s->mu);
    run_item(s, it);
    free(it);
    LOCK(&s->dev->mu);
    if (--s->dev->pending == 0) BROADCAST(&s->dev->idle);
    UNLOCK(&s->dev->mu);
    LOCK(&s->mu);
    s->busy = 0;
    if (s->head == NULL) BROADCAST(&s->idle);
  }
  UNLOCK(&s->mu);
  return NULL;
}

static w_item* item_new(w_kind kind, TF_Status* status) {
  w_item* it = calloc(1, sizeof(*it));
  if (it == NULL && status != NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "mini: no memory for work");
  }
  if (it != NULL) it->kind = kind;
  return it;
}

/* Takes ownership of it; cannot fail, so callers allocate first. */
static void enqueue(SP_Stream s, w_item* it) {
  LOCK(&s->dev->mu);
  s->dev->pending++;
  UNLOCK(&s->dev->mu);
  LOCK(&s->mu);
  if (s->tail != NULL) {
    s->tail->next = it;
  } else {
    s->head = it;
  }
  s->tail = it;
  MINI_CHECK(pthread_cond_signal(&s->work) == 0);
  UNLOCK(&s->mu);
}

static void stream_free(SP_Stream s) {
  pthread_cond_destroy(&s->idle);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->mu);
  TF_DeleteStatus(s->cb_status);
  TF_DeleteStatus(s->error);
  free(s);
}

static void create_stream(const SP_Device* device, SP_Stream* stream,
                          TF_Status* status) {
  static atomic_uint next_id;
  SP_Stream s = calloc(1, sizeof(*s));
  if (s == NULL) goto nomem;
  s->dev = dev_of(device);
  s->error = TF_NewStatus();
  s->cb_status = TF_NewStatus();
  MINI_CHECK(pthread_mutex_init(&s->mu, NULL) == 0);
  MINI_CHECK(pthread_cond_init(&s->work, NULL) == 0);
  MINI_CHECK(pthread_cond_init(&s->idle, NULL) == 0);
  if (pthread_create(&s->thread, NULL, worker_main, s) != 0) {
    stream_free(s);
    goto nomem;
  }
  /* "info threads" in gdb then says which thread is which stream. */
  char name[16];
  snprintf(name, sizeof(name), "mini-s%u", atomic_fetch_add(&next_id, 1));
  pthread_setname_np(s->thread, name);
  *stream = s;
  return;
nomem:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "mini: cannot create a stream");
}

/* TF blocks until the stream is done first; draining anyway makes a
 * destroy with queued work safe rather than a use-after-free. */
static void destroy_stream(const SP_Device* device, SP_Stream s) {
  LOCK(&s->mu);
  s->stop = 1;
  MINI_CHECK(pthread_cond_signal(&s->work) == 0);
  UNLOCK(&s->mu);
  MINI_CHECK(pthread_join(s->thread, NULL) == 0);
  stream_free(s);
}

static void get_stream_status(const SP_Device* device, SP_Stream s,
                              TF_Status* status) {
  LOCK(&s->mu);
  TF_SetStatus(status, TF_GetCode(s->error), TF_Message(s->error));
  UNLOCK(&s->mu);
}

static void block_host_until_done(const SP_Device* device, SP_Stream s,
                                  TF_Status* status) {
  LOCK(&s->mu);
  while (s->head != NULL || s->busy) WAIT(&s->idle, &s->mu);
  TF_SetStatus(status, TF_GetCode(s->error), TF_Message(s->error));
  UNLOCK(&s->mu);
}

/* ------------------------------------------------------------ event API */

/* Enqueues "mark generation N complete" on s; it is owned by the queue. */
static void record_on(SP_Stream s, SP_Event ev, w_item* it) {
  LOCK(&ev->mu);
  it->gen = ++ev->recorded;
  ev->refs++;
  UNLOCK(&ev->mu);
  it->ev = ev;
  enqueue(s, it);
}

/* Makes s wait for the generation recorded last; nothing if it is done. */
static void wait_on(SP_Stream s, SP_Event ev, w_item* it) {
  LOCK(&ev->mu);
  it->gen = ev->recorded;
  int done = ev->done >= it->gen;
  if (!done) ev->refs++;
  UNLOCK(&ev->mu);
  if (done) {
    free(it);
    return;
  }
  it->ev = ev;
  enqueue(s, it);
}

static void create_event(const SP_Device* device, SP_Event* event,
                         TF_Status* status) {
  *event = event_new();
  if (*event == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "mini: cannot create event");
  }
}

/* Queued items naming the event keep it alive until they ran. */
static void destroy_event(const SP_Device* device, SP_Event ev) {
  event_unref(ev);
}

static SE_EventStatus get_event_status(const SP_Device* device, SP_Event ev) {
  LOCK(&ev->mu);
  int done = ev->done >= ev->recorded;
  UNLOCK(&ev->mu);
  return done ? SE_EVENT_COMPLETE : SE_EVENT_PENDING;
}

static void record_event(const SP_Device* device, SP_Stream s, SP_Event ev,
                         TF_Status* status) {
  w_item* it = item_new(W_MARK, status);
  if (it != NULL) record_on(s, ev, it);
}

static void wait_for_event(const SP_Device* const device, SP_Stream s,
                           SP_Event ev, TF_Status* const status) {
  w_item* it = item_new(W_WAIT, status);
  if (it != NULL) wait_on(s, ev, it);
}

static void block_host_for_event(const SP_Device* device, SP_Event ev,
                                 TF_Status* status) {
  LOCK(&ev->mu);
  while (ev->done < ev->recorded) WAIT(&ev->cv, &ev->mu);
  UNLOCK(&ev->mu);
}

/* Stream::WaitFor(Stream*): dependent's later work waits for what was
 * enqueued on other so far, through a private event. */
static void create_stream_dependency(const SP_Device* device,
                                     SP_Stream dependent, SP_Stream other,
                                     TF_Status* status) {
  SP_Event ev = event_new();
  w_item* mark = item_new(W_MARK, status);
  w_item* wait = item_new(W_WAIT, status);
  if (ev != NULL && mark != NULL && wait != NULL) {
    record_on(other, ev, mark);
    wait_on(dependent, ev, wait);
  } else {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "mini: no memory for work");
    free(mark);
    free(wait);
  }
  if (ev != NULL) event_unref(ev);
}

static TF_Bool host_callback(const SP_Device* device, SP_Stream s,
                             SE_StatusCallbackFn fn, void* arg) {
  w_item* it = item_new(W_CALLBACK, NULL);
  if (it == NULL) return 0; /* false: "not enqueued", TF reports it */
  it->fn = fn;
  it->arg = arg;
  enqueue(s, it);
  return 1;
}

static void synchronize_all_activity(const SP_Device* device,
                                     TF_Status* status) {
  mini_device* d = dev_of(device);
  LOCK(&d->mu);
  while (d->pending > 0) WAIT(&d->idle, &d->mu);
  UNLOCK(&d->mu);
}

/* ------------------------------------------------------------ copies */

/* Device pointers are host pointers here; TF passes slices as opaque plus
 * an offset, which needs no special case. */
static int bad_args(void* dst, const void* src, uint64_t size,
                    TF_Status* status) {
  if (size == 0 || (dst != NULL && src != NULL)) return 0;
  TF_SetStatus(status, TF_INVALID_ARGUMENT, "mini: NULL buffer in a copy");
  return 1;
}

/* A copy or a memset on stream s; runs after the work queued before it. */
static void enqueue_data(SP_Stream s, w_kind kind, void* dst, const void* src,
                         uint32_t pattern, uint64_t size, TF_Status* status) {
  if (size == 0 || bad_args(dst, src, size, status)) return;
  w_item* it = item_new(kind, status);
  if (it == NULL) return;
  it->dst = dst;
  it->src = src;
  it->pattern = pattern;
  it->n = size;
  enqueue(s, it);
}

static void memcpy_dtoh(const SP_Device* device, SP_Stream s, void* host_dst,
                        const SP_DeviceMemoryBase* src, uint64_t size,
                        TF_Status* status) {
  enqueue_data(s, W_COPY, host_dst, src->opaque, 0, size, status);
}

static void memcpy_htod(const SP_Device* device, SP_Stream s,
                        SP_DeviceMemoryBase* dst, const void* host_src,
                        uint64_t size, TF_Status* status) {
  enqueue_data(s, W_COPY, dst->opaque, host_src, 0, size, status);
}

static void memcpy_dtod(const SP_Device* device, SP_Stream s,
                        SP_DeviceMemoryBase* dst,
                        const SP_DeviceMemoryBase* src, uint64_t size,
                        TF_Status* status) {
  enqueue_data(s, W_COPY, dst->opaque, src->opaque, 0, size, status);
}

/* Synchronous copies: on the calling thread, done when the call returns. */
static void copy_now(void* dst, const void* src, uint64_t size,
                     TF_Status* status) {
  if (size > 0 && !bad_args(dst, src, size, status)) memcpy(dst, src, size);
}

static void sync_memcpy_dtoh(const SP_Device* device, void* host_dst,
                             const SP_DeviceMemoryBase* src, uint64_t size,
                             TF_Status* status) {
  copy_now(host_dst, src->opaque, size, status);
}

static void sync_memcpy_htod(const SP_Device* device, SP_DeviceMemoryBase* dst,
                             const void* host_src, uint64_t size,
                             TF_Status* status) {
  copy_now(dst->opaque, host_src, size, status);
}

static void mem_zero(const SP_Device* device, SP_Stream s,
                     SP_DeviceMemoryBase* location, uint64_t size,
                     TF_Status* status) {
  enqueue_data(s, W_SET8, location->opaque, location->opaque, 0, size, status);
}

static void memset8(const SP_Device* device, SP_Stream s,
                    SP_DeviceMemoryBase* location, uint8_t pattern,
                    uint64_t size, TF_Status* status) {
  enqueue_data(s, W_SET8, location->opaque, location->opaque, pattern, size,
               status);
}

/* size is in bytes, a multiple of 4. */
static void memset32(const SP_Device* device, SP_Stream s,
                     SP_DeviceMemoryBase* location, uint32_t pattern,
                     uint64_t size, TF_Status* status) {
  if (size % 4 != 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "mini: memset32 size is not a multiple of 4 bytes");
    return;
  }
  enqueue_data(s, W_SET32, location->opaque, location->opaque, pattern, size,
               status);
}

/* ------------------------------------------------------------ memory */

/* Over the limit (or out of host memory): opaque NULL, which TF reports as
 * out of memory. */
static void allocate(const SP_Device* device, uint64_t size,
                     int64_t memory_space, SP_DeviceMemoryBase* mem) {
  mini_device* d = dev_of(device);
  mem->opaque = NULL;
  mem->size = 0;
  if (size > (uint64_t)MINI_LIMIT) return;
  uint64_t total = (MINI_ALIGN + size + MINI_ALIGN - 1) / MINI_ALIGN;
  char* base = aligned_alloc(MINI_ALIGN, total * MINI_ALIGN);
  if (base == NULL) return;
  int64_t n = (int64_t)size;
  LOCK(&d->mu);
  int fits = d->in_use + n <= MINI_LIMIT;
  if (fits) {
    d->in_use += n;
    d->num_allocs++;
    if (d->in_use > d->peak) d->peak = d->in_use;
    if (n > d->largest) d->largest = n;
  }
  UNLOCK(&d->mu);
  if (!fits) {
    free(base);
    return;
  }
  memcpy(base, &size, sizeof(size));
  mem->opaque = base + MINI_ALIGN;
  mem->size = size;
}

static void deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  if (mem->opaque == NULL) return; /* permitted by TF */
  char* base = (char*)mem->opaque - MINI_ALIGN;
  uint64_t size;
  memcpy(&size, base, sizeof(size));
  mini_device* d = dev_of(device);
  LOCK(&d->mu);
  d->in_use -= (int64_t)size;
  UNLOCK(&d->mu);
  free(base);
}

/* Pinned staging memory for TF: plain host memory is as good here. */
static void* host_memory_allocate(const SP_Device* device, uint64_t size) {
  uint64_t n = (size + MINI_ALIGN - 1) / MINI_ALIGN * MINI_ALIGN;
  return aligned_alloc(MINI_ALIGN, n > 0 ? n : MINI_ALIGN);
}

static void host_memory_deallocate(const SP_Device* device, void* mem) {
  free(mem);
}

static TF_Bool get_allocator_stats(const SP_Device* device,
                                   SP_AllocatorStats* stats) {
  mini_device* d = dev_of(device);
  LOCK(&d->mu);
  stats->num_allocs = d->num_allocs;
  stats->bytes_in_use = d->in_use;
  stats->peak_bytes_in_use = d->peak;
  stats->largest_alloc_size = d->largest;
  UNLOCK(&d->mu);
  stats->has_bytes_limit = 1;
  stats->bytes_limit = MINI_LIMIT;
  return 1;
}

/* TF sizes its allocators from this; it must return true. */
static TF_Bool device_memory_usage(const SP_Device* device, int64_t* free_b,
                                   int64_t* total) {
  mini_device* d = dev_of(device);
  LOCK(&d->mu);
  *total = MINI_LIMIT;
  *free_b = MINI_LIMIT - d->in_use;
  UNLOCK(&d->mu);
  return 1;
}

/* ------------------------------------------------------------ platform */

static void get_device_count(const SP_Platform* platform, int* count,
                             TF_Status* status) {
  *count = MINI_DEVICES;
}

/* TF calls this lazily, from any thread, once per ordinal. */
static void create_device(const SP_Platform* platform,
                          SE_CreateDeviceParams* params, TF_Status* status) {
  if (params->ordinal < 0 || params->ordinal >= MINI_DEVICES) {
    char msg[80];
    snprintf(msg, sizeof(msg), "mini: device ordinal %d not in [0, %d)",
             (int)params->ordinal, MINI_DEVICES);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return;
  }
  mini_device* d = calloc(1, sizeof(*d));
  if (d == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "mini: cannot create device");
    return;
  }
  MINI_CHECK(pthread_mutex_init(&d->mu, NULL) == 0);
  MINI_CHECK(pthread_cond_init(&d->idle, NULL) == 0);
  params->device->ordinal = params->ordinal;
  params->device->device_handle = d;
  params->device->hardware_name = "mini (host memory)";
}

/* The caller destroys the device's streams and events first. */
static void destroy_device(const SP_Platform* platform, SP_Device* device) {
  mini_device* d = dev_of(device);
  pthread_cond_destroy(&d->idle);
  pthread_mutex_destroy(&d->mu);
  free(d);
  device->device_handle = NULL;
}

/* Every SP_DeviceFns entry is optional: TF treats NULL as "unknown". */
static void create_device_fns(const SP_Platform* platform,
                              SE_CreateDeviceFnsParams* params,
                              TF_Status* status) {
  params->device_fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
}

static void destroy_device_fns(const SP_Platform* platform,
                               SP_DeviceFns* device_fns) {}

/* Timers and unified memory are optional and left NULL. */
static void create_stream_executor(const SP_Platform* platform,
                                   SE_CreateStreamExecutorParams* params,
                                   TF_Status* status) {
  SP_StreamExecutor* se = params->stream_executor;
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->allocate = allocate;
  se->deallocate = deallocate;
  se->host_memory_allocate = host_memory_allocate;
  se->host_memory_deallocate = host_memory_deallocate;
  se->get_allocator_stats = get_allocator_stats;
  se->device_memory_usage = device_memory_usage;
  se->create_stream = create_stream;
  se->destroy_stream = destroy_stream;
  se->create_stream_dependency = create_stream_dependency;
  se->get_stream_status = get_stream_status;
  se->create_event = create_event;
  se->destroy_event = destroy_event;
  se->get_event_status = get_event_status;
  se->record_event = record_event;
  se->wait_for_event = wait_for_event;
  se->memcpy_dtoh = memcpy_dtoh;
  se->memcpy_htod = memcpy_htod;
  se->memcpy_dtod = memcpy_dtod;
  se->sync_memcpy_dtoh = sync_memcpy_dtoh;
  se->sync_memcpy_htod = sync_memcpy_htod;
  se->block_host_for_event = block_host_for_event;
  se->block_host_until_done = block_host_until_done;
  se->synchronize_all_activity = synchronize_all_activity;
  se->mem_zero = mem_zero;
  se->memset = memset8;
  se->memset32 = memset32;
  se->host_callback = host_callback;
  if (mini_mutate_se != NULL) mini_mutate_se(se);
}

static void destroy_stream_executor(const SP_Platform* platform,
                                    SP_StreamExecutor* se) {}

/* TF 2.21 never calls create_timer_fns but calls this at teardown. */
static void destroy_timer_fns(const SP_Platform* platform,
                              SP_TimerFns* timer_fns) {}

static void destroy_platform(SP_Platform* platform) {}
static void destroy_platform_fns(SP_PlatformFns* platform_fns) {}

/* The only exported symbol. TF pre-fills every struct_size and owns the
 * structs: fill them in place, never replace the pointers. */
__attribute__((visibility("default"))) void SE_InitPlugin(
    SE_PlatformRegistrationParams* params, TF_Status* status) {
  params->major_version = SE_MAJOR;
  params->minor_version = SE_MINOR;
  params->patch_version = SE_PATCH;
  params->destroy_platform = destroy_platform;
  params->destroy_platform_fns = destroy_platform_fns;

  SP_Platform* p = params->platform;
  p->struct_size = SP_PLATFORM_STRUCT_SIZE;
  p->name = "MINI"; /* name and type must match [A-Z][A-Z_]* */
  p->type = "MINI"; /* users write /device:MINI:0 */
  p->supports_unified_memory = 0;
  /* TF's BFC allocator would size itself from device_memory_usage minus a
   * 255 MiB reserve, leaving 1 MiB of 256: allocate per tensor instead. */
  p->use_bfc_allocator = 0;
  p->force_memory_growth = 0;

  SP_PlatformFns* f = params->platform_fns;
  f->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  f->get_device_count = get_device_count;
  f->create_device = create_device;
  f->destroy_device = destroy_device;
  f->create_device_fns = create_device_fns;
  f->destroy_device_fns = destroy_device_fns;
  f->create_stream_executor = create_stream_executor;
  f->destroy_stream_executor = destroy_stream_executor;
  f->destroy_timer_fns = destroy_timer_fns;
  if (mini_mutate != NULL) mini_mutate(params);
}
