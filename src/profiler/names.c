/*
 * names.c - the names and helpers both writers share (sp_internal.h): one
 * place decides what an event is called, so the Chrome JSON and the XSpace
 * never disagree (tests compare them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/sp_internal.h"

/* Indexed by sim_trace_kind. The memcpy names are the ones TF's own GPU
 * profiles use for copies, so people who know those read these at once. */
static const char* const k_fixed_names[SIM_TRACE_KIND_COUNT] = {
    [SIM_TRACE_OTHER] = "Other",
    [SIM_TRACE_KERNEL] = "Kernel",
    [SIM_TRACE_MEMCPY_H2D] = "MemcpyH2D",
    [SIM_TRACE_MEMCPY_D2H] = "MemcpyD2H",
    [SIM_TRACE_MEMCPY_D2D] = "MemcpyD2D",
    [SIM_TRACE_MEMCPY_H2H] = "MemcpyH2H",
    [SIM_TRACE_MEMSET] = "Memset",
    [SIM_TRACE_EVENT_RECORD] = "EventRecord",
    [SIM_TRACE_EVENT_WAIT] = "EventWait",
    [SIM_TRACE_STREAM_WAIT] = "StreamWait",
    [SIM_TRACE_HOST_CALLBACK] = "HostCallback",
    [SIM_TRACE_TIMER] = "Timer",
};

const char* sp_event_name(const sim_trace_rec* r) {
  if (r->kind == SIM_TRACE_KERNEL || r->kind == SIM_TRACE_OTHER) {
    const char* s = sim_trace_name(r->name);
    if (s[0] != '\0') return s;
    if (r->kind == SIM_TRACE_KERNEL) {
      s = sim_trace_name(r->type);
      if (s[0] != '\0') return s;
    }
  }
  /* A kind from a newer recorder than this writer: still a named event. */
  if (r->kind >= SIM_TRACE_KIND_COUNT) return "Other";
  return k_fixed_names[r->kind];
}

void sp_stream_label(int device, int stream, char* buf, size_t len) {
  snprintf(buf, len, "simdev%d-s%d", device, stream);
}

void sp_stream_key_label(uint32_t key, char* buf, size_t len) {
  if (key == 0) {
    if (len > 0) buf[0] = '\0';
    return;
  }
  uint32_t k = key - 1u; /* sim_trace_stream_key's inverse */
  sp_stream_label((int)(k >> 16), (int)(k & 0xffffu), buf, len);
}

uint64_t sp_snapshot_t0(const sim_trace_snapshot* snap) {
  uint64_t t0 = UINT64_MAX;
  for (size_t i = 0; i < snap->nstreams; i++) {
    const sim_trace_stream* st = &snap->streams[i];
    for (size_t j = 0; j < st->count; j++) {
      const sim_trace_rec* r = &st->recs[j];
      /* enq_ns 0 would be a record without a submit stamp (synthetic
       * snapshots); its start still counts. */
      if (r->enq_ns != 0 && r->enq_ns < t0) t0 = r->enq_ns;
      if (r->start_ns < t0) t0 = r->start_ns;
    }
  }
  for (size_t i = 0; i < snap->ndevices; i++) {
    const sim_trace_device* d = &snap->devices[i];
    for (size_t j = 0; j < d->count; j++)
      if (d->mem[j].ns < t0) t0 = d->mem[j].ns;
  }
  return t0 == UINT64_MAX ? snap->begin_ns : t0;
}

int sp_snapshot_max_device(const sim_trace_snapshot* snap) {
  int max = -1;
  for (size_t i = 0; i < snap->nstreams; i++)
    if (snap->streams[i].device > max) max = snap->streams[i].device;
  for (size_t i = 0; i < snap->ndevices; i++)
    if (snap->devices[i].device > max) max = snap->devices[i].device;
  return max;
}

size_t sp_utf8_next(const unsigned char* s, size_t n, uint32_t* cp) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v, min;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, v = c & 0x1fu, min = 0x80;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, v = c & 0x0fu, min = 0x800;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, v = c & 0x07u, min = 0x10000;
  } else {
    return 0; /* continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3fu);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

const char* sp_utf8_repair(const char* s, char** owned) {
  *owned = NULL;
  const unsigned char* u = (const unsigned char*)s;
  size_t n = strlen(s), bad = 0;
  uint32_t cp;
  for (size_t i = 0; i < n;) {
    size_t k = sp_utf8_next(u + i, n - i, &cp);
    if (k == 0) bad++, k = 1;
    i += k;
  }
  if (bad == 0) return s;
  /* Each bad byte (1) becomes U+FFFD (3 bytes: ef bf bd). */
  char* out = malloc(n + 2 * bad + 1);
  if (out == NULL) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = sp_utf8_next(u + i, n - i, &cp);
    if (k == 0) {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3, i += 1;
    } else {
      memcpy(out + o, s + i, k);
      o += k, i += k;
    }
  }
  out[o] = '\0';
  *owned = out;
  return out;
}
