/*
 * chrome.c - a snapshot as Chrome trace-event JSON (sp_chrome_json_write):
 * the format Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * Layout (the names are fixed by the issue-15 plan; tests check them):
 *   - pid 1000 + ordinal, "SIMDEV:<ordinal>": one thread per stream
 *     (tid = stream id, "simdev<d>-s<n>") with a complete ("X") event per
 *     record; a counter ("C") track "memory in use" from the memory ring,
 *     and an instant "alloc failed" per failed allocation.
 *   - pid 1, "host": one thread per submitting Linux tid, named as the
 *     recorder saw it at its first record (sim_trace_thread_name), else from
 *     /proc/self/task/<tid>/comm if the thread still exists, else
 *     "thread <tid>"; a short "submit <name>" slice at each enqueue.
 *   - a flow ("s" on the submit slice, "f" on the run, id = the correlation
 *     id) from every submit to its run.
 *   - otherData: the dropped-record counts (all, by stream, by device) and
 *     the clock.
 * Times are microseconds with three decimals (exact nanoseconds, written as
 * integers so no float rounding creeps in), relative to the earliest time in
 * the snapshot (sp_snapshot_t0). The trace states displayTimeUnit "ns".
 *
 * Thread contract: none beyond the caller's: snap is read-only here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/sp_internal.h"

#define HOST_PID 1
#define DEVICE_PID0 1000
/* The submit slice's length when the thread's next submit is further away:
 * long enough to click on, short enough not to hide anything. */
#define SUBMIT_SLICE_NS 1000u

/* Writes s as a JSON string: quotes, backslashes and control characters
 * escaped, ill-formed UTF-8 bytes as U+FFFD (JSON text must be UTF-8). */
static void put_json_str(FILE* f, const char* s) {
  const unsigned char* u = (const unsigned char*)s;
  size_t n = strlen(s);
  fputc('"', f);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = sp_utf8_next(u + i, n - i, &cp);
    if (k == 0) {
      fputs("\\ufffd", f);
      i++;
      continue;
    }
    if (cp == '"' || cp == '\\') {
      fputc('\\', f), fputc((int)cp, f);
    } else if (cp < 0x20) {
      fprintf(f, "\\u%04x", (unsigned)cp);
    } else {
      fwrite(u + i, 1, k, f);
    }
    i += k;
  }
  fputc('"', f);
}

