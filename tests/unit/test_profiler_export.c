/*
 * test_profiler_export.c - src/profiler's writers on synthetic snapshots:
 * the Chrome trace-event JSON (checked with a strict JSON syntax checker
 * and exact substrings) and the XSpace (decoded back with src/pbwire into
 * planes, lines, events, metadata and stats), escaping of odd names, the
 * empty snapshot, dropped counts, write errors; and the trace file's
 * start/flush contract. The Python test (tests/tf/test_trace_json.py)
 * decodes the same outputs with json and with TF's own xplane_pb2.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pbwire/pbwire.h"
#include "profiler/sp.h"
#include "testutil.h"

/* ---- a strict JSON syntax checker (RFC 8259): returns the end of the
 * value at p, or NULL if it is not valid JSON. Strings must be UTF-8 with
 * no raw control characters. */
static const char* ws(const char* p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
  return p;
}
static const char* j_value(const char* p, int depth);
static const char* j_string(const char* p) {
  if (*p++ != '"') return NULL;
  for (;;) {
    unsigned char c = (unsigned char)*p;
    if (c == '"') return p + 1;
    if (c < 0x20) return NULL;
    if (c == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == 0) return NULL;
        p += 5;
      } else if (*p && strchr("\"\\/bfnrt", *p)) {
        p++;
      } else {
        return NULL;
      }
      continue;
    }
    int n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0) return NULL;
    for (int i = 1; i < n; i++)
      if (((unsigned char)p[i] & 0xc0) != 0x80) return NULL;
    p += n;
  }
}
static const char* j_number(const char* p) {
  const char* s = p;
  if (*p == '-') p++;
  if (*p == '0') {
    p++;
  } else if (*p >= '1' && *p <= '9') {
    while (*p >= '0' && *p <= '9') p++;
  } else {
    return NULL;
  }
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') p++;
  }
  return p > s ? p : NULL;
}
static const char* j_value(const char* p, int depth) {
  if (depth > 64) return NULL;
  p = ws(p);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    int obj = *p == '{';
    p = ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
      if (obj) {
        p = j_string(ws(p));
        if (p == NULL) return NULL;
        p = ws(p);
        if (*p++ != ':') return NULL;
      }
      p = j_value(p, depth + 1);
      if (p == NULL) return NULL;
      p = ws(p);
      if (*p == close) return p + 1;
      if (*p++ != ',') return NULL;
    }
  }
  if (*p == '"') return j_string(p);
  if (!strncmp(p, "true", 4)) return p + 4;
  if (!strncmp(p, "false", 5)) return p + 5;
  if (!strncmp(p, "null", 4)) return p + 4;
  return j_number(p);
}
static int json_valid(const char* text) {
  const char* end = j_value(text, 0);
  return end != NULL && *ws(end) == '\0';
}

static size_t count_of(const char* hay, const char* needle) {
  size_t n = 0;
  for (const char* p = hay; (p = strstr(p, needle)) != NULL; p++) n++;
  return n;
}

/* ---- synthetic snapshots ---------------------------------------------- */
#define T 1000000000ull
#define FAKE_TID 999999 /* no thread of this process has it */

typedef struct fixture {
  sim_trace_rec s00[2], s01[2], s10[1];
  sim_trace_stream streams[3];
  sim_trace_mem mem0[3];
  sim_trace_device devices[1];
  sim_trace_snapshot snap;
} fixture;

static const char* const k_odd = "odd \"q\"\\\n\x01 \xc3\xa9 \xff!";

