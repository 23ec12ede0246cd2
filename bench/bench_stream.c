/*
 * bench_stream.c - what one stream of the plugin costs, seen through the
 * StreamExecutor C API exactly as TensorFlow drives it.
 *
 * Usage: bench_stream <path to libsimdev.so> [latency runs, default 20000]
 *
 * The plugin is dlopen'ed and SE_InitPlugin is called with TF-style structs
 * (struct_size pre-filled, TF owning the memory); then one device, its stream
 * executor and one stream are created. Printed side by side:
 *   (a) enqueue -> completion latency of an empty work item (a host
 *       callback), as the host sees it, three ways of waiting;
 *   (b) memcpy_htod / memcpy_dtoh bandwidth against plain memcpy on the same
 *       buffers. Plugin and memcpy samples alternate (and swap order each
 *       repetition) so clock or thermal drift hits both alike; the ratio is
 *       taken per repetition and its median, min and max reported.
 * This is a benchmark, not a test: it prints numbers and fails only when the
 * plugin reports an error or a copy comes back wrong.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

typedef void (*init_plugin_fn)(SE_PlatformRegistrationParams*, TF_Status*);

/* Everything the benchmark drives, set up by open_plugin. */
typedef struct bench {
  void* dso;
  SE_PlatformRegistrationParams params;
  SP_Platform platform;
  SP_PlatformFns platform_fns;
  SP_Device device;
  SP_StreamExecutor se;
  SP_Stream stream;
  SP_Event event;
  TF_Status* status;
} bench;

static void die(const char* what, const char* detail) {
  fprintf(stderr, "bench_stream: %s%s%s\n", what, detail ? ": " : "",
          detail ? detail : "");
  exit(1);
}

