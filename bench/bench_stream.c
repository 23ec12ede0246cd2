/*
 * bench_stream.c - what one stream of the plugin costs, seen through the
 * StreamExecutor C API exactly as TensorFlow drives it.
 *
 * Usage: bench_stream <path to libsimdev.so> [latency runs] [--quick]
 *                     [--json PATH]
 *   latency runs  per wait kind; default 20000, 2000 with --quick (an
 *                 explicit count wins over --quick)
 *   --quick       copies of 1 KiB and 1 MiB only, few repetitions: a smoke
 *                 run of a few seconds, not figures to quote
 *   --json PATH   also write the raw samples to PATH, in seconds per
 *                 operation (format at json_begin)
 * The human-readable tables go to stdout, one progress line per case to
 * stderr. A bad option prints the usage and exits with 2.
 *
 * The plugin is dlopen'ed and SE_InitPlugin is called with TF-style structs
 * (struct_size pre-filled, TF owning the memory); then one device, its stream
 * executor and one stream are created. Printed side by side:
 *   (a) enqueue -> completion latency of an empty work item (a host
 *       callback), as the host sees it, three ways of waiting;
 *   (b) memcpy_htod / memcpy_dtoh / memcpy_dtod bandwidth against plain
 *       memcpy on the same buffers. Plugin and memcpy samples alternate (and
 *       swap order each repetition) so clock or thermal drift hits both
 *       alike; the ratio is taken per repetition and its median, min and max
 *       reported.
 * This is a benchmark, not a test: it prints numbers and fails only when the
 * plugin reports an error or a copy comes back wrong.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
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

/* Where results go besides stdout: progress lines and the --json file. */
typedef struct report {
  FILE* json;            /* NULL without --json */
  const char* json_path;
  int json_cases;        /* cases written so far: commas go between them */
  int case_no;           /* progress: this case of case_total */
  int case_total;
} report;

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

/* Announces the next case on stderr, so a long run shows where it is while
 * stdout (the tables) may be going to a file. */
static void progress(report* r, const char* name) {
  fprintf(stderr, "bench_stream: [%d/%d] %s\n", ++r->case_no, r->case_total,
          name);
}

/* ------------------------------------------------------------ --json */

/* The file is written case by case as the run goes, so a run that dies
 * halfway leaves a truncated file that no JSON parser accepts, never a
 * plausible-looking partial one. The format, a single object:
 *   {"group": "stream", "cases": [
 *     {"name": ..., "unit": "s", ["work": bytes, "work_unit": "B",]
 *      "samples": {"simdev": [...], ["memcpy": [...]]}}, ...]}
 * with times in seconds per operation. */
static void json_begin(report* r, const char* path) {
  r->json_path = path;
  r->json = fopen(path, "w");
  if (!r->json) die(path, strerror(errno));
  fprintf(r->json, "{\"group\": \"stream\", \"cases\": [");
}

/* Names are our own constants, but escaping keeps the file valid whatever
 * one of them grows into. */
static void json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* "key": [v[0] * scale, ...]; JSON has no inf or nan, so such a sample (a
 * clock gone wrong) becomes null rather than breaking the file. */
static void json_samples(FILE* f, const char* key, const double* v, size_t n,
                         double scale) {
  json_string(f, key);
  fputs(": [", f);
  for (size_t i = 0; i < n; i++) {
    double x = v[i] * scale;
    if (isfinite(x))
      fprintf(f, "%s%.9g", i ? ", " : "", x);
    else
      fprintf(f, "%snull", i ? ", " : "");
  }
  fputc(']', f);
}

/* One case. Samples are in µs per timed sample of `per` operations; they are
 * written as seconds per operation. work == 0: no "work" fields; memcpy_v ==
 * NULL: only the simdev side. */
static void json_case(report* r, const char* name, size_t work,
                      const double* simdev, const double* memcpy_v, size_t n,
                      int per) {
  if (!r->json) return;
  FILE* f = r->json;
  double scale = 1e-6 / per;
  fputs(r->json_cases++ ? ",\n  {" : "\n  {", f);
  fputs("\"name\": ", f);
  json_string(f, name);
  fputs(", \"unit\": \"s\"", f);
  if (work) fprintf(f, ", \"work\": %zu, \"work_unit\": \"B\"", work);
  fputs(", \"samples\": {", f);
  json_samples(f, "simdev", simdev, n, scale);
  if (memcpy_v) {
    fputs(", ", f);
    json_samples(f, "memcpy", memcpy_v, n, scale);
  }
  fputs("}}", f);
}