static void build(fixture* f) {
  memset(f, 0, sizeof(*f));
  int32_t me = (int32_t)syscall(SYS_gettid);
  f->s00[0] = (sim_trace_rec){.id = 1,
                              .enq_ns = T,
                              .start_ns = T + 500,
                              .end_ns = T + 2500,
                              .kind = SIM_TRACE_KERNEL,
                              .name = sim_trace_intern("seq/dense/MatMul"),
                              .type = sim_trace_intern("MatMul"),
                              .enq_tid = me};
  f->s00[1] = (sim_trace_rec){.id = 2,
                              .enq_ns = T + 100,
                              .start_ns = T + 2500,
                              .end_ns = T + 3000,
                              .bytes = 4096,
                              .kind = SIM_TRACE_MEMCPY_H2D,
                              .enq_tid = FAKE_TID};
  f->s01[0] = (sim_trace_rec){.id = 3,
                              .enq_ns = T + 200,
                              .start_ns = T + 300,
                              .end_ns = T + 2600,
                              .kind = SIM_TRACE_EVENT_WAIT,
                              .peer = sim_trace_stream_key(0, 0),
                              .enq_tid = me};
  f->s01[1] = (sim_trace_rec){.id = 4,
                              .enq_ns = T + 2600,
                              .start_ns = T + 2600,
                              .end_ns = T + 2700,
                              .kind = SIM_TRACE_KERNEL,
                              .name = sim_trace_intern(k_odd),
                              .type = sim_trace_intern("Relu"),
                              .enq_tid = me,
                              .flags = SIM_TRACE_INLINE};
  f->s10[0] = (sim_trace_rec){.id = 5,
                              .enq_ns = T + 400,
                              .start_ns = T + 900,
                              .end_ns = T + 900,
                              .kind = SIM_TRACE_KERNEL,
                              .name = sim_trace_intern("dev1/k"),
                              .type = sim_trace_intern("Mul"),
                              .enq_tid = me,
                              .status = SIM_ESTREAM};
  f->streams[0] =
      (sim_trace_stream){0, 0, sim_trace_stream_key(0, 0), 1, 7, 2, f->s00};
  f->streams[1] =
      (sim_trace_stream){0, 1, sim_trace_stream_key(0, 1), 1, 0, 2, f->s01};
  f->streams[2] =
      (sim_trace_stream){1, 0, sim_trace_stream_key(1, 0), 0, 2, 1, f->s10};
  f->mem0[0] = (sim_trace_mem){T + 50, 0x1000, 4096, 4096, me, 1};
  f->mem0[1] = (sim_trace_mem){T + 60, 0, 1ull << 40, 4096, me, 0};
  f->mem0[2] = (sim_trace_mem){T + 4000, 0x1000, 4096, 0, me, -1};
  f->devices[0] = (sim_trace_device){0, 3, 3, f->mem0};
  f->snap = (sim_trace_snapshot){.begin_ns = 0,
                                 .end_ns = 0,
                                 .realtime_offset_ns = 5000000000ll,
                                 .nstreams = 3,
                                 .streams = f->streams,
                                 .ndevices = 1,
                                 .devices = f->devices};
}

static char* chrome_text(const sim_trace_snapshot* snap) {
  char* text = NULL;
  size_t len = 0;
  FILE* mf = open_memstream(&text, &len);
  assert_non_null(mf);
  char msg[256];
  assert_int_equal(sp_chrome_json_write(snap, mf, msg, sizeof(msg)), SIM_OK);
  fclose(mf);
  assert_true(json_valid(text));
  return text;
}