/* Exits with the plugin's message if the last call failed. */
static void check_status(const bench* b, const char* call) {
  if (TF_GetCode(b->status) != TF_OK) die(call, TF_Message(b->status));
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Sorts v in place; q in [0, 1]. */
static double quantile(double* v, size_t n, double q) {
  qsort(v, n, sizeof(*v), cmp_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i];
}

/* ------------------------------------------------------------ setup */

static void open_plugin(bench* b, const char* path) {
  memset(b, 0, sizeof(*b));
  b->status = TF_NewStatus();
  b->dso = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!b->dso) die("dlopen", dlerror());
  init_plugin_fn init = (init_plugin_fn)dlsym(b->dso, "SE_InitPlugin");
  if (!init) die("dlsym SE_InitPlugin", dlerror());

  /* As stream_executor.cc does: TF owns and sizes the structs. */
  b->params.struct_size = SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE;
  b->platform.struct_size = SP_PLATFORM_STRUCT_SIZE;
  b->platform_fns.struct_size = SP_PLATFORM_FNS_STRUCT_SIZE;
  b->params.platform = &b->platform;
  b->params.platform_fns = &b->platform_fns;
  init(&b->params, b->status);
  check_status(b, "SE_InitPlugin");
  if (!b->platform_fns.create_device || !b->platform_fns.create_stream_executor)
    die("plugin", "create_device or create_stream_executor missing");

  int count = 0;
  b->platform_fns.get_device_count(&b->platform, &count, b->status);
  check_status(b, "get_device_count");
  if (count < 1) die("plugin", "no devices");

  SE_CreateDeviceParams dp = {.struct_size = SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
  b->device.struct_size = SP_DEVICE_STRUCT_SIZE;
  dp.ordinal = 0;
  dp.device = &b->device;
  b->platform_fns.create_device(&b->platform, &dp, b->status);
  check_status(b, "create_device");

  SE_CreateStreamExecutorParams sp = {
      .struct_size = SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE};
  b->se.struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE;
  sp.stream_executor = &b->se;
  b->platform_fns.create_stream_executor(&b->platform, &sp, b->status);
  check_status(b, "create_stream_executor");

  b->se.create_stream(&b->device, &b->stream, b->status);
  check_status(b, "create_stream");
  b->se.create_event(&b->device, &b->event, b->status);
  check_status(b, "create_event");
}

static void close_plugin(bench* b) {
  b->se.destroy_event(&b->device, b->event);
  b->se.destroy_stream(&b->device, b->stream);
  b->platform_fns.destroy_stream_executor(&b->platform, &b->se);
  b->platform_fns.destroy_device(&b->platform, &b->device);
  b->params.destroy_platform_fns(&b->platform_fns);
  b->params.destroy_platform(&b->platform);
  TF_DeleteStatus(b->status);
  /* No dlclose: TF never unloads a plugin either. */
}

/* Waits until everything enqueued on the stream ran. */
static void stream_sync(bench* b) {
  if (b->se.block_host_until_done) {
    b->se.block_host_until_done(&b->device, b->stream, b->status);
    check_status(b, "block_host_until_done");
  } else {
    b->se.record_event(&b->device, b->stream, b->event, b->status);
    check_status(b, "record_event");
    b->se.block_host_for_event(&b->device, b->event, b->status);
    check_status(b, "block_host_for_event");
  }
}

/* ------------------------------------------------------------ (a) latency */

typedef struct signal_box {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;          /* under mu */
  atomic_int flag;   /* for the spinning variant */
} signal_box;

static void cb_condvar(void* arg, TF_Status* status) {
  signal_box* s = arg;
  pthread_mutex_lock(&s->mu);
  s->done = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void cb_flag(void* arg, TF_Status* status) {
  signal_box* s = arg;
  atomic_store_explicit(&s->flag, 1, memory_order_release);
}

static void cb_noop(void* arg, TF_Status* status) {}

enum wait_kind { WAIT_CONDVAR, WAIT_SPIN, WAIT_EVENT };

/* One sample: enqueue an empty item, return µs until the host saw it done. */
static double one_latency(bench* b, signal_box* s, enum wait_kind kind) {
  double t0 = now_us();
  TF_Bool ok;
  switch (kind) {
    case WAIT_CONDVAR:
      s->done = 0; /* worker idle: nothing else touches it now */
      ok = b->se.host_callback(&b->device, b->stream, cb_condvar, s);
      if (!ok) die("host_callback", "returned false");
      pthread_mutex_lock(&s->mu);
      while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
      pthread_mutex_unlock(&s->mu);
      break;
    case WAIT_SPIN:
      atomic_store_explicit(&s->flag, 0, memory_order_relaxed);
      ok = b->se.host_callback(&b->device, b->stream, cb_flag, s);
      if (!ok) die("host_callback", "returned false");
      while (!atomic_load_explicit(&s->flag, memory_order_acquire)) {
      }
      break;
    case WAIT_EVENT:
      ok = b->se.host_callback(&b->device, b->stream, cb_noop, s);
      if (!ok) die("host_callback", "returned false");
      b->se.record_event(&b->device, b->stream, b->event, b->status);
      check_status(b, "record_event");
      b->se.block_host_for_event(&b->device, b->event, b->status);
      check_status(b, "block_host_for_event");
      break;
  }
  return now_us() - t0;
}

static void bench_latency(bench* b, int runs) {
  static const struct {
    enum wait_kind kind;
    const char* name;
  } kinds[] = {
      {WAIT_CONDVAR, "host_callback, host waits on a condvar"},
      {WAIT_SPIN, "host_callback, host spins on a flag"},
      {WAIT_EVENT, "host_callback + record_event + block_host_for_event"},
  };
  signal_box s;
  pthread_mutex_init(&s.mu, NULL);
  pthread_cond_init(&s.cv, NULL);
  atomic_init(&s.flag, 0);
  double* v = malloc(sizeof(double) * (size_t)runs);
  if (!v) die("malloc", NULL);

  printf("(a) enqueue -> completion seen by the host, empty work item, "
         "%d runs each (after %d warm-up)\n", runs, runs / 10);
  printf("    %-54s %9s %9s %9s %9s\n", "wait", "p10 us", "median", "p90",
         "max");
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    for (int i = 0; i < runs / 10; i++) one_latency(b, &s, kinds[k].kind);
    for (int i = 0; i < runs; i++) v[i] = one_latency(b, &s, kinds[k].kind);
    double p10 = quantile(v, (size_t)runs, 0.10);
    double p50 = quantile(v, (size_t)runs, 0.50);
    double p90 = quantile(v, (size_t)runs, 0.90);
    printf("    %-54s %9.2f %9.2f %9.2f %9.1f\n", kinds[k].name, p10, p50, p90,
           v[runs - 1]);
  }
  printf("\n");
  free(v);
  pthread_cond_destroy(&s.cv);
  pthread_mutex_destroy(&s.mu);
}

/* ------------------------------------------------------------ (b) copies */

typedef struct copy_case {
  size_t size;
  int batch; /* copies per timed sample: small copies are timed in bulk */
  int reps;
} copy_case;

/* One timed sample of `batch` copies of n bytes; returns µs. */
static double copy_sample(bench* b, int h2d, int use_plugin, void* host,
                          SP_DeviceMemoryBase* mem, size_t n, int batch) {
  double t0 = now_us();
  if (use_plugin) {
    for (int i = 0; i < batch; i++) {
      if (h2d)
        b->se.memcpy_htod(&b->device, b->stream, mem, host, n, b->status);
      else
        b->se.memcpy_dtoh(&b->device, b->stream, host, mem, n, b->status);
      check_status(b, h2d ? "memcpy_htod" : "memcpy_dtoh");
    }
    stream_sync(b);
  } else {
    /* simdev memory is host-addressable: mem->opaque is a plain pointer. */
    for (int i = 0; i < batch; i++) {
      if (h2d)
        memcpy(mem->opaque, host, n);
      else
        memcpy(host, mem->opaque, n);
      /* Keep the compiler from merging repeated identical copies. */
      __asm__ volatile("" ::: "memory");
    }
  }
  return now_us() - t0;
}

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed);
}

