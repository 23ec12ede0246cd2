/*
 * bench_trace.c - what device_sim's recorder (sim_trace_*, sim.h) costs per
 * work item: items per second through one stream with tracing off and on,
 * in one process, the two alternating repetition by repetition.
 *
 * Usage: bench_trace [--quick] [--json PATH]
 *        bench_trace --loop CASE on|off SECONDS
 *   --quick      few repetitions: a smoke run of about a second, not figures
 *   --loop       runs batches of case CASE (0..4, the order below) with
 *                tracing on or off for SECONDS and prints ns per item: a
 *                steady load for `perf record -g -- bench_trace --loop ...`
 *   --json PATH  also write the raw samples to PATH, in seconds per item, in
 *                bench/common.py's group format (sides "simdev" = tracing
 *                off, "trace_on" = tracing on)
 * The table goes to stdout, one progress line per case to stderr.
 *
 * It links device_sim directly (no TensorFlow, no plugin): one device, one
 * stream, and tracing switched with sim_trace_start / sim_trace_stop between
 * repetitions, so the off and on samples share the process, the stream and
 * the machine's load. Cases, each a batch of BATCH items timed from the
 * first submit to the return of the wait for the last:
 *   worker   empty items (run returns 0, no done) submitted to the stream
 *            and run by its worker thread; one sim_stream_synchronize;
 *   inline   the same items run by sim_stream_run_inline on the calling
 *            thread (no hand-off: the cost of the item itself, where the
 *            recorder's share is largest);
 *   memcpy   sim_memcpy_async of 256 bytes device -> device (the
 *            convenience item: one small allocation per item; traced copies
 *            also look up their direction), then synchronize;
 *   alloc    sim_mem_alloc + sim_mem_free of 256 bytes on the calling
 *            thread (the arena's records).
 * Every sim_trace_start empties the rings (no consumer was active), and a
 * ring's buffer starts small and doubles up to its capacity. The cases
 * therefore trace with rings of RING records, a quarter of a batch: most
 * records overwrite the oldest, the steady state of a long traced run. One
 * case uses the default capacity (SIM_TRACE_DEFAULT_RECORDS, larger than a
 * batch), so its batches pay for the growth: the first records of a run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { BATCH = 4096, REPS = 60, QUICK_REPS = 4, NCASES = 5 };
/* Ring capacity (records) of the steady-state cases: a quarter of a batch,
 * so three quarters of every traced batch overwrite old records. */
enum { RING = 1024 };

typedef struct bench_case {
  const char* name;
  int what;      /* 0 worker, 1 inline, 2 memcpy, 3 alloc */
  uint32_t ring; /* sim_trace_start's ring_records; 0: the default */
} bench_case;

static const bench_case CASES[NCASES] = {
    {"recorder: empty item via the stream worker", 0, RING},
    {"recorder: empty item run inline", 1, RING},
    {"recorder: empty item inline, default ring growing", 1, 0},
    {"recorder: sim_memcpy_async 256 B d2d", 2, RING},
    {"recorder: sim_mem_alloc+free 256 B", 3, RING},
};

typedef struct rig {
  sim_device* dev;
  sim_stream* worker; /* inline runs off: items go to the worker */
  sim_stream* inl;    /* inline runs on */
  sim_work items[BATCH];
  void* src;
  void* dst;
} rig;

static void die(const char* what, int err) {
  fprintf(stderr, "bench_trace: %s: %s\n", what, sim_strerror(err));
  exit(1);
}

static int run_empty(sim_work* w, char* msg, size_t len) {
  (void)w, (void)msg, (void)len;
  return SIM_OK;
}