/* ---- Chrome JSON -------------------------------------------------------- */
static void chrome_layout(void** state) {
  fixture f;
  build(&f);
  char* t = chrome_text(&f.snap);
  assert_non_null(strstr(t, "\"displayTimeUnit\":\"ns\""));
  assert_non_null(strstr(t,
                         "{\"ph\":\"M\",\"name\":\"process_name\","
                         "\"pid\":1000,\"tid\":0,\"args\":{\"name\":"
                         "\"SIMDEV:0\"}}"));
  assert_non_null(strstr(t,
                         "\"pid\":1001,\"tid\":0,\"args\":{\"name\":"
                         "\"SIMDEV:1\"}}"));
  assert_non_null(strstr(t,
                         "{\"ph\":\"M\",\"name\":\"process_name\","
                         "\"pid\":1,\"tid\":0,\"args\":{\"name\":\"host\"}}"));
  assert_non_null(strstr(t,
                         "\"name\":\"thread_name\",\"pid\":1000,\"tid\":1,"
                         "\"args\":{\"name\":\"simdev0-s1\"}}"));
  assert_non_null(strstr(t,
                         "\"name\":\"thread_name\",\"pid\":1001,\"tid\":0,"
                         "\"args\":{\"name\":\"simdev1-s0\"}}"));
  /* Times relative to the earliest record (T), in us with 3 decimals. */
  assert_non_null(strstr(t,
                         "{\"ph\":\"X\",\"name\":\"seq/dense/MatMul\","
                         "\"cat\":\"kernel\",\"pid\":1000,\"tid\":0,"
                         "\"ts\":0.500,\"dur\":2.000,\"args\":{\"op_type\":"
                         "\"MatMul\",\"queue_delay_us\":0.500,"
                         "\"correlation_id\":1}}"));
  assert_non_null(strstr(t,
                         "\"name\":\"MemcpyH2D\",\"cat\":\"memcpy_h2d\","
                         "\"pid\":1000,\"tid\":0,\"ts\":2.500,\"dur\":0.500,"
                         "\"args\":{\"bytes\":4096,\"queue_delay_us\":2.400,"
                         "\"correlation_id\":2}}"));
  assert_non_null(strstr(t, "\"name\":\"EventWait\",\"cat\":\"event_wait\""));
  assert_non_null(strstr(t, "\"peer_stream\":\"simdev0-s0\""));
  assert_non_null(strstr(t, "\"inline\":1,\"correlation_id\":4}"));
  assert_non_null(strstr(t, "\"status\":"));
  assert_non_null(strstr(t, "\"ts\":0.900,\"dur\":0.000"));
  /* Host side: one thread per submitter; a tid that is not ours. */
  assert_non_null(strstr(t, "\"args\":{\"name\":\"thread 999999\"}}"));
  assert_int_equal(count_of(t, "\"name\":\"thread_name\",\"pid\":1,"), 2);
  assert_non_null(strstr(t,
                         "\"name\":\"submit seq/dense/MatMul\",\"cat\":"
                         "\"submit\",\"pid\":1,"));
  /* A flow per record, both ends. */
  assert_int_equal(count_of(t, "{\"ph\":\"s\","), 5);
  assert_int_equal(count_of(t, "{\"ph\":\"f\",\"bp\":\"e\","), 5);
  assert_non_null(strstr(t,
                         "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"submit\","
                         "\"cat\":\"flow\",\"id\":2,\"pid\":1000,\"tid\":0,"
                         "\"ts\":2.500}"));
  assert_int_equal(count_of(t, "{\"ph\":\"X\""), 10); /* 5 runs, 5 submits */
  /* Memory counter and the failed allocation. */
  assert_int_equal(count_of(t, "\"ph\":\"C\",\"name\":\"memory in use\""), 3);
  assert_non_null(strstr(t, "\"ts\":0.050,\"args\":{\"bytes\":4096}}"));
  assert_non_null(strstr(t, "\"ts\":4.000,\"args\":{\"bytes\":0}}"));
  assert_non_null(strstr(t, "\"name\":\"alloc failed\""));
  assert_non_null(strstr(t, "\"simdev_t0_ns\":1000000000,"));
  free(t);
}

static void chrome_escaping(void** state) {
  fixture f;
  build(&f);
  char* t = chrome_text(&f.snap);
  /* quote, backslash, newline, U+0001 escaped; é kept; 0xff -> U+FFFD. */
  assert_non_null(strstr(t,
                         "\"name\":\"odd \\\"q\\\"\\\\\\u000a\\u0001 "
                         "\xc3\xa9 \\ufffd!\",\"cat\":\"kernel\""));
  assert_non_null(strstr(t, "\"name\":\"submit odd \\\"q\\\"\\\\"));
  assert_null(strchr(t, '\x01'));
  assert_null(strchr(t, '\xff'));
  free(t);
}

static void chrome_dropped(void** state) {
  fixture f;
  build(&f);
  char* t = chrome_text(&f.snap);
  /* 7 + 2 records of streams, 3 of device 0 (its memory ring). */
  assert_non_null(strstr(t, "\"simdev_dropped_events\":12,"));
  assert_non_null(strstr(t, "\"simdev_dropped_by_device\":{\"SIMDEV:0\":3}"));
  assert_non_null(strstr(t,
                         "\"simdev_dropped_by_stream\":{\"simdev0-s0\":7,"
                         "\"simdev0-s1\":0,\"simdev1-s0\":2}"));
  free(t);
}