static void bench_copies(bench* b) {
  static const copy_case cases[] = {
      {1u << 10, 4096, 31},  {64u << 10, 256, 31}, {1u << 20, 32, 31},
      {16u << 20, 2, 15},    {256u << 20, 1, 7},
  };
  printf("(b) copy bandwidth through the plugin vs plain memcpy, same buffers\n"
         "    (plugin: `batch` async copies on one stream + one wait; "
         "ratio = memcpy time / plugin time per repetition)\n");
  printf("    %-4s %8s %6s %5s %12s %12s   %-26s\n", "dir", "size", "batch",
         "reps", "plugin GB/s", "memcpy GB/s", "plugin/memcpy med [min,max]");

  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    size_t n = cases[c].size;
    int batch = cases[c].batch, reps = cases[c].reps;
    unsigned char* host = aligned_alloc(64, n);
    unsigned char* check = malloc(n);
    if (!host || !check) die("aligned_alloc", "host buffer");
    SP_DeviceMemoryBase mem = {.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
    b->se.allocate(&b->device, n, 0, &mem);
    if (!mem.opaque) die("allocate", "device memory (raise SIMDEV_MEMORY_MB?)");

    for (int h2d = 1; h2d >= 0; h2d--) {
      double *tp = malloc(sizeof(double) * (size_t)reps),
             *tm = malloc(sizeof(double) * (size_t)reps),
             *ratio = malloc(sizeof(double) * (size_t)reps);
      if (!tp || !tm || !ratio) die("malloc", NULL);
      fill_pattern(host, n, 7u + (unsigned)h2d);
      /* Warm-up: fault the pages in on both sides, wake the worker. */
      copy_sample(b, h2d, 1, host, &mem, n, 1);
      copy_sample(b, h2d, 0, host, &mem, n, 1);
      for (int r = 0; r < reps; r++) {
        if (r % 2 == 0) {
          tp[r] = copy_sample(b, h2d, 1, host, &mem, n, batch);
          tm[r] = copy_sample(b, h2d, 0, host, &mem, n, batch);
        } else {
          tm[r] = copy_sample(b, h2d, 0, host, &mem, n, batch);
          tp[r] = copy_sample(b, h2d, 1, host, &mem, n, batch);
        }
        ratio[r] = tm[r] / tp[r];
      }
      /* The plugin's copy must have moved the right bytes. */
      if (h2d) {
        memcpy(check, host, n);
        memset(mem.opaque, 0xA5, n);
        copy_sample(b, 1, 1, host, &mem, n, 1);
        if (memcmp(mem.opaque, check, n) != 0) die("memcpy_htod", "wrong bytes");
      } else {
        fill_pattern(mem.opaque, n, 99u);
        memcpy(check, mem.opaque, n);
        memset(host, 0x5A, n);
        copy_sample(b, 0, 1, host, &mem, n, 1);
        if (memcmp(host, check, n) != 0) die("memcpy_dtoh", "wrong bytes");
      }
      double bytes = (double)n * batch;
      double mp = quantile(tp, (size_t)reps, 0.5);
      double mm = quantile(tm, (size_t)reps, 0.5);
      double rmed = quantile(ratio, (size_t)reps, 0.5);
      char size_s[32];
      if (n >= (1u << 20))
        snprintf(size_s, sizeof(size_s), "%zu MiB", n >> 20);
      else
        snprintf(size_s, sizeof(size_s), "%zu KiB", n >> 10);
      printf("    %-4s %8s %6d %5d %12.2f %12.2f   %5.3f [%5.3f, %5.3f]\n",
             h2d ? "h2d" : "d2h", size_s, batch, reps, bytes / mp / 1e3,
             bytes / mm / 1e3, rmed, ratio[0], ratio[reps - 1]);
      free(tp);
      free(tm);
      free(ratio);
    }
    b->se.deallocate(&b->device, &mem);
    free(host);
    free(check);
  }
  printf("    (GB/s = 1e9 bytes/s; medians over reps; both copies verified)\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s <path to libsimdev.so> [latency runs]\n",
            argv[0]);
    return 2;
  }
  int runs = argc == 3 ? atoi(argv[2]) : 20000;
  if (runs < 10) die("latency runs", "must be >= 10");

  bench b;
  open_plugin(&b, argv[1]);
  printf("bench_stream: %s\n", argv[1]);
  printf("platform %s (type %s), device 0: %s, %s; %ld online CPUs\n\n",
         b.platform.name, b.platform.type,
         b.device.hardware_name ? b.device.hardware_name : "?",
         b.device.device_vendor ? b.device.device_vendor : "?",
         sysconf(_SC_NPROCESSORS_ONLN));
  bench_latency(&b, runs);
  bench_copies(&b);
  close_plugin(&b);
  return 0;
}
