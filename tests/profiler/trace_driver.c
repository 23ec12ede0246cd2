/*
 * trace_driver.c - runs a fixed piece of device_sim work with SIMDEV_TRACE's
 * recording (sp_tracefile_start) and writes both of the profiler's outputs,
 * for tests/tf/test_trace_json.py to decode with json and with the wheel's
 * xplane_pb2 and compare with exact expectations. No TensorFlow.
 *
 *   trace_driver OUT.json OUT.xplane.pb           the scenario below
 *   trace_driver --overflow N OUT.json OUT.xplane.pb
 *                                  rings of 1024 records, N kernels "k<i>"
 *                                  on simdev0-s0 (the oldest are dropped)
 *
 * The JSON is written by the exit handler of sp_tracefile_start, as
 * SIMDEV_TRACE's is (after every stream and device is gone); the XSpace
 * from a snapshot taken once the work has run. Exit status 0, or 1 with a
 * message on stderr.
 *
 * The scenario (the order on each stream is fixed; the test knows it):
 *   main thread "drv-main", device 0 (streams s0, s1), device 1 (s0):
 *   0-s0: kernel drv/gate:Gate (holds 0-s0 until everything of device 0
 *         is queued), MemcpyH2D 4096 B, kernel model/dense/MatMul:MatMul,
 *         kernel model/dense/BiasAdd:BiasAdd, EventRecord, EventRecord
 *         (the marker of the stream wait below)
 *   0-s1: EventWait (peer 0-s0), kernel `odd "name"\<tab>é`:Relu (a name
 *         that needs JSON escaping), Memset 4096 B, MemcpyD2H 4096 B,
 *         HostCallback, StreamWait (peer 0-s0)
 *   thread "drv-sub", after those: kernels sub/k0..k2:Sub on 0-s0 (the
 *         thread stays alive until exit, so the JSON can name it); then
 *         main opens the gate
 *   1-s0: kernel dev1/Mul:Mul, kernel dev1/fail:Fail (its run fails),
 *         kernel dev1/drained:Drained (drained: the stream is in error)
 *   device 0: one 4096-byte allocation, freed at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/sp.h"

#define DIE(...)                       \
  do {                                 \
    fprintf(stderr, "trace_driver: "); \
    fprintf(stderr, __VA_ARGS__);      \
    fprintf(stderr, "\n");             \
    exit(1);                           \
  } while (0)
#define CHECK(call)                                             \
  do {                                                          \
    int rc_ = (call);                                           \
    if (rc_ != SIM_OK) DIE("%s: %s", #call, sim_strerror(rc_)); \
  } while (0)

/* A kernel: some arithmetic on its own buffer; `fail` makes run fail. */
typedef struct kernel {
  sim_work w; /* first: the callbacks cast back */
  int fail;
  int gate;
  float buf[256];
} kernel;

/* The gate: the first kernel on 0-s0 waits until main opens it, so every
 * item below is queued before anything on 0-s0 runs. Waits on an event
 * that has already completed enqueue nothing (event.c), so without it the
 * waits would be there or not depending on timing. g_mu guards g_open. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_open;

static int kernel_run(sim_work* w, char* msg, size_t msg_len) {
  kernel* k = (kernel*)w;
  if (k->gate) {
    pthread_mutex_lock(&g_mu);
    while (!g_open) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
  }
  if (k->fail) {
    snprintf(msg, msg_len, "the driver's failing kernel");
    return SIM_EFAILED;
  }
  for (int i = 0; i < 256; i++) k->buf[i] = k->buf[i] * 0.5f + (float)i;
  return SIM_OK;
}

static void kernel_done(sim_work* w, int status) {
  free(w);
}

static void launch2(sim_stream* s, const char* name, const char* type, int fail,
                    int gate) {
  kernel* k = calloc(1, sizeof(*k));
  if (k == NULL) DIE("out of memory");
  k->w.run = kernel_run;
  k->w.done = kernel_done;
  k->w.label = "driver kernel";
  k->w.trace.kind = SIM_TRACE_KERNEL;
  k->w.trace.name = sim_trace_intern(name);
  k->w.trace.type = sim_trace_intern(type);
  k->fail = fail;
  k->gate = gate;
  CHECK(sim_stream_submit(s, &k->w));
}

static void launch(sim_stream* s, const char* name, const char* type,
                   int fail) {
  launch2(s, name, type, fail, 0);
}

static int host_fn(void* arg, int stream_status, char* msg, size_t len) {
  ++*(int*)arg;
  return 0;
}

/* drv-sub submits, says so, then stays alive until the process exits: the
 * JSON is written at exit and names host threads from /proc, which only
 * has threads that still exist. g_mu guards g_submitted. */
static int g_submitted;