static void chrome_empty(void** state) {
  sim_trace_snapshot empty = {0};
  char* t = chrome_text(&empty);
  assert_null(strstr(t, "\"ph\":\"X\""));
  assert_null(strstr(t, "SIMDEV:"));
  assert_non_null(strstr(t, "\"args\":{\"name\":\"host\"}"));
  assert_non_null(strstr(t, "\"simdev_dropped_events\":0,"));
  free(t);
}

static void chrome_errors(void** state) {
  char msg[256];
  fixture f;
  build(&f);
  assert_int_equal(sp_chrome_json_write(NULL, stdout, msg, sizeof(msg)),
                   SIM_EINVAL);
  assert_non_null(strstr(msg, "NULL"));
  assert_int_equal(sp_chrome_json_write(&f.snap, NULL, msg, sizeof(msg)),
                   SIM_EINVAL);
  FILE* full = fopen("/dev/full", "w");
  if (full == NULL) skip(); /* no /dev/full in this container */
  assert_int_equal(sp_chrome_json_write(&f.snap, full, msg, sizeof(msg)),
                   SIM_ESYS);
  assert_non_null(strstr(msg, strerror(ENOSPC)));
  fclose(full);
}

/* ---- XSpace, decoded with pbwire -------------------------------------- */
typedef struct xstat {
  int64_t meta;
  int is_str;
  int64_t i;
  char s[128];
} xstat;
typedef struct xevent {
  int64_t meta, offset_ps, duration_ps;
  int nstats;
  xstat stats[12];
} xevent;
typedef struct xline {
  int64_t id, ts_ns, duration_ps;
  char name[64], display[64];
  int nevents;
  xevent events[8];
} xline;
typedef struct xplane {
  int64_t id;
  char name[64];
  int nlines;
  xline lines[4];
  int nemeta, nsmeta, nstats;
  int64_t emeta_id[16], smeta_id[16];
  char emeta[16][128], smeta[16][32];
  xstat stats[4];
} xplane;
typedef struct xspace {
  int nplanes;
  xplane planes[4];
} xspace;

static void copy_str(char* dst, size_t cap, const pbw_field* f) {
  assert_int_equal(f->wire, PBW_LEN);
  assert_true(f->len < cap);
  memcpy(dst, f->data, f->len);
  dst[f->len] = '\0';
}

static void dec_stat(const pbw_field* in, xstat* st) {
  pbw_reader r;
  pbw_field f;
  memset(st, 0, sizeof(*st));
  pbw_init_field(&r, in);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number == 1) st->meta = (int64_t)f.u;
    if (f.number == 4) st->i = (int64_t)f.u;
    if (f.number == 5) st->is_str = 1, copy_str(st->s, sizeof(st->s), &f);
  }
  assert_null(r.err);
}

/* A map<int64, X*Metadata> entry: key, and the value's id and name. */
static void dec_meta(const pbw_field* in, int64_t* key, char* name,
                     size_t cap) {
  pbw_reader r, v;
  pbw_field f, g;
  int64_t id = -1;
  pbw_init_field(&r, in);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    if (f.number == 1) *key = (int64_t)f.u;
    if (f.number == 2) {
      pbw_init_field(&v, &f);
      while (pbw_next(&v, &g) == PBW_FIELD) {
        if (g.number == 1) id = (int64_t)g.u;
        if (g.number == 2) copy_str(name, cap, &g);
      }
    }
  }
  assert_int_equal(id, *key);
}