/* A full disk shows only here, so the result is checked. */
static void json_end(report* r) {
  if (!r->json) return;
  fputs("\n]}\n", r->json);
  int bad = ferror(r->json);
  if (fclose(r->json) != 0 || bad) die(r->json_path, "write failed");
  r->json = NULL;
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
  /* TF itself treats these as optional; a plugin without them cannot be
   * measured here, which is better said than found by a NULL call. */
  if (!b->se.memcpy_htod || !b->se.memcpy_dtoh || !b->se.memcpy_dtod)
    die("plugin", "memcpy_htod, memcpy_dtoh or memcpy_dtod missing");

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

/* The JSON keeps at most this many samples per wait kind: enough for any
 * distribution plot, and a 20000-run file stays small. */
#define JSON_MAX_LATENCY_SAMPLES 2000

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

/* Writes v (in run order, before quantile sorts it) to the JSON, thinned
 * evenly over the whole run when there are too many, so drift over the run
 * stays visible. */
static void json_latency(report* r, const char* name, const double* v,
                         int runs) {
  if (!r->json) return;
  size_t n = (size_t)runs, keep = n;
  if (keep > JSON_MAX_LATENCY_SAMPLES) keep = JSON_MAX_LATENCY_SAMPLES;
  double* sub = malloc(sizeof(double) * keep);
  if (!sub) die("malloc", NULL);
  for (size_t i = 0; i < keep; i++) sub[i] = v[i * n / keep];
  json_case(r, name, 0, sub, NULL, keep, 1);
  free(sub);
}

static void bench_latency(bench* b, report* r, int runs) {
  static const struct {
    enum wait_kind kind;
    const char* name;
    const char* case_name; /* in the JSON and the progress line */
  } kinds[] = {
      {WAIT_CONDVAR, "host_callback, host waits on a condvar",
       "work-item latency, condvar wait"},
      {WAIT_SPIN, "host_callback, host spins on a flag",
       "work-item latency, spin wait"},
      {WAIT_EVENT, "host_callback + record_event + block_host_for_event",
       "work-item latency, event wait"},
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
    progress(r, kinds[k].case_name);
    for (int i = 0; i < runs / 10; i++) one_latency(b, &s, kinds[k].kind);
    for (int i = 0; i < runs; i++) v[i] = one_latency(b, &s, kinds[k].kind);
    json_latency(r, kinds[k].case_name, v, runs);
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

static const copy_case full_cases[] = {
    {1u << 10, 4096, 31},  {64u << 10, 256, 31}, {1u << 20, 32, 31},
    {16u << 20, 2, 15},    {256u << 20, 1, 7},
};
/* --quick: the smallest size (all per-operation cost) and one where the
 * bytes start to count; odd reps so the median is a sample. */
static const copy_case quick_cases[] = {
    {1u << 10, 4096, 5},
    {1u << 20, 32, 5},
};

enum copy_dir { H2D, D2H, D2D, N_DIRS };
static const char* const dir_name[N_DIRS] = {"h2d", "d2h", "d2d"};

/* The buffers of one size: d2d copies dev -> dev2, both on device 0. */
typedef struct copy_bufs {
  size_t n;
  unsigned char* host;
  unsigned char* check; /* expected bytes, for verification */
  SP_DeviceMemoryBase dev, dev2;
} copy_bufs;

/* One timed sample of `batch` copies of n bytes; returns µs. */
static double copy_sample(bench* b, enum copy_dir dir, int use_plugin,
                          copy_bufs* cb, int batch) {
  size_t n = cb->n;
  double t0 = now_us();
  if (use_plugin) {
    for (int i = 0; i < batch; i++) {
      switch (dir) {
        case H2D:
          b->se.memcpy_htod(&b->device, b->stream, &cb->dev, cb->host, n,
                            b->status);
          check_status(b, "memcpy_htod");
          break;
        case D2H:
          b->se.memcpy_dtoh(&b->device, b->stream, cb->host, &cb->dev, n,
                            b->status);
          check_status(b, "memcpy_dtoh");
          break;
        default:
          b->se.memcpy_dtod(&b->device, b->stream, &cb->dev2, &cb->dev, n,
                            b->status);
          check_status(b, "memcpy_dtod");
          break;
      }
    }
    stream_sync(b);
  } else {
    /* simdev memory is host-addressable: mem->opaque is a plain pointer. */
    for (int i = 0; i < batch; i++) {
      switch (dir) {
        case H2D: memcpy(cb->dev.opaque, cb->host, n); break;
        case D2H: memcpy(cb->host, cb->dev.opaque, n); break;
        default: memcpy(cb->dev2.opaque, cb->dev.opaque, n); break;
      }
      /* Keep the compiler from merging repeated identical copies. */
      __asm__ volatile("" ::: "memory");
    }
  }
  return now_us() - t0;
}

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131u + seed);
}

/* After timing: one more plugin copy onto a poisoned destination must have
 * moved exactly the source's bytes. */
static void verify_copy(bench* b, enum copy_dir dir, copy_bufs* cb) {
  size_t n = cb->n;
  unsigned char *src, *dst;
  switch (dir) {
    case H2D: src = cb->host; dst = cb->dev.opaque; break;
    case D2H:
      src = cb->dev.opaque;
      dst = cb->host;
      fill_pattern(src, n, 99u); /* the source must differ from the host's */
      break;
    default: src = cb->dev.opaque; dst = cb->dev2.opaque; break;
  }
  memcpy(cb->check, src, n);
  memset(dst, 0xA5, n);
  copy_sample(b, dir, 1, cb, 1);
  if (memcmp(dst, cb->check, n) != 0) {
    static const char* const call[N_DIRS] = {"memcpy_htod", "memcpy_dtoh",
                                             "memcpy_dtod"};
    die(call[dir], "wrong bytes");
  }
}

static void size_name(char* out, size_t len, size_t n) {
  if (n >= (1u << 20))
    snprintf(out, len, "%zu MiB", n >> 20);
  else
    snprintf(out, len, "%zu KiB", n >> 10);
}

/* One row of the table: one direction at one size. */
static void bench_copy_dir(bench* b, report* r, enum copy_dir dir,
                           copy_bufs* cb, const copy_case* cc) {
  size_t n = cb->n;
  int batch = cc->batch, reps = cc->reps;
  char size_s[32], name[64];
  size_name(size_s, sizeof(size_s), n);
  snprintf(name, sizeof(name), "%s %s", dir_name[dir], size_s);
  progress(r, name);

  double *tp = malloc(sizeof(double) * (size_t)reps),
         *tm = malloc(sizeof(double) * (size_t)reps),
         *ratio = malloc(sizeof(double) * (size_t)reps);
  if (!tp || !tm || !ratio) die("malloc", NULL);
  /* A fresh source per direction, so no copy is of bytes already in place. */
  if (dir == H2D)
    fill_pattern(cb->host, n, 8u);
  else
    fill_pattern(cb->dev.opaque, n, 7u + (unsigned)dir);
  /* Warm-up: fault the pages in on both sides, wake the worker. */
  copy_sample(b, dir, 1, cb, 1);
  copy_sample(b, dir, 0, cb, 1);
  for (int i = 0; i < reps; i++) {
    if (i % 2 == 0) {
      tp[i] = copy_sample(b, dir, 1, cb, batch);
      tm[i] = copy_sample(b, dir, 0, cb, batch);
    } else {
      tm[i] = copy_sample(b, dir, 0, cb, batch);
      tp[i] = copy_sample(b, dir, 1, cb, batch);
    }
    ratio[i] = tm[i] / tp[i];
  }
  verify_copy(b, dir, cb);
  /* Before quantile sorts them: the file keeps run order. */
  json_case(r, name, n, tp, tm, (size_t)reps, batch);

  double bytes = (double)n * batch;
  double mp = quantile(tp, (size_t)reps, 0.5);
  double mm = quantile(tm, (size_t)reps, 0.5);
  double rmed = quantile(ratio, (size_t)reps, 0.5);
  printf("    %-4s %8s %6d %5d %12.2f %12.2f   %5.3f [%5.3f, %5.3f]\n",
         dir_name[dir], size_s, batch, reps, bytes / mp / 1e3,
         bytes / mm / 1e3, rmed, ratio[0], ratio[reps - 1]);
  free(tp);
  free(tm);
  free(ratio);
}

static void alloc_device(bench* b, SP_DeviceMemoryBase* mem, size_t n) {
  *mem = (SP_DeviceMemoryBase){.struct_size = SP_DEVICE_MEMORY_BASE_STRUCT_SIZE};
  b->se.allocate(&b->device, n, 0, mem);
  if (!mem->opaque) die("allocate", "device memory (raise SIMDEV_MEMORY_MB?)");
}

static void bench_copies(bench* b, report* r, const copy_case* cases,
                         size_t ncases) {
  printf("(b) copy bandwidth through the plugin vs plain memcpy, same buffers\n"
         "    (plugin: `batch` async copies on one stream + one wait; "
         "ratio = memcpy time / plugin time per repetition;\n"
         "    d2d: between two allocations on device 0)\n");
  printf("    %-4s %8s %6s %5s %12s %12s   %-26s\n", "dir", "size", "batch",
         "reps", "plugin GB/s", "memcpy GB/s", "plugin/memcpy med [min,max]");

  for (size_t c = 0; c < ncases; c++) {
    copy_bufs cb = {.n = cases[c].size};
    cb.host = aligned_alloc(64, cb.n);
    cb.check = malloc(cb.n);
    if (!cb.host || !cb.check) die("aligned_alloc", "host buffer");
    alloc_device(b, &cb.dev, cb.n);
    alloc_device(b, &cb.dev2, cb.n);
    for (int dir = 0; dir < N_DIRS; dir++)
      bench_copy_dir(b, r, (enum copy_dir)dir, &cb, &cases[c]);
    b->se.deallocate(&b->device, &cb.dev2);
    b->se.deallocate(&b->device, &cb.dev);
    free(cb.host);
    free(cb.check);
  }
  printf("    (GB/s = 1e9 bytes/s; medians over reps; every direction "
         "verified byte for byte)\n");
}

/* ------------------------------------------------------------ main */

typedef struct options {
  const char* plugin;
  const char* json_path; /* NULL: no JSON */
  int runs;              /* latency runs; 0: the mode's default */
  int quick;
} options;

static void usage(FILE* f, const char* argv0) {
  fprintf(f,
          "usage: %s <path to libsimdev.so> [latency runs] [--quick] "
          "[--json PATH]\n"
          "  latency runs  per wait kind, >= 10; default 20000, 2000 with "
          "--quick\n"
          "  --quick       2000 latency runs, copies of 1 KiB and 1 MiB only, "
          "few reps\n"
          "  --json PATH   also write every raw sample to PATH (seconds per "
          "operation)\n",
          argv0);
}

/* Strict: the whole argument must be a number in range, so "2e4" or "20k"
 * are refused rather than read as 2 or 20. */
static int parse_runs(const char* s, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < 10 || v > INT_MAX) return -1;
  *out = (int)v;
  return 0;
}