/* One batch of case c; returns seconds per item. */
static double one_batch(rig* r, int c) {
  const char* name = CASES[c].name;
  uint64_t t0 = sim_now_ns();
  int err = SIM_OK;
  switch (CASES[c].what) {
    case 0:
      for (int i = 0; i < BATCH && err == SIM_OK; i++)
        err = sim_stream_submit(r->worker, &r->items[i]);
      if (err == SIM_OK) err = sim_stream_synchronize(r->worker);
      break;
    case 1:
      for (int i = 0; i < BATCH && err == SIM_OK; i++)
        if (sim_stream_run_inline(r->inl, &r->items[i]) != 1) err = SIM_EINVAL;
      break;
    case 2:
      for (int i = 0; i < BATCH && err == SIM_OK; i++)
        err = sim_memcpy_async(r->worker, r->dst, r->src, 256);
      if (err == SIM_OK) err = sim_stream_synchronize(r->worker);
      break;
    default:
      for (int i = 0; i < BATCH; i++) {
        void* p = sim_mem_alloc(r->dev, 256);
        if (p == NULL) {
          err = SIM_ENOMEM;
          break;
        }
        sim_mem_free(r->dev, p);
      }
  }
  uint64_t t1 = sim_now_ns();
  if (err != SIM_OK) die(name, err);
  return (double)(t1 - t0) * 1e-9 / BATCH;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(const double* v, int n) {
  double* s = malloc(sizeof(double) * (size_t)n);
  if (s == NULL) die("malloc", SIM_ENOMEM);
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof(double), cmp_double);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  free(s);
  return m;
}

/* Records (item and memory) in the rings now, and how many were dropped. */
static void ring_counts(uint64_t* recs, uint64_t* drops) {
  sim_trace_snapshot* snap = NULL;
  int err = sim_trace_snapshot_take(0, 0, &snap);
  if (err != SIM_OK) die("sim_trace_snapshot_take", err);
  for (size_t i = 0; i < snap->nstreams; i++) {
    *recs += snap->streams[i].count;
    *drops += snap->streams[i].dropped;
  }
  for (size_t i = 0; i < snap->ndevices; i++) {
    *recs += snap->devices[i].count;
    *drops += snap->devices[i].dropped;
  }
  sim_trace_snapshot_free(snap);
}

static void json_samples(FILE* f, const char* side, const double* v, int n) {
  fprintf(f, "\"%s\": [", side);
  for (int i = 0; i < n; i++) fprintf(f, "%s%.6e", i ? ", " : "", v[i]);
  fputc(']', f);
}