static void dec_line(const pbw_field* in, xline* l) {
  pbw_reader r, e;
  pbw_field f, g;
  pbw_init_field(&r, in);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    switch (f.number) {
      case 1: l->id = (int64_t)f.u; break;
      case 2: copy_str(l->name, sizeof(l->name), &f); break;
      case 3: l->ts_ns = (int64_t)f.u; break;
      case 9: l->duration_ps = (int64_t)f.u; break;
      case 11: copy_str(l->display, sizeof(l->display), &f); break;
      case 4: {
        assert_true(l->nevents < 8);
        xevent* ev = &l->events[l->nevents++];
        pbw_init_field(&e, &f);
        while (pbw_next(&e, &g) == PBW_FIELD) {
          if (g.number == 1) ev->meta = (int64_t)g.u;
          if (g.number == 2) ev->offset_ps = (int64_t)g.u;
          if (g.number == 3) ev->duration_ps = (int64_t)g.u;
          if (g.number == 4) {
            assert_true(ev->nstats < 12);
            dec_stat(&g, &ev->stats[ev->nstats++]);
          }
        }
        break;
      }
      default: fail_msg("unexpected XLine field %u", f.number);
    }
  }
  assert_null(r.err);
}

static void decode(const uint8_t* buf, size_t len, xspace* xs) {
  pbw_reader r, p;
  pbw_field f, g;
  memset(xs, 0, sizeof(*xs));
  pbw_init(&r, buf, len);
  while (pbw_next(&r, &f) == PBW_FIELD) {
    assert_int_equal(f.number, 1);
    assert_true(xs->nplanes < 4);
    xplane* pl = &xs->planes[xs->nplanes++];
    pbw_init_field(&p, &f);
    while (pbw_next(&p, &g) == PBW_FIELD) {
      switch (g.number) {
        case 1: pl->id = (int64_t)g.u; break;
        case 2: copy_str(pl->name, sizeof(pl->name), &g); break;
        case 3: dec_line(&g, &pl->lines[pl->nlines++]); break;
        case 4:
          dec_meta(&g, &pl->emeta_id[pl->nemeta], pl->emeta[pl->nemeta], 128);
          pl->nemeta++;
          break;
        case 5:
          dec_meta(&g, &pl->smeta_id[pl->nsmeta], pl->smeta[pl->nsmeta], 32);
          pl->nsmeta++;
          break;
        case 6: dec_stat(&g, &pl->stats[pl->nstats++]); break;
        default: fail_msg("unexpected XPlane field %u", g.number);
      }
    }
    assert_null(p.err);
  }
  assert_null(r.err);
}

static const char* emeta_name(const xplane* pl, int64_t id) {
  for (int i = 0; i < pl->nemeta; i++)
    if (pl->emeta_id[i] == id) return pl->emeta[i];
  fail_msg("no event metadata %" PRId64, id);
  return NULL;
}

/* The stat named `name` of ev, or NULL. */
static const xstat* stat_of(const xplane* pl, const xevent* ev,
                            const char* name) {
  int64_t id = -1;
  for (int i = 0; i < pl->nsmeta; i++)
    if (strcmp(pl->smeta[i], name) == 0) id = pl->smeta_id[i];
  assert_true(id > 0);
  for (int i = 0; i < ev->nstats; i++)
    if (ev->stats[i].meta == id) return &ev->stats[i];
  return NULL;
}

static void xspace_of(const sim_trace_snapshot* snap, xspace* xs) {
  uint8_t* buf;
  size_t len;
  assert_int_equal(sp_xspace_encode(snap, &buf, &len), SIM_OK);
  assert_non_null(buf);
  decode(buf, len, xs);
  free(buf);
}