/* ns since t0 as microseconds: "<us>.<3 digits>". */
static void put_us(FILE* f, uint64_t ns) {
  fprintf(f, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}

static uint64_t since(uint64_t t, uint64_t t0) {
  return t > t0 ? t - t0 : 0;
}

/* Starts the next element of traceEvents. */
static void next_event(FILE* f, int* first) {
  fputs(*first ? "\n" : ",\n", f);
  *first = 0;
}

static void put_meta(FILE* f, int* first, const char* what, int pid, int tid,
                     const char* name) {
  next_event(f, first);
  fprintf(f,
          "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,"
          "\"args\":{\"name\":",
          what, pid, tid);
  put_json_str(f, name);
  fputs("}}", f);
}

static void put_sort_index(FILE* f, int* first, int pid, int index) {
  next_event(f, first);
  fprintf(f,
          "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
          "\"tid\":0,\"args\":{\"sort_index\":%d}}",
          pid, index);
}

/* One run: the "X" event on the stream's track and the flow's end. */
static void put_run(FILE* f, int* first, const sim_trace_stream* st,
                    const sim_trace_rec* r, uint64_t t0) {
  int pid = DEVICE_PID0 + st->device;
  uint64_t dur = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
  next_event(f, first);
  fputs("{\"ph\":\"X\",\"name\":", f);
  put_json_str(f, sp_event_name(r));
  fputs(",\"cat\":", f);
  put_json_str(f, sim_trace_kind_name((int)r->kind));
  fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", pid, st->stream);
  put_us(f, since(r->start_ns, t0));
  fputs(",\"dur\":", f);
  put_us(f, dur);
  fputs(",\"args\":{", f);
  const char* type = sim_trace_name(r->type);
  if (type[0] != '\0') {
    fputs("\"op_type\":", f);
    put_json_str(f, type);
    fputc(',', f);
  }
  if (sp_rec_has_bytes(r)) fprintf(f, "\"bytes\":%" PRIu64 ",", r->bytes);
  if (r->enq_ns != 0) {
    fputs("\"queue_delay_us\":", f);
    put_us(f, since(r->start_ns, r->enq_ns));
    fputc(',', f);
  }
  if (r->peer != 0) {
    char peer[48];
    sp_stream_key_label(r->peer, peer, sizeof(peer));
    fprintf(f, "\"peer_stream\":\"%s\",", peer);
  }
  if (r->status != SIM_OK) {
    fputs("\"status\":", f);
    put_json_str(f, sim_strerror(r->status));
    fputc(',', f);
  }
  if (r->flags & SIM_TRACE_INLINE) fputs("\"inline\":1,", f);
  fprintf(f, "\"correlation_id\":%" PRIu64 "}}", r->id);

  if (r->id != 0 && r->enq_tid > 0) {
    next_event(f, first);
    fprintf(f,
            "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"submit\",\"cat\":"
            "\"flow\",\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d,\"ts\":",
            r->id, pid, st->stream);
    put_us(f, since(r->start_ns, t0));
    fputc('}', f);
  }
}

/* A submit seen from the host: which record, on which thread, when. */
typedef struct submit {
  int32_t tid;
  uint64_t ns, id;
  const sim_trace_rec* rec;
} submit;

static int submit_cmp(const void* a, const void* b) {
  const submit* x = a;
  const submit* y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ns != y->ns) return x->ns < y->ns ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static void host_thread_name(int32_t tid, char* buf, size_t len) {
  const char* known = sim_trace_thread_name(tid); /* named when it submitted */
  if (known != NULL) {
    snprintf(buf, len, "%s", known);
    return;
  }
  int saved = errno; /* a thread gone is no write error (see the end) */
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
  FILE* c = fopen(path, "r");
  buf[0] = '\0';
  if (c != NULL) {
    if (fgets(buf, (int)len, c) == NULL) buf[0] = '\0';
    fclose(c);
    buf[strcspn(buf, "\n")] = '\0';
  }
  if (buf[0] == '\0') snprintf(buf, len, "thread %d", (int)tid);
  errno = saved;
}

/* The host process: a thread per submitter, a slice per submit and the
 * flow's start. Submit slices on one thread never overlap (a slice ends at
 * the thread's next submit at the latest): viewers drop slices that are
 * not properly nested. */
static int put_host(FILE* f, int* first, const sim_trace_snapshot* snap,
                    uint64_t t0) {
  size_t n = 0;
  for (size_t i = 0; i < snap->nstreams; i++)
    for (size_t j = 0; j < snap->streams[i].count; j++) {
      const sim_trace_rec* r = &snap->streams[i].recs[j];
      if (r->id != 0 && r->enq_tid > 0) n++;
    }
  put_meta(f, first, "process_name", HOST_PID, 0, "host");
  put_sort_index(f, first, HOST_PID, 0);
  if (n == 0) return SIM_OK;
  submit* subs = malloc(n * sizeof(*subs));
  if (subs == NULL) return SIM_ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < snap->nstreams; i++)
    for (size_t j = 0; j < snap->streams[i].count; j++) {
      const sim_trace_rec* r = &snap->streams[i].recs[j];
      if (r->id != 0 && r->enq_tid > 0)
        subs[k++] = (submit){r->enq_tid, r->enq_ns, r->id, r};
    }
  qsort(subs, n, sizeof(*subs), submit_cmp);
  for (size_t i = 0; i < n; i++) {
    const submit* s = &subs[i];
    if (i == 0 || subs[i - 1].tid != s->tid) {
      char name[64];
      host_thread_name(s->tid, name, sizeof(name));
      put_meta(f, first, "thread_name", HOST_PID, s->tid, name);
    }
    uint64_t dur = SUBMIT_SLICE_NS;
    if (i + 1 < n && subs[i + 1].tid == s->tid && subs[i + 1].ns - s->ns < dur)
      dur = subs[i + 1].ns - s->ns;
    const char* name = sp_event_name(s->rec);
    next_event(f, first);
    fputs("{\"ph\":\"X\",\"name\":", f);
    /* "submit " + name, escaped as one string. */
    size_t len = strlen(name);
    char* full = malloc(len + 8);
    if (full == NULL) {
      free(subs);
      return SIM_ENOMEM;
    }
    memcpy(full, "submit ", 7);
    memcpy(full + 7, name, len + 1);
    put_json_str(f, full);
    free(full);
    fprintf(f, ",\"cat\":\"submit\",\"pid\":%d,\"tid\":%d,\"ts\":", HOST_PID,
            (int)s->tid);
    put_us(f, since(s->ns, t0));
    fputs(",\"dur\":", f);
    put_us(f, dur);
    fprintf(f, ",\"args\":{\"correlation_id\":%" PRIu64 "}}", s->id);
    next_event(f, first);
    fprintf(f,
            "{\"ph\":\"s\",\"name\":\"submit\",\"cat\":\"flow\",\"id\":%" PRIu64
            ",\"pid\":%d,\"tid\":%d,\"ts\":",
            s->id, HOST_PID, (int)s->tid);
    put_us(f, since(s->ns, t0));
    fputc('}', f);
  }
  free(subs);
  return SIM_OK;
}

