/*
 * executor.c - every SP_StreamExecutor callback, mapped onto device_sim.
 * se_fill_stream_executor (at the end) fills the table in header order.
 *
 * Threads: TF calls these from its own threads (executor, copy, polling
 * threads) concurrently; device_sim is thread-safe, and nothing here keeps
 * state outside the handles.
 *
 * Asynchronous callbacks validate on the caller's thread (bad pointers and
 * sizes come back as a TF_Status right away) and enqueue on the stream; they
 * never block on queued work. The sync_memcpy_* callbacks behave like CUDA's
 * synchronous cuMemcpy: they first wait for every stream of the device(s)
 * involved, so a synchronous copy never reads a buffer a queued kernel is
 * still writing, then copy on the calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "se/se_internal.h"

/* ---- validation helpers ------------------------------------------------ */

/* Device memory passed by TF must lie in this device's region; dtod copies
 * may name another simdev device (see check_any_simdev). */
static int check_device_range(const SP_Device* device, const void* p,
                              uint64_t size, const char* what,
                              TF_Status* status) {
  if (size == 0) return 0;
  if (p == NULL || !sim_mem_contains(se_device(device), p, size)) {
    se_set_statusf(
        status, SIM_EINVAL, "%s: [%p, +%llu) is not memory of device %s", what,
        p, (unsigned long long)size, sim_device_name(se_device(device)));
    return -1;
  }
  return 0;
}

static int check_host_ptr(const void* p, uint64_t size, const char* what,
                          TF_Status* status) {
  if (size > 0 && p == NULL) {
    se_set_statusf(status, SIM_EINVAL, "%s: NULL host pointer for %llu bytes",
                   what, (unsigned long long)size);
    return -1;
  }
  return 0;
}

static void set_enqueue_status(TF_Status* status, int err, const char* what) {
  se_set_status(status, err, what, NULL);
}

/* ---- allocation -------------------------------------------------------- */

static void allocate(const SP_Device* device, uint64_t size,
                     int64_t memory_space, SP_DeviceMemoryBase* mem) {
  mem->struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE;
  mem->ext = NULL;
  mem->payload = 0;
  /* Only the default memory space exists. NULL tells TF "out of memory":
   * a kernel's output allocation then fails with ResourceExhausted, TF's own
   * host->device copy path with "Dst tensor is not initialized" (Internal),
   * as on GPUs. */
  mem->opaque =
      memory_space == 0 ? sim_mem_alloc(se_device(device), size) : NULL;
  mem->size = mem->opaque ? size : 0;
}

static void deallocate(const SP_Device* device, SP_DeviceMemoryBase* mem) {
  sim_mem_free(se_device(device), mem->opaque);
  mem->opaque = NULL;
  mem->size = 0;
}

static void* host_memory_allocate(const SP_Device* device, uint64_t size) {
  return sim_host_alloc(se_device(device), size);
}

static void host_memory_deallocate(const SP_Device* device, void* mem) {
  sim_host_free(se_device(device), mem);
}

static TF_Bool get_allocator_stats(const SP_Device* device,
                                   SP_AllocatorStats* stats) {
  sim_mem_stats st;
  sim_mem_get_stats(se_device(device), &st);
  if (!SE_HAS_FIELD(stats, SP_AllocatorStats, largest_free_block_bytes))
    return 0; /* an older, shorter struct: we cannot fill it faithfully */
  stats->num_allocs = (int64_t)st.num_allocs;
  stats->bytes_in_use = (int64_t)st.bytes_in_use;
  stats->peak_bytes_in_use = (int64_t)st.peak_bytes_in_use;
  stats->largest_alloc_size = (int64_t)st.largest_alloc;
  stats->has_bytes_limit = 1;
  stats->bytes_limit = (int64_t)st.bytes_limit;
  /* The region is handed to jemalloc monotonically: reserved never shrinks,
   * so its peak is its current value. */
  stats->bytes_reserved = (int64_t)st.bytes_reserved;
  stats->peak_bytes_reserved = (int64_t)st.bytes_reserved;
  stats->has_bytes_reservable_limit = 1;
  stats->bytes_reservable_limit = (int64_t)st.bytes_limit;
  /* The untouched tail of the region is one free block; freed blocks inside
   * jemalloc may be larger, so this is a lower bound, never an invention. */
  stats->largest_free_block_bytes =
      (int64_t)(st.bytes_limit - st.bytes_reserved);
  return 1;
}