/* Returns 0, or -1 after saying what is wrong (the caller prints usage). */
static int parse_args(int argc, char** argv, options* o) {
  memset(o, 0, sizeof(*o));
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "bench_stream: the first argument must be the plugin path\n");
    return -1;
  }
  o->plugin = argv[1];
  for (int i = 2; i < argc; i++) {
    const char* a = argv[i];
    if (strcmp(a, "--quick") == 0) {
      o->quick = 1;
    } else if (strcmp(a, "--json") == 0) {
      /* "--json --quick" is a forgotten PATH, not a file named --quick. */
      if (i + 1 >= argc || argv[i + 1][0] == '\0' || argv[i + 1][0] == '-') {
        fprintf(stderr, "bench_stream: --json needs a PATH (./NAME for one "
                "starting with '-')\n");
        return -1;
      }
      o->json_path = argv[++i];
    } else if (a[0] == '-') {
      fprintf(stderr, "bench_stream: unknown option %s\n", a);
      return -1;
    } else if (o->runs) {
      fprintf(stderr, "bench_stream: latency runs given twice (%s)\n", a);
      return -1;
    } else if (parse_runs(a, &o->runs) != 0) {
      fprintf(stderr, "bench_stream: latency runs must be an integer >= 10, "
              "not %s\n", a);
      return -1;
    }
  }
  if (!o->runs) o->runs = o->quick ? 2000 : 20000;
  return 0;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout, argv[0]);
      return 0;
    }
  }
  /* The reference side memcpy()s device buffers with host code, which
   * discrete mode forbids (it would die in the first copy case). */
  const char* discrete = getenv("SIMDEV_DISCRETE");
  if (discrete != NULL && strcmp(discrete, "1") == 0) {
    fprintf(stderr,
            "bench_stream: cannot run with SIMDEV_DISCRETE=1: it reads and "
            "writes device buffers with host memcpy (discrete device memory "
            "is not host-accessible)\n");
    return 2;
  }
  options o;
  if (parse_args(argc, argv, &o) != 0) {
    usage(stderr, argv[0]);
    return 2;
  }
  const copy_case* cases = o.quick ? quick_cases : full_cases;
  size_t ncases = o.quick ? sizeof(quick_cases) / sizeof(quick_cases[0])
                          : sizeof(full_cases) / sizeof(full_cases[0]);

  report r = {.case_total = 3 + (int)ncases * N_DIRS};
  /* Opened before the long run, so a bad path fails in the first second. */
  if (o.json_path) json_begin(&r, o.json_path);

  bench b;
  open_plugin(&b, o.plugin);
  printf("bench_stream: %s%s\n", o.plugin,
         o.quick ? " (--quick: a smoke run, not figures to quote)" : "");
  printf("platform %s (type %s), device 0: %s, %s; %ld online CPUs\n\n",
         b.platform.name, b.platform.type,
         b.device.hardware_name ? b.device.hardware_name : "?",
         b.device.device_vendor ? b.device.device_vendor : "?",
         sysconf(_SC_NPROCESSORS_ONLN));
  bench_latency(&b, &r, o.runs);
  bench_copies(&b, &r, cases, ncases);
  close_plugin(&b);
  json_end(&r);
  if (o.json_path) printf("    raw samples written to %s\n", o.json_path);
  return 0;
}