static void* sub_main(void* arg) {
  sim_stream* s = arg;
  pthread_setname_np(pthread_self(), "drv-sub");
  char name[32];
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof(name), "sub/k%d", i);
    launch(s, name, "Sub", 0);
  }
  pthread_mutex_lock(&g_mu);
  g_submitted = 1;
  pthread_cond_broadcast(&g_cv);
  for (;;) pthread_cond_wait(&g_cv, &g_mu); /* until exit */
  return NULL;
}

static void write_xspace(const char* path) {
  sim_trace_snapshot* snap;
  CHECK(sim_trace_snapshot_take(0, 0, &snap));
  uint8_t* bytes;
  size_t len;
  CHECK(sp_xspace_encode(snap, &bytes, &len));
  sim_trace_snapshot_free(snap);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(bytes, 1, len, f) != len || fclose(f) != 0)
    DIE("cannot write %s", path);
  free(bytes);
}

static void start_trace(const char* json, uint32_t ring) {
  char msg[512];
  if (sp_tracefile_start(json, ring, msg, sizeof(msg)) != SIM_OK)
    DIE("sp_tracefile_start: %s", msg);
}

static int overflow(int n, const char* json, const char* xplane) {
  start_trace(json, 1024);
  sim_device* dev;
  sim_stream* s;
  CHECK(sim_device_create(0, 16, &dev));
  CHECK(sim_stream_create(dev, &s));
  char name[32];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof(name), "k%d", i);
    launch(s, name, "Overflow", 0);
  }
  CHECK(sim_stream_synchronize(s));
  write_xspace(xplane);
  sim_stream_destroy(s);
  sim_device_destroy(dev);
  return 0;
}

int main(int argc, char** argv) {
  pthread_setname_np(pthread_self(), "drv-main");
  if (argc == 5 && strcmp(argv[1], "--overflow") == 0)
    return overflow(atoi(argv[2]), argv[3], argv[4]);
  if (argc != 3)
    DIE("usage: trace_driver [--overflow N] OUT.json OUT.xplane.pb");
  start_trace(argv[1], 0);

  sim_device *dev0, *dev1;
  sim_stream *s0, *s1, *t0;
  sim_event* ev;
  CHECK(sim_device_create(0, 16, &dev0));
  CHECK(sim_device_create(1, 16, &dev1));
  CHECK(sim_stream_create(dev0, &s0));
  CHECK(sim_stream_create(dev0, &s1));
  CHECK(sim_stream_create(dev1, &t0));
  CHECK(sim_event_create(&ev));

  enum { N = 4096 };
  void* d = sim_mem_alloc(dev0, N);
  char* h = malloc(N);
  if (d == NULL || h == NULL) DIE("out of memory");
  memset(h, 7, N);
  int callbacks = 0;

  launch2(s0, "drv/gate", "Gate", 0, 1);
  CHECK(sim_memcpy_async(s0, d, h, N));
  launch(s0, "model/dense/MatMul", "MatMul", 0);
  launch(s0, "model/dense/BiasAdd", "BiasAdd", 0);
  CHECK(sim_event_record(ev, s0));
  CHECK(sim_stream_wait_event(s1, ev));
  launch(s1, "odd \"name\"\\\t\xc3\xa9", "Relu", 0);
  CHECK(sim_memset8_async(s1, d, 0, N));
  CHECK(sim_memcpy_async(s1, h, d, N));
  CHECK(sim_host_callback_async(s1, host_fn, &callbacks));
  CHECK(sim_stream_wait_stream(s1, s0));

  pthread_t sub;
  if (pthread_create(&sub, NULL, sub_main, s0) != 0) DIE("pthread_create");
  pthread_mutex_lock(&g_mu);
  while (!g_submitted) pthread_cond_wait(&g_cv, &g_mu);
  g_open = 1; /* everything for device 0 is queued: let 0-s0 run */
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);

  launch(t0, "dev1/Mul", "Mul", 0);
  launch(t0, "dev1/fail", "Fail", 1);
  launch(t0, "dev1/drained", "Drained", 0);

  CHECK(sim_stream_synchronize(s0));
  CHECK(sim_stream_synchronize(s1));
  if (sim_stream_synchronize(t0) != SIM_EFAILED) DIE("1-s0 should have failed");
  if (callbacks != 1) DIE("host callback ran %d times", callbacks);
  if (h[0] != 0) DIE("the memset and the copy back did not run");
  write_xspace(argv[2]);

  sim_event_destroy(ev);
  sim_mem_free(dev0, d);
  free(h);
  sim_stream_destroy(s0);
  sim_stream_destroy(s1);
  sim_stream_destroy(t0);
  sim_device_destroy(dev0);
  sim_device_destroy(dev1);
  return 0; /* exit writes the JSON (sp_tracefile_start's handler) */
}