static TF_Bool device_memory_usage(const SP_Device* device, int64_t* free,
                                   int64_t* total) {
  sim_mem_stats st;
  sim_mem_get_stats(se_device(device), &st);
  *total = (int64_t)st.bytes_limit;
  *free = (int64_t)(st.bytes_limit - st.bytes_in_use);
  return 1;
}

/* ---- streams ----------------------------------------------------------- */

static void create_stream(const SP_Device* device, SP_Stream* stream,
                          TF_Status* status) {
  struct SP_Stream_st* st = calloc(1, sizeof(*st));
  int err = st ? sim_stream_create(se_device(device), &st->s) : SIM_ENOMEM;
  if (err != SIM_OK) {
    free(st);
    *stream = NULL;
    se_set_status(status, err, "create_stream", NULL);
    return;
  }
  *stream = st;
  TF_SetStatus(status, TF_OK, "");
}

sim_stream* se_stream_sim(SP_Stream stream) {
  return stream != NULL ? stream->s : NULL;
}

static void destroy_stream(const SP_Device* device, SP_Stream stream) {
  if (stream == NULL) return;
  sim_stream_destroy(stream->s); /* runs what is queued, joins the worker */
  free(stream);
}

static void create_stream_dependency(const SP_Device* device,
                                     SP_Stream dependent, SP_Stream other,
                                     TF_Status* status) {
  int err = sim_stream_wait_stream(dependent->s, other->s);
  set_enqueue_status(status, err, "create_stream_dependency");
}

static void get_stream_status(const SP_Device* device, SP_Stream stream,
                              TF_Status* status) {
  char msg[256];
  int err = sim_stream_status(stream->s, msg, sizeof(msg));
  se_set_status(status, err, "stream failed earlier", msg);
}

/* ---- events ------------------------------------------------------------ */