static void put_memory(FILE* f, int* first, const sim_trace_device* d,
                       uint64_t t0) {
  int pid = DEVICE_PID0 + d->device;
  for (size_t j = 0; j < d->count; j++) {
    const sim_trace_mem* m = &d->mem[j];
    next_event(f, first);
    fprintf(f,
            "{\"ph\":\"C\",\"name\":\"memory in use\",\"pid\":%d,"
            "\"tid\":0,\"ts\":",
            pid);
    put_us(f, since(m->ns, t0));
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", m->in_use);
    if (m->op == 0) {
      next_event(f, first);
      fprintf(f,
              "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"alloc failed\","
              "\"cat\":\"memory\",\"pid\":%d,\"tid\":0,\"ts\":",
              pid);
      put_us(f, since(m->ns, t0));
      fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 ",\"tid\":%d}}", m->bytes,
              (int)m->tid);
    }
  }
}

/* The dropped counts: all of them, then by stream (records its ring
 * overwrote) and by device (memory records overwritten, plus the records of
 * destroyed streams' rings that device_sim freed: sim_trace_device). */
static void put_other_data(FILE* f, const sim_trace_snapshot* snap,
                           uint64_t t0) {
  uint64_t total = 0;
  for (size_t i = 0; i < snap->nstreams; i++) total += snap->streams[i].dropped;
  for (size_t i = 0; i < snap->ndevices; i++) total += snap->devices[i].dropped;
  fprintf(f,
          "\"otherData\":{\"simdev_dropped_events\":%" PRIu64
          ",\"simdev_dropped_by_stream\":{",
          total);
  for (size_t i = 0; i < snap->nstreams; i++) {
    char label[48];
    sp_stream_label(snap->streams[i].device, snap->streams[i].stream, label,
                    sizeof(label));
    fprintf(f, "%s\"%s\":%" PRIu64, i ? "," : "", label,
            snap->streams[i].dropped);
  }
  fputs("},\"simdev_dropped_by_device\":{", f);
  for (size_t i = 0; i < snap->ndevices; i++)
    fprintf(f, "%s\"SIMDEV:%d\":%" PRIu64, i ? "," : "",
            snap->devices[i].device, snap->devices[i].dropped);
  fprintf(f,
          "},\"simdev_clock\":\"CLOCK_MONOTONIC\",\"simdev_t0_ns\":%" PRIu64
          ",\"simdev_realtime_offset_ns\":%" PRId64 "}",
          t0, snap->realtime_offset_ns);
}

int sp_chrome_json_write(const sim_trace_snapshot* snap, FILE* f, char* msg,
                         size_t msg_len) {
  if (msg_len > 0) msg[0] = '\0';
  if (snap == NULL || f == NULL) {
    snprintf(msg, msg_len, "sp_chrome_json_write: NULL %s",
             snap == NULL ? "snapshot" : "file");
    return SIM_EINVAL;
  }
  errno = 0; /* the reason reported at the end is this write's */
  uint64_t t0 = sp_snapshot_t0(snap);
  int first = 1;
  fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);

  int max_dev = sp_snapshot_max_device(snap);
  for (int d = 0; d <= max_dev; d++) {
    if (!sp_snapshot_has_device(snap, d)) continue;
    char name[32];
    snprintf(name, sizeof(name), "SIMDEV:%d", d);
    put_meta(f, &first, "process_name", DEVICE_PID0 + d, 0, name);
    put_sort_index(f, &first, DEVICE_PID0 + d, 1 + d);
  }
  for (size_t i = 0; i < snap->nstreams; i++) {
    const sim_trace_stream* st = &snap->streams[i];
    char label[48];
    sp_stream_label(st->device, st->stream, label, sizeof(label));
    put_meta(f, &first, "thread_name", DEVICE_PID0 + st->device, st->stream,
             label);
    for (size_t j = 0; j < st->count; j++)
      put_run(f, &first, st, &st->recs[j], t0);
  }
  int err = put_host(f, &first, snap, t0);
  if (err != SIM_OK) {
    snprintf(msg, msg_len, "Chrome trace: out of memory sorting the submits");
    return err;
  }
  for (size_t i = 0; i < snap->ndevices; i++)
    put_memory(f, &first, &snap->devices[i], t0);
  fputs("\n],\n", f);
  put_other_data(f, snap, t0);
  fputs("}\n", f);

  if (fflush(f) != 0 || ferror(f)) {
    snprintf(msg, msg_len, "writing the Chrome trace failed: %s",
             strerror(errno ? errno : EIO));
    return SIM_ESYS;
  }
  return SIM_OK;
}