static void xspace_layout(void** state) {
  fixture f;
  build(&f);
  static xspace xs;
  xspace_of(&f.snap, &xs);
  assert_int_equal(xs.nplanes, 2);
  const xplane* p0 = &xs.planes[0];
  assert_int_equal(p0->id, 0);
  assert_string_equal(p0->name, "/device:CUSTOM:0");
  assert_string_equal(xs.planes[1].name, "/device:CUSTOM:1");
  assert_int_equal(xs.planes[1].id, 1);
  assert_int_equal(p0->nlines, 2);
  const xline* l0 = &p0->lines[0];
  assert_int_equal(l0->id, 0);
  assert_string_equal(l0->name, "simdev0-s0");
  assert_string_equal(l0->display, "simdev0-s0");
  /* CLOCK_REALTIME: monotonic + the snapshot's offset. */
  assert_int_equal(l0->ts_ns, (int64_t)(T + 500) + 5000000000ll);
  assert_int_equal(l0->duration_ps, 2500 * 1000);
  assert_int_equal(l0->nevents, 2);
  const xevent* e = &l0->events[0];
  assert_string_equal(emeta_name(p0, e->meta), "seq/dense/MatMul");
  assert_int_equal(e->offset_ps, 0);
  assert_int_equal(e->duration_ps, 2000 * 1000);
  assert_string_equal(stat_of(p0, e, "tf_op")->s, "seq/dense/MatMul:MatMul");
  assert_string_equal(stat_of(p0, e, "op_type")->s, "MatMul");
  assert_string_equal(stat_of(p0, e, "kind")->s, "kernel");
  assert_int_equal(stat_of(p0, e, "queue_delay_ps")->i, 500 * 1000);
  assert_int_equal(stat_of(p0, e, "correlation_id")->i, 1);
  assert_null(stat_of(p0, e, "bytes"));
  assert_null(stat_of(p0, e, "status"));
  assert_null(stat_of(p0, e, "inline"));
  e = &l0->events[1];
  assert_string_equal(emeta_name(p0, e->meta), "MemcpyH2D");
  assert_int_equal(e->offset_ps, 2000 * 1000);
  assert_int_equal(stat_of(p0, e, "bytes")->i, 4096);
  assert_null(stat_of(p0, e, "tf_op"));

  const xline* l1 = &p0->lines[1];
  assert_string_equal(l1->name, "simdev0-s1");
  e = &l1->events[0];
  assert_string_equal(emeta_name(p0, e->meta), "EventWait");
  assert_string_equal(stat_of(p0, e, "peer_stream")->s, "simdev0-s0");
  e = &l1->events[1];
  assert_int_equal(stat_of(p0, e, "inline")->i, 1);

  const xplane* p1 = &xs.planes[1];
  e = &p1->lines[0].events[0];
  assert_string_equal(emeta_name(p1, e->meta), "dev1/k");
  assert_int_equal(e->duration_ps, 0);
  assert_string_equal(stat_of(p1, e, "status")->s, sim_strerror(SIM_ESTREAM));
  /* Metadata ids from 1, per plane; one per distinct name. */
  assert_int_equal(p0->nemeta, 4);
  assert_int_equal(p1->nemeta, 1);
  assert_int_equal(p1->emeta_id[0], 1);
}

static void xspace_utf8(void** state) {
  fixture f;
  build(&f);
  static xspace xs;
  xspace_of(&f.snap, &xs);
  const xplane* p0 = &xs.planes[0];
  const xevent* e = &p0->lines[1].events[1];
  /* The bytes kept, except 0xff, which becomes U+FFFD (ef bf bd). */
  assert_string_equal(emeta_name(p0, e->meta),
                      "odd \"q\"\\\n\x01 \xc3\xa9 \xef\xbf\xbd!");
  assert_string_equal(stat_of(p0, e, "tf_op")->s,
                      "odd \"q\"\\\n\x01 \xc3\xa9 \xef\xbf\xbd!:Relu");
}

static void xspace_dropped(void** state) {
  fixture f;
  build(&f);
  static xspace xs;
  xspace_of(&f.snap, &xs);
  for (int p = 0; p < 2; p++) {
    const xplane* pl = &xs.planes[p];
    assert_int_equal(pl->nstats, 1);
    int64_t id = -1;
    for (int i = 0; i < pl->nsmeta; i++)
      if (strcmp(pl->smeta[i], "dropped_events") == 0) id = pl->smeta_id[i];
    assert_int_equal(pl->stats[0].meta, id);
    /* Device 0: 7 records of simdev0-s0 + 3 memory records; device 1: 2. */
    assert_int_equal(pl->stats[0].i, p == 0 ? 10 : 2);
  }
}

static void xspace_empty(void** state) {
  sim_trace_snapshot empty = {0};
  uint8_t* buf = NULL;
  size_t len = 99;
  assert_int_equal(sp_xspace_encode(&empty, &buf, &len), SIM_OK);
  assert_non_null(buf);
  assert_int_equal(len, 0); /* an XSpace without planes */
  free(buf);
  assert_int_equal(sp_xspace_encode(NULL, &buf, &len), SIM_EINVAL);
}