static void create_event(const SP_Device* device, SP_Event* event,
                         TF_Status* status) {
  struct SP_Event_st* ev = calloc(1, sizeof(*ev));
  int err = ev ? sim_event_create(&ev->e) : SIM_ENOMEM;
  if (err != SIM_OK) {
    free(ev);
    *event = NULL;
    se_set_status(status, err, "create_event", NULL);
    return;
  }
  *event = ev;
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_event(const SP_Device* device, SP_Event event) {
  if (event == NULL) return;
  sim_event_destroy(event->e); /* queued markers keep their own reference */
  free(event);
}

static SE_EventStatus get_event_status(const SP_Device* device,
                                       SP_Event event) {
  switch (sim_event_query(event->e)) {
    case SIM_EVENT_COMPLETE: return SE_EVENT_COMPLETE;
    case SIM_EVENT_PENDING: return SE_EVENT_PENDING;
    case SIM_EVENT_ERROR: return SE_EVENT_ERROR;
  }
  return SE_EVENT_UNKNOWN;
}

static void record_event(const SP_Device* device, SP_Stream stream,
                         SP_Event event, TF_Status* status) {
  int err = sim_event_record(event->e, stream->s);
  /* SIM_EFAILED: SIMDEV_FAULTS refused it; its message says which rule. */
  char msg[256] = "";
  if (err == SIM_EFAILED) sim_faults_last(msg, sizeof(msg));
  se_set_status(status, err, "record_event", msg);
}

static void wait_for_event(const SP_Device* const device, SP_Stream stream,
                           SP_Event event, TF_Status* const status) {
  set_enqueue_status(status, sim_stream_wait_event(stream->s, event->e),
                     "wait_for_event");
}

/* ---- timers ------------------------------------------------------------ */

static void create_timer(const SP_Device* device, SP_Timer* timer,
                         TF_Status* status) {
  struct SP_Timer_st* t = calloc(1, sizeof(*t));
  int err = t ? sim_timer_create(&t->t) : SIM_ENOMEM;
  if (err != SIM_OK) {
    free(t);
    *timer = NULL;
    se_set_status(status, err, "create_timer", NULL);
    return;
  }
  *timer = t;
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_timer(const SP_Device* device, SP_Timer timer) {
  if (timer == NULL) return;
  sim_timer_destroy(timer->t);
  free(timer);
}

static void start_timer(const SP_Device* device, SP_Stream stream,
                        SP_Timer timer, TF_Status* status) {
  set_enqueue_status(status, sim_timer_start(timer->t, stream->s),
                     "start_timer");
}

static void stop_timer(const SP_Device* device, SP_Stream stream,
                       SP_Timer timer, TF_Status* status) {
  set_enqueue_status(status, sim_timer_stop(timer->t, stream->s), "stop_timer");
}

/* SP_TimerFns.nanoseconds has no error channel: a timer that was never
 * started and stopped reads 0 (and waits for a queued stop to run). */
uint64_t se_timer_nanoseconds(SP_Timer timer) {
  uint64_t ns = 0;
  if (timer == NULL || sim_timer_elapsed_ns(timer->t, &ns) != SIM_OK) return 0;
  return ns;
}

/* ---- copies ------------------------------------------------------------ */

static void memcpy_dtoh(const SP_Device* device, SP_Stream stream,
                        void* host_dst, const SP_DeviceMemoryBase* device_src,
                        uint64_t size, TF_Status* status) {
  if (check_host_ptr(host_dst, size, "memcpy_dtoh", status) ||
      check_device_range(device, device_src->opaque, size, "memcpy_dtoh",
                         status))
    return;
  set_enqueue_status(
      status,
      sim_memcpy_async_kind(stream->s, host_dst, device_src->opaque, size,
                            SIM_TRACE_MEMCPY_D2H),
      "memcpy_dtoh");
}

static void memcpy_htod(const SP_Device* device, SP_Stream stream,
                        SP_DeviceMemoryBase* device_dst, const void* host_src,
                        uint64_t size, TF_Status* status) {
  if (check_host_ptr(host_src, size, "memcpy_htod", status) ||
      check_device_range(device, device_dst->opaque, size, "memcpy_htod",
                         status))
    return;
  set_enqueue_status(
      status,
      sim_memcpy_async_kind(stream->s, device_dst->opaque, host_src, size,
                            SIM_TRACE_MEMCPY_H2D),
      "memcpy_htod");
}

/* For a copy between two simdev devices TF passes only one of them (the
 * stream's); both pointers must be simdev memory, of any device. The copy
 * itself is an ordinary memmove on the stream (through the aliases of
 * discrete devices: sim_memcpy_async_kind translates). */
static int check_any_simdev(const SP_Device* device, const void* p,
                            uint64_t size, const char* what,
                            TF_Status* status) {
  if (size == 0 || (p != NULL && sim_mem_contains(se_device(device), p, size)))
    return 0;
  if (p != NULL && se_owner_of(p, size) != NULL) return 0;
  se_set_statusf(status, SIM_EINVAL,
                 "%s: [%p, +%llu) is not memory of any simdev device", what, p,
                 (unsigned long long)size);
  return -1;
}

static void memcpy_dtod(const SP_Device* device, SP_Stream stream,
                        SP_DeviceMemoryBase* device_dst,
                        const SP_DeviceMemoryBase* device_src, uint64_t size,
                        TF_Status* status) {
  if (check_any_simdev(device, device_dst->opaque, size, "memcpy_dtod dst",
                       status) ||
      check_any_simdev(device, device_src->opaque, size, "memcpy_dtod src",
                       status))
    return;
  set_enqueue_status(
      status,
      sim_memcpy_async_kind(stream->s, device_dst->opaque, device_src->opaque,
                            size, SIM_TRACE_MEMCPY_D2D),
      "memcpy_dtod");
}

/* Waits for the device owning p (if it is simdev memory). */
static int sync_owner(const SP_Device* device, const void* p, uint64_t size) {
  sim_device* owner = se_owner_of(p, size);
  if (owner == NULL || owner == se_device(device)) return SIM_OK;
  return sim_device_synchronize(owner);
}

static void sync_copy(const SP_Device* device, void* dst, const void* src,
                      uint64_t size, const char* what, TF_Status* status) {
  int err = sim_device_synchronize(se_device(device));
  if (err == SIM_OK) err = sync_owner(device, dst, size);
  if (err == SIM_OK) err = sync_owner(device, src, size);
  if (err != SIM_OK) {
    se_set_status(status, err, what, "a stream of the device failed earlier");
    return;
  }
  /* Discrete device memory is reached through its alias. */
  if (size > 0) memmove(sim_mem_alias(dst), sim_mem_alias(src), size);
  TF_SetStatus(status, TF_OK, "");
}

static void sync_memcpy_dtoh(const SP_Device* device, void* host_dst,
                             const SP_DeviceMemoryBase* device_src,
                             uint64_t size, TF_Status* status) {
  if (check_host_ptr(host_dst, size, "sync_memcpy_dtoh", status) ||
      check_device_range(device, device_src->opaque, size, "sync_memcpy_dtoh",
                         status))
    return;
  sync_copy(device, host_dst, device_src->opaque, size, "sync_memcpy_dtoh",
            status);
}

static void sync_memcpy_htod(const SP_Device* device,
                             SP_DeviceMemoryBase* device_dst,
                             const void* host_src, uint64_t size,
                             TF_Status* status) {
  if (check_host_ptr(host_src, size, "sync_memcpy_htod", status) ||
      check_device_range(device, device_dst->opaque, size, "sync_memcpy_htod",
                         status))
    return;
  sync_copy(device, device_dst->opaque, host_src, size, "sync_memcpy_htod",
            status);
}

static void sync_memcpy_dtod(const SP_Device* device,
                             SP_DeviceMemoryBase* device_dst,
                             const SP_DeviceMemoryBase* device_src,
                             uint64_t size, TF_Status* status) {
  if (check_any_simdev(device, device_dst->opaque, size, "sync_memcpy_dtod dst",
                       status) ||
      check_any_simdev(device, device_src->opaque, size, "sync_memcpy_dtod src",
                       status))
    return;
  sync_copy(device, device_dst->opaque, device_src->opaque, size,
            "sync_memcpy_dtod", status);
}

/* ---- synchronization --------------------------------------------------- */

static void block_host_for_event(const SP_Device* device, SP_Event event,
                                 TF_Status* status) {
  int err = sim_event_synchronize(event->e);
  se_set_status(status, err, "block_host_for_event",
                "the event was recorded on a stream in error");
}

static void block_host_until_done(const SP_Device* device, SP_Stream stream,
                                  TF_Status* status) {
  int err = sim_stream_synchronize(stream->s);
  if (err == SIM_OK) {
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  char msg[256];
  sim_stream_status(stream->s, msg, sizeof(msg));
  se_set_status(status, err, "block_host_until_done", msg);
}

static void synchronize_all_activity(const SP_Device* device,
                                     TF_Status* status) {
  int err = sim_device_synchronize(se_device(device));
  se_set_status(status, err, "synchronize_all_activity",
                "a stream of the device failed earlier");
}

/* ---- memset ------------------------------------------------------------ */

static void mem_zero(const SP_Device* device, SP_Stream stream,
                     SP_DeviceMemoryBase* location, uint64_t size,
                     TF_Status* status) {
  if (check_device_range(device, location->opaque, size, "mem_zero", status))
    return;
  set_enqueue_status(status,
                     sim_memset8_async(stream->s, location->opaque, 0, size),
                     "mem_zero");
}

static void memset8(const SP_Device* device, SP_Stream stream,
                    SP_DeviceMemoryBase* location, uint8_t pattern,
                    uint64_t size, TF_Status* status) {
  if (check_device_range(device, location->opaque, size, "memset", status))
    return;
  set_enqueue_status(
      status, sim_memset8_async(stream->s, location->opaque, pattern, size),
      "memset");
}

static void memset32(const SP_Device* device, SP_Stream stream,
                     SP_DeviceMemoryBase* location, uint32_t pattern,
                     uint64_t size, TF_Status* status) {
  if (check_device_range(device, location->opaque, size, "memset32", status))
    return;
  if (size % 4 != 0 || (uintptr_t)location->opaque % 4 != 0) {
    se_set_statusf(status, SIM_EINVAL,
                   "memset32: size %llu (bytes) must be a multiple of 4 and "
                   "the address 4-byte aligned",
                   (unsigned long long)size);
    return;
  }
  set_enqueue_status(
      status, sim_memset32_async(stream->s, location->opaque, pattern, size),
      "memset32");
}

/* ---- host callbacks ---------------------------------------------------- */

typedef struct host_cb {
  SE_StatusCallbackFn fn;
  void* arg;
} host_cb;

/* Runs on the stream's worker. TF's callback gets a live TF_Status (it may
 * write an error into it); a non-OK result becomes the stream's sticky
 * error, visible through get_stream_status. */
static int run_host_cb(void* p, int stream_status, char* msg, size_t len) {
  host_cb* cb = p;
  TF_Status* st = TF_NewStatus();
  cb->fn(cb->arg, st);
  int rc = 0;
  if (TF_GetCode(st) != TF_OK) {
    snprintf(msg, len, "host callback: %s", TF_Message(st));
    rc = -1;
  }
  TF_DeleteStatus(st);
  free(cb);
  return rc;
}

static TF_Bool host_callback(const SP_Device* device, SP_Stream stream,
                             SE_StatusCallbackFn callback_fn,
                             void* callback_arg) {
  if (stream == NULL || callback_fn == NULL) return 0;
  host_cb* cb = malloc(sizeof(*cb));
  if (cb == NULL) return 0;
  cb->fn = callback_fn;
  cb->arg = callback_arg;
  if (sim_host_callback_async(stream->s, run_host_cb, cb) != SIM_OK) {
    free(cb);
    return 0;
  }
  return 1;
}

/* ---- the table --------------------------------------------------------- */

void se_fill_stream_executor(SP_StreamExecutor* se) {
  se->struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  se->ext = NULL;
  se->allocate = allocate;
  se->deallocate = deallocate;
  se->host_memory_allocate = host_memory_allocate;
  se->host_memory_deallocate = host_memory_deallocate;
  se->unified_memory_allocate = NULL; /* supports_unified_memory = 0 */
  se->unified_memory_deallocate = NULL;
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
  se->create_timer = create_timer;
  se->destroy_timer = destroy_timer;
  se->start_timer = start_timer;
  se->stop_timer = stop_timer;
  se->memcpy_dtoh = memcpy_dtoh;
  se->memcpy_htod = memcpy_htod;
  se->memcpy_dtod = memcpy_dtod;
  se->sync_memcpy_dtoh = sync_memcpy_dtoh;
  se->sync_memcpy_htod = sync_memcpy_htod;
  se->sync_memcpy_dtod = sync_memcpy_dtod;
  se->block_host_for_event = block_host_for_event;
  se->block_host_until_done = block_host_until_done;
  se->synchronize_all_activity = synchronize_all_activity;
  se->mem_zero = mem_zero;
  se->memset = memset8;
  se->memset32 = memset32;
  se->host_callback = host_callback;
}