int main(int argc, char** argv) {
  int reps = REPS, loop_case = -1, loop_on = 0;
  double loop_s = 0;
  const char* json = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--loop") == 0 && i + 3 < argc) {
      loop_case = atoi(argv[i + 1]);
      loop_on = strcmp(argv[i + 2], "on") == 0;
      loop_s = atof(argv[i + 3]);
      i += 3;
      if (loop_case < 0 || loop_case >= NCASES || loop_s <= 0) {
        fprintf(stderr, "bench_trace: --loop CASE (0..%d) on|off SECONDS\n",
                NCASES - 1);
        return 2;
      }
    } else if (strcmp(argv[i], "--quick") == 0) {
      reps = QUICK_REPS;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr,
              "usage: bench_trace [--quick] [--json PATH]\n"
              "       bench_trace --loop CASE on|off SECONDS\n");
      return 2;
    }
  }
  static rig r;
  int err = sim_device_create(0, 256, &r.dev);
  if (err != SIM_OK) die("sim_device_create", err);
  if ((err = sim_stream_create(r.dev, &r.worker)) != SIM_OK ||
      (err = sim_stream_create(r.dev, &r.inl)) != SIM_OK)
    die("sim_stream_create", err);
  sim_stream_set_inline(r.worker, 0);
  sim_stream_set_inline(r.inl, 1);
  r.src = sim_mem_alloc(r.dev, 256);
  r.dst = sim_mem_alloc(r.dev, 256);
  if (r.src == NULL || r.dst == NULL) die("sim_mem_alloc", SIM_ENOMEM);
  memset(r.src, 7, 256);
  /* What a kernel launch carries: a kind and an interned name and type. */
  uint32_t name = sim_trace_intern("bench/empty"),
           type = sim_trace_intern("Empty");
  for (int i = 0; i < BATCH; i++) {
    r.items[i].run = run_empty;
    r.items[i].label = "bench_trace empty item";
    r.items[i].trace.kind = SIM_TRACE_KERNEL;
    r.items[i].trace.name = name;
    r.items[i].trace.type = type;
  }

  if (loop_case >= 0) {
    if (loop_on && (err = sim_trace_start(CASES[loop_case].ring)) != SIM_OK)
      die("sim_trace_start", err);
    uint64_t end = sim_now_ns() + (uint64_t)(loop_s * 1e9), batches = 0;
    double sum = 0;
    while (sim_now_ns() < end) {
      sum += one_batch(&r, loop_case);
      batches++;
    }
    if (loop_on) sim_trace_stop();
    printf("%s, tracing %s: %.1f ns per item (mean of %llu batches)\n",
           CASES[loop_case].name, loop_on ? "on" : "off",
           sum / (double)batches * 1e9, (unsigned long long)batches);
    sim_device_destroy(r.dev);
    return 0;
  }

  double* off = malloc(sizeof(double) * (size_t)reps);
  double* on = malloc(sizeof(double) * (size_t)reps);
  if (off == NULL || on == NULL) die("malloc", SIM_ENOMEM);
  FILE* jf = NULL;
  if (json != NULL) {
    jf = fopen(json, "w");
    if (jf == NULL) {
      perror(json);
      return 1;
    }
    fprintf(jf,
            "{\"group\": \"profile\", \"info\": {\"recorder_batch\": %d,"
            " \"recorder_ring_records\": %d}, \"cases\": [",
            BATCH, RING);
  }
  printf(
      "[profile] recorder, seconds per item (median of %d batches of %d;"
      " off and on alternate)\n",
      reps, BATCH);
  printf("%-50s %12s %12s %9s %12s\n", "case", "trace off", "trace on",
         "on/off", "extra/item");
  for (int c = 0; c < NCASES; c++) {
    fprintf(stderr, "[profile] %s: %d x %d items, tracing off/on\n",
            CASES[c].name, reps, BATCH);
    one_batch(&r, c); /* warm-up, off */
    if ((err = sim_trace_start(CASES[c].ring)) != SIM_OK)
      die("sim_trace_start", err);
    one_batch(&r, c); /* warm-up, on: the rings exist from here */
    sim_trace_stop();
    for (int k = 0; k < reps; k++) {
      /* Swap the order each repetition: drift hits both sides alike. */
      for (int half = 0; half < 2; half++) {
        int trace = (k + half) % 2;
        if (trace && (err = sim_trace_start(CASES[c].ring)) != SIM_OK)
          die("sim_trace_start", err);
        double t = one_batch(&r, c);
        if (trace) {
          sim_trace_stop();
          on[k] = t;
        } else {
          off[k] = t;
        }
      }
    }
    /* The "on" side really recorded: the rings (kept after the stop until
     * the next start) hold records of this case. */
    uint64_t recs = 0, drops = 0;
    ring_counts(&recs, &drops);
    if (recs == 0) {
      fprintf(stderr, "bench_trace: %s: tracing on recorded nothing\n",
              CASES[c].name);
      return 1;
    }
    double mo = median(off, reps), mn = median(on, reps);
    printf("%-50s %9.1f ns %9.1f ns %9.3f %9.1f ns\n", CASES[c].name, mo * 1e9,
           mn * 1e9, mn / mo, (mn - mo) * 1e9);
    printf("%-50s records in the rings %llu, dropped %llu\n", "",
           (unsigned long long)recs, (unsigned long long)drops);
    if (jf != NULL) {
      fprintf(jf,
              "%s\n  {\"name\": \"%s\", \"unit\": \"s\", \"work\": 1, "
              "\"work_unit\": \"item\", \"samples\": {",
              c ? "," : "", CASES[c].name);
      json_samples(jf, "simdev", off, reps);
      fputs(", ", jf);
      json_samples(jf, "trace_on", on, reps);
      fputs("}}", jf);
    }
  }
  if (jf != NULL) {
    fputs("\n]}\n", jf);
    if (ferror(jf) | (fclose(jf) != 0)) {
      fprintf(stderr, "bench_trace: writing %s failed\n", json);
      return 1;
    }
  }
  sim_mem_free(r.dev, r.src);
  sim_mem_free(r.dev, r.dst);
  sim_device_destroy(r.dev);
  free(off);
  free(on);
  return 0;
}