/* ---- the trace file (once per process: one test does it all) ---------- */
static void tracefile_lifecycle(void** state) {
  char msg[512];
  assert_int_equal(sp_tracefile_flush(msg, sizeof(msg)), SIM_EINVAL);
  assert_int_equal(
      sp_tracefile_start("/nonexistent-dir/x/trace.json", 0, msg, sizeof(msg)),
      SIM_ESYS);
  assert_non_null(strstr(msg, strerror(ENOENT)));
  assert_non_null(strstr(msg, "/nonexistent-dir/x/trace.json"));

  /* Not a regular file: refused at start (it could not be rewritten). */
  assert_int_equal(sp_tracefile_start("/dev/null", 0, msg, sizeof(msg)),
                   SIM_EINVAL);
  assert_non_null(strstr(msg, "not a regular file"));
  assert_false(sim_trace_active());

  char path[] = "/tmp/simdev_tracefile_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  /* A ring size device_sim refuses: an error, and no trace started. */
  assert_int_not_equal(
      sp_tracefile_start(path, SIM_TRACE_MAX_RECORDS + 1u, msg, sizeof(msg)),
      SIM_OK);
  assert_int_equal(sp_tracefile_flush(msg, sizeof(msg)), SIM_EINVAL);

  assert_int_equal(sp_tracefile_start(path, 2048, msg, sizeof(msg)), SIM_OK);
  assert_true(sim_trace_active());
  assert_int_equal(sp_tracefile_start(path, 2048, msg, sizeof(msg)),
                   SIM_EINVAL);
  assert_non_null(strstr(msg, "already started"));

  sim_device* dev;
  sim_stream* s;
  assert_int_equal(tu_device_create(0, TU_MEMORY_MB, &dev), SIM_OK);
  assert_int_equal(sim_stream_create(dev, &s), SIM_OK);
  tu_item it;
  tu_item_init(&it, 1, NULL);
  it.work.trace.kind = SIM_TRACE_KERNEL;
  it.work.trace.name = sim_trace_intern("tracefile/kernel");
  assert_int_equal(sim_stream_submit(s, &it.work), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  sim_stream_destroy(s);
  sim_device_destroy(dev);

  /* Each flush rewrites the whole file: twice gives the same one object. */
  for (int round = 0; round < 2; round++) {
    assert_int_equal(sp_tracefile_flush(msg, sizeof(msg)), SIM_OK);
    FILE* f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_true(json_valid(text));
    assert_int_equal(count_of(text, "\"name\":\"tracefile/kernel\""), 1);
    assert_int_equal(count_of(text, "\"traceEvents\""), 1);
  }
  /* A write that fails (file size limit) is an error; the next one, with
   * the limit lifted, succeeds and says so (no stale error flag). */
  struct rlimit saved;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*old_xfsz)(int) = signal(SIGXFSZ, SIG_IGN);
  struct rlimit tiny = saved;
  tiny.rlim_cur = 64;
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &tiny), 0);
  int failed = sp_tracefile_flush(msg, sizeof(msg));
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
  signal(SIGXFSZ, old_xfsz);
  assert_int_equal(failed, SIM_ESYS);
  assert_non_null(strstr(msg, strerror(EFBIG)));
  assert_int_equal(sp_tracefile_flush(msg, sizeof(msg)), SIM_OK);
  /* The exit handler writes into the unlinked file: no litter in /tmp. */
  unlink(path);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chrome_layout),  cmocka_unit_test(chrome_escaping),
      cmocka_unit_test(chrome_dropped), cmocka_unit_test(chrome_empty),
      cmocka_unit_test(chrome_errors),  cmocka_unit_test(xspace_layout),
      cmocka_unit_test(xspace_utf8),    cmocka_unit_test(xspace_dropped),
      cmocka_unit_test(xspace_empty),   cmocka_unit_test(tracefile_lifecycle),
  };
  tu_init(argc, argv);
  return cmocka_run_group_tests_name("profiler_export", tests, NULL, NULL);
}
