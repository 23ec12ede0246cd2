/*
 * generic_faults.c - error paths, valid for any plugin: what TF needs from a
 * plugin once something failed (a host callback's error, or the plugin's
 * own failures: an allocation refused, a copy that did not happen, a record
 * refused). Nothing here knows the plugin: simdev's own part (that
 * SIMDEV_FAULTS's plan fires, with its messages) is simdev_checks.c's
 * faults.plugin_errors.simdev, which runs the same sequence
 * (conf_faults_sequence).
 *
 * faults.callback_error: the harness's own host callbacks fail, chosen by
 *   --faults with the part of SIMDEV_FAULTS's grammar a harness can apply
 *   without plugin knowledge: `callback:nth=N` or `callback:every=N`
 *   (comma-separated rules; default callback:nth=1). The option is passed
 *   to the test's process as CONF_FAULTS.
 * faults.plugin_errors: a fixed sequence of allocations, copies there and
 *   back on two streams, event records and waits, then teardown. With a
 *   plugin that never fails it only notes that; with a plugin made to fail
 *   (by its own means, e.g. simdev's SIMDEV_FAULTS in the environment)
 *   every failure it sees is held to TF's contracts: reported as a status
 *   of the call or of the stream it was on, never silent; nothing left
 *   pending; memory released.
 * A hang is caught by the runner (each test has its own process and
 * timeout) and reported as that test's failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "generic.h"

#define GENERIC_FAULTS_RULES(X)                                                \
  X(R_F_CB_DRAIN, "faults.callbacks_after_error_run", REQUIRED,                \
    "host_callback",                                                           \
    "Host callbacks enqueued behind one that returned an error still run, "    \
    "once each: CStream::DoHostCallbackWithStatus hands every callback a "     \
    "context only HostCallbackTrampoline frees, and whoever enqueued it "      \
    "waits for it; a stream in error that drops them leaks and hangs its "     \
    "callers.")                                                                \
  X(R_F_SYNC_ERR, "faults.sync_reports_error", RECOMMENDED,                    \
    "block_host_until_done",                                                   \
    "After an error on a stream, block_host_until_done returns an error "      \
    "status (it must return at all: the runner's timeout catches a hang): "    \
    "CStream::BlockHostUntilDone returns it to whoever synchronizes "          \
    "(PluggableDeviceUtil::Sync), so the failure surfaces there.")             \
  X(R_F_STICKY, "faults.stream_error_sticky", RECOMMENDED,                     \
    "get_stream_status",                                                       \
    "Once work on a stream failed, get_stream_status reports an error, also "  \
    "after later work on it: CStream::RefreshStatus latches it, and the "      \
    "work behind a failure ran on inputs that were never produced.")           \
  X(R_F_EVENT_RESOLVES, "faults.events_resolve", REQUIRED, "get_event_status", \
    "An event recorded (record_event returned OK) on a stream in error is "    \
    "no longer SE_EVENT_PENDING once the stream is done: TF's EventMgr "       \
    "polls it until it is not pending; the tensors and done callbacks "        \
    "behind it would wait forever. (TF 2.21 aborts on SE_EVENT_ERROR: "        \
    "that is TF's choice, and the plugin's way to say the work failed.)")      \
  X(R_F_OTHER_STREAM, "faults.other_streams_work", RECOMMENDED,                \
    "memcpy_htod / memcpy_dtoh",                                               \
    "An error on one stream leaves the device's other streams working (a "     \
    "copy there and back is exact): TF keeps separate copy streams per "       \
    "device, and a failed step's error is the step's.")                        \
  X(R_F_FREE, "faults.memory_released", RECOMMENDED,                           \
    "deallocate / get_allocator_stats",                                        \
    "Memory allocated around errors is released by deallocate: "               \
    "get_allocator_stats's bytes_in_use returns to its value before (TF "      \
    "frees every tensor of a failed step; memory that stays in use after "     \
    "errors runs a long job out of memory).")                                  \
  X(R_F_ALLOC_NULL, "faults.failed_allocate_is_null", REQUIRED, "allocate",    \
    "An allocate that fails leaves opaque NULL and size 0 (TF's "              \
    "DeviceMemoryBaseFromC takes any non-NULL opaque as memory, and its "      \
    "allocators take NULL as out of memory: ResourceExhausted).")              \
  X(R_F_REPORTED, "faults.failed_copy_reported", REQUIRED,                     \
    "memcpy_htod / memcpy_dtoh / get_stream_status",                           \
    "A copy whose bytes did not arrive is reported: by its enqueue status, "   \
    "or by get_stream_status or block_host_until_done of the stream it was "   \
    "on (an error of another stream does not explain it). Otherwise TF "       \
    "hands the op that needed it garbage, silently.")
CONF_RULES(conf_generic_faults_rules, GENERIC_FAULTS_RULES)

/* ---- the harness's plan: --faults -------------------------------------- */

/* The part of SIMDEV_FAULTS's grammar (docs/debugging.md, "Fault
 * injection") a harness can apply without plugin knowledge: errors of its
 * own host callbacks, i.e. `callback:nth=N` and `callback:every=N`, N
 * decimal from 1 to 2^63, comma-separated, no spaces, at most kMaxRules.
 * Kinds, keys and seed= of the rest of the grammar are a plugin's own. */
enum { kMaxRules = 16 };

typedef struct cb_plan {
  int n;
  struct {
    int every; /* 0: nth */
    uint64_t v;
  } rule[kMaxRules];
} cb_plan;

/* Decimal digits only: no sign, space, suffix or overflow; <= 2^63. */
static int parse_count(const char* v, size_t len, uint64_t* out) {
  if (len == 0 || len > 19) return 0;
  uint64_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9') return 0;
    n = n * 10 + (uint64_t)(v[i] - '0');
  }
  if (n > (1ull << 63)) return 0;
  *out = n;
  return 1;
}

static int plan_error(char* msg, size_t len, const char* rule, size_t rlen,
                      const char* what) {
  snprintf(msg, len, "invalid --faults rule \"%.*s%s\": %s",
           (int)(rlen > 64 ? 64 : rlen), rule, rlen > 64 ? "..." : "", what);
  return 0;
}

/* One rule (s, len: no comma in it) into p. */
static int parse_rule(const char* s, size_t len, cb_plan* p, char* msg,
                      size_t mlen) {
  static const char* const plugin_kinds[] = {
      "alloc",  "memcpy_h2d", "memcpy_d2h", "memcpy_d2d",
      "launch", "stream",     "event"};
  char what[256];
  if (len == 0)
    return plan_error(msg, mlen, s, 0,
                      "empty rule (two commas, or one at an end)");
  for (size_t i = 0; i < len; i++)
    if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')
      return plan_error(msg, mlen, s, len, "no spaces allowed");
  if (len >= 5 && strncmp(s, "seed=", 5) == 0)
    return plan_error(msg, mlen, s, len,
                      "seed= seeds p= rules, which the harness does not "
                      "apply (callback:nth=N or callback:every=N)");
  const char* colon = memchr(s, ':', len);
  size_t klen = colon ? (size_t)(colon - s) : len;
  if (klen != 8 || strncmp(s, "callback", 8) != 0) {
    for (size_t k = 0; k < sizeof(plugin_kinds) / sizeof(*plugin_kinds); k++) {
      if (klen == strlen(plugin_kinds[k]) &&
          strncmp(s, plugin_kinds[k], klen) == 0) {
        snprintf(what, sizeof(what),
                 "kind \"%s\" is the plugin's own to inject; the harness "
                 "applies only callback:nth=N and callback:every=N (its own "
                 "host callbacks fail). Make a plugin fail through the "
                 "plugin (simdev: SIMDEV_FAULTS)",
                 plugin_kinds[k]);
        return plan_error(msg, mlen, s, len, what);
      }
    }
    snprintf(what, sizeof(what),
             "unknown kind \"%.*s\" (the harness applies callback:nth=N "
             "and callback:every=N)",
             (int)(klen > 24 ? 24 : klen), s);
    return plan_error(msg, mlen, s, len, what);
  }
  if (colon == NULL)
    return plan_error(msg, mlen, s, len,
                      "no trigger: give nth=N or every=N (callback:nth=N)");
  const char* kv = colon + 1;
  size_t kvlen = len - klen - 1;
  if (kvlen == 0 || kv[0] == ':')
    return plan_error(msg, mlen, s, len, "empty key=value (a ':' too many)");
  const char* eq = memchr(kv, '=', kvlen);
  if (eq == NULL || eq == kv)
    return plan_error(msg, mlen, s, len, "expected key=value after the kind");
  size_t keylen = (size_t)(eq - kv);
  int every = keylen == 5 && strncmp(kv, "every", 5) == 0;
  int nth = keylen == 3 && strncmp(kv, "nth", 3) == 0;
  if (!every && !nth) {
    snprintf(what, sizeof(what),
             "key \"%.*s\" is not applied by the harness (callback:nth=N "
             "or callback:every=N)",
             (int)(keylen > 24 ? 24 : keylen), kv);
    return plan_error(msg, mlen, s, len, what);
  }
  const char* v = eq + 1;
  size_t vlen = kvlen - keylen - 1;
  const char* more = memchr(v, ':', vlen);
  if (more != NULL && (more + 1 == s + len || more[1] == ':'))
    return plan_error(msg, mlen, s, len, "empty key=value (a ':' too many)");
  if (more != NULL)
    return plan_error(msg, mlen, s, len,
                      "one trigger per rule (nth or every): write two rules");
  uint64_t n;
  if (!parse_count(v, vlen, &n)) {
    snprintf(what, sizeof(what), "%s= needs a decimal count from 1 to 2^63",
             every ? "every" : "nth");
    return plan_error(msg, mlen, s, len, what);
  }
  if (n == 0) {
    snprintf(what, sizeof(what), "%s=0: counts start at 1",
             every ? "every" : "nth");
    return plan_error(msg, mlen, s, len, what);
  }
  if (p->n == kMaxRules) {
    snprintf(what, sizeof(what), "more than %d rules", kMaxRules);
    return plan_error(msg, mlen, s, len, what);
  }
  p->rule[p->n].every = every;
  p->rule[p->n].v = n;
  p->n++;
  return 1;
}

/* Parses spec; 0 and a message naming the rule if the harness cannot
 * apply it. */
static int parse_plan(const char* spec, cb_plan* p, char* msg, size_t len) {
  memset(p, 0, sizeof(*p));
  const char* s = spec;
  for (;;) {
    const char* comma = strchr(s, ',');
    size_t n = comma ? (size_t)(comma - s) : strlen(s);
    if (!parse_rule(s, n, p, msg, len)) return 0;
    if (comma == NULL) return 1;
    s = comma + 1;
  }
}

int conf_faults_option_ok(const char* spec, char* msg, size_t len) {
  cb_plan p;
  return parse_plan(spec, &p, msg, len);
}

/* Whether the plan fails the i-th callback (from 1). */
static int plan_fails(const cb_plan* p, uint64_t i) {
  for (int k = 0; k < p->n; k++) {
    if (p->rule[k].every ? i % p->rule[k].v == 0 : i == p->rule[k].v) return 1;
  }
  return 0;
}

static int64_t in_use(conf_env* e, int* ok) {
  SP_AllocatorStats s = {.struct_size = SP_ALLOCATORSTATS_STRUCT_SIZE};
  *ok = e->se.get_allocator_stats != NULL &&
        e->se.get_allocator_stats(D0, &s) != 0;
  return *ok ? s.bytes_in_use : 0;
}

/* A copy there and back on a stream of its own. */
static void other_stream_works(conf_env* e, const char* after) {
  enum { kN = 1000 };
  unsigned char src[kN], dst[kN];
  SP_Stream s2 = conf_stream_new(e, 0);
  SP_DeviceMemoryBase d = conf_alloc(e, 0, kN);
  if (s2 == NULL || d.opaque == NULL) {
    conf_note("no second stream or buffer for faults.other_streams_work");
    goto out;
  }
  conf_fill(src, kN, 91);
  memset(dst, 0, kN);
  e->se.memcpy_htod(D0, s2, &d, src, kN, conf_st(e));
  TF_Code c1 = conf_status_code(e->st);
  e->se.memcpy_dtoh(D0, s2, dst, &d, kN, conf_st(e));
  TF_Code c2 = conf_status_code(e->st);
  TF_Code c3 = conf_sync(e, 0, s2);
  EXPECT(R_F_OTHER_STREAM,
         c1 == TF_OK && c2 == TF_OK && c3 == TF_OK &&
             generic_first_diff(src, dst, kN) < 0,
         "after %s, a copy there and back on a new stream of the same device "
         "gave %s/%s/%s, first differing byte %ld",
         after, conf_code_name(c1), conf_code_name(c2), conf_code_name(c3),
         generic_first_diff(src, dst, kN));
out:
  if (d.opaque != NULL) conf_free(e, 0, &d);
  conf_stream_free(e, 0, s2);
}

/* ---- faults.callback_error ---------------------------------------------- */

static void test_callback_error(conf_env* e) {
  enum { kK = 6, kN = 4096 };
  const char* spec = getenv("CONF_FAULTS");
  if (spec == NULL || spec[0] == '\0') spec = "callback:nth=1";
  cb_plan plan;
  char msg[256];
  if (!parse_plan(spec, &plan, msg, sizeof(msg))) {
    conf_skip("%s", msg);
    return;
  }
  conf_probe p[kK];
  SP_Event ev[kK] = {0};
  int recorded[kK] = {0};
  unsigned char src[kN];
  int stats_ok = 0;
  int64_t before = in_use(e, &stats_ok);
  SP_DeviceMemoryBase d = {0};
  SP_Stream s = conf_stream_new(e, 0);
  if (s == NULL || !generic_callbacks_run(e, s)) goto out;
  d = conf_alloc(e, 0, kN);
  ENSURE(R_ALLOCATE, d.opaque != NULL, "allocate(%d) returned NULL", kN);
  conf_fill(src, kN, 5);
  int first_fail = 0;
  for (int i = 0; i < kK; i++) {
    int fails = plan_fails(&plan, i + 1);
    if (fails && first_fail == 0) first_fail = i + 1;
    e->se.memcpy_htod(D0, s, &d, src, kN, conf_st(e));
    ENSURE(
        R_HOST_CB_TRUE,
        conf_enqueue_probe(e, 0, s, &p[i], -1, 0, fails ? TF_INTERNAL : TF_OK,
                           fails ? "conformance --faults: injected" : NULL),
        "host_callback returned false (callback %d)", i + 1);
    e->se.create_event(D0, &ev[i], conf_st(e));
    if (conf_status_code(e->st) == TF_OK && ev[i] != NULL) {
      e->se.record_event(D0, s, ev[i], conf_st(e));
      recorded[i] = conf_status_code(e->st) == TF_OK;
    }
  }
  if (first_fail == 0) {
    conf_skip("--faults %s fails none of this test's %d callbacks", spec, kK);
    goto out;
  }
  TF_Code c = conf_sync(e, 0, s);
  EXPECT(R_F_SYNC_ERR, c != TF_OK,
         "block_host_until_done returned OK after host callback %d returned "
         "INTERNAL",
         first_fail);
  for (int i = 0; i < kK; i++) {
    conf_probe r = conf_probe_get(&p[i]);
    EXPECT(R_F_CB_DRAIN, r.ran == 1,
           "host callback %d (callback %d failed before it) ran %d times by "
           "the time the stream reported done",
           i + 1, first_fail, r.ran);
    if (recorded[i]) {
      SE_EventStatus st = e->se.get_event_status(D0, ev[i]);
      EXPECT(R_F_EVENT_RESOLVES, st != SE_EVENT_PENDING,
             "the event recorded after callback %d is %s after "
             "block_host_until_done returned",
             i + 1, generic_event_status_name(st));
    }
  }
  for (int k = 0; k < 2; k++) {
    e->se.get_stream_status(D0, s, conf_st(e));
    EXPECT(R_F_STICKY, conf_status_code(e->st) != TF_OK,
           "get_stream_status (call %d) returned OK after host callback %d "
           "returned INTERNAL",
           k + 1, first_fail);
  }
  other_stream_works(e, "a host callback's error");
out:
  for (int i = 0; i < kK; i++)
    if (ev[i] != NULL) e->se.destroy_event(D0, ev[i]);
  if (d.opaque != NULL) conf_free(e, 0, &d);
  conf_stream_free(e, 0, s);
  int ok2 = 0;
  int64_t after = in_use(e, &ok2);
  if (stats_ok && ok2)
    EXPECT_CMP(R_F_FREE, after, ==, before,
               "bytes_in_use after a failed stream's memory was freed");
}

/* ---- faults.plugin_errors ----------------------------------------------- */

enum { kBufs = 8, kBytes = 4096 };
/* What the host buffers hold before the copies out: a buffer that still
 * holds it lost its copy out (stream b), one that holds the device's zeros
 * lost its copy in (stream a). */
#define SENTINEL 0xa5

typedef struct plugin_run {
  SP_DeviceMemoryBase d[kBufs];
  unsigned char src[kBufs][kBytes], dst[kBufs][kBytes];
  TF_Code htod[kBufs], dtoh[kBufs];
  SP_Event ev[kBufs];
  int recorded[kBufs];
} plugin_run;

/* Stream a (0) copies in and records events, stream b (1) zeroes the
 * buffers first and copies out. */
static const char* const kStreamName[2] = {"a (copies in)", "b (copies out)"};

/* Whether some status of stream k said it failed. */
static int stream_failed(const conf_faults_seen* s, int k) {
  return s->sync[k] != TF_OK || s->status[k] != TF_OK;
}

/* Buffer i came back different at byte diff: which leg lost it, and
 * whether a status of that leg's stream (or of the copy's enqueue) said
 * so. A loss that fits neither leg may be explained by either. */
static void check_loss(const plugin_run* r, const conf_faults_seen* s, int i,
                       long diff) {
  int out_lost = conf_find_not(r->dst[i], kBytes, SENTINEL) < 0;
  int in_lost = !out_lost && conf_find_not(r->dst[i], kBytes, 0) < 0;
  int in_said = r->htod[i] != TF_OK || stream_failed(s, 0);
  int out_said = r->dtoh[i] != TF_OK || stream_failed(s, 1);
  if (in_lost) {
    EXPECT(R_F_REPORTED, in_said,
           "buffer %d came back as the device's zeros (its copy in on stream "
           "%s did not land), and no status of that copy or stream said so "
           "(memcpy_htod %s, stream a: sync %s, status %s)",
           i, kStreamName[0], conf_code_name(r->htod[i]),
           conf_code_name(s->sync[0]), conf_code_name(s->status[0]));
  } else if (out_lost) {
    EXPECT(R_F_REPORTED, out_said,
           "buffer %d was never written by its copy out on stream %s, and "
           "no status of that copy or stream said so (memcpy_dtoh %s, "
           "stream b: sync %s, status %s)",
           i, kStreamName[1], conf_code_name(r->dtoh[i]),
           conf_code_name(s->sync[1]), conf_code_name(s->status[1]));
  } else {
    EXPECT(R_F_REPORTED, in_said || out_said,
           "buffer %d came back different at byte %ld, and no status said "
           "so (enqueues OK, both streams OK)",
           i, diff);
  }
}

/* Stickiness, on the stream whose sync or status failed: its status after
 * a failed sync, then once more. */
static void check_sticky(conf_env* e, SP_Stream st, const conf_faults_seen* s,
                         int k) {
  if (!stream_failed(s, k)) return;
  if (s->status[k] == TF_OK) {
    EXPECT(R_F_STICKY, 0,
           "stream %s: block_host_until_done returned %s, then "
           "get_stream_status returned OK",
           kStreamName[k], conf_code_name(s->sync[k]));
    return;
  }
  e->se.get_stream_status(D0, st, conf_st(e));
  EXPECT(R_F_STICKY, conf_status_code(e->st) != TF_OK,
         "stream %s: get_stream_status went back to OK after reporting %s: "
         "%s",
         kStreamName[k], conf_code_name(s->status[k]), s->msg[k]);
}

void conf_faults_sequence(conf_env* e, conf_faults_seen* seen) {
  memset(seen, 0, sizeof(*seen));
  plugin_run* r = calloc(1, sizeof(*r));
  int stats_ok = 0;
  int64_t before = in_use(e, &stats_ok);
  SP_Stream st[2] = {conf_stream_new(e, 0), conf_stream_new(e, 0)};
  SP_Stream a = st[0], b = st[1];
  if (r == NULL || a == NULL || b == NULL) goto out;
  for (int i = 0; i < kBufs; i++) {
    r->d[i] = conf_alloc(e, 0, kBytes);
    if (r->d[i].opaque == NULL) {
      seen->alloc_failed++;
      EXPECT(R_F_ALLOC_NULL, r->d[i].size == 0,
             "allocate(%d) returned opaque NULL with size %llu", kBytes,
             (unsigned long long)r->d[i].size);
    }
  }
  /* Defined bytes in every buffer first (on b): a copy in that fails must
   * leave zeros to compare, not memory nobody wrote. */
  for (int i = 0; i < kBufs; i++)
    if (r->d[i].opaque != NULL)
      e->se.mem_zero(D0, b, &r->d[i], kBytes, conf_st(e));
  conf_sync(e, 0, b);
  /* Stream a copies in and records an event after each copy; b copies out
   * once a is done (the host waits: this test is about failures, not
   * about events ordering streams, which generic.events checks). */
  for (int i = 0; i < kBufs; i++) {
    if (r->d[i].opaque == NULL) continue;
    conf_fill(r->src[i], kBytes, 100 + (unsigned)i);
    e->se.memcpy_htod(D0, a, &r->d[i], r->src[i], kBytes, conf_st(e));
    r->htod[i] = conf_status_code(e->st);
    seen->enqueue_failed += r->htod[i] != TF_OK;
    e->se.create_event(D0, &r->ev[i], conf_st(e));
    if (conf_status_code(e->st) != TF_OK || r->ev[i] == NULL) continue;
    e->se.record_event(D0, a, r->ev[i], conf_st(e));
    r->recorded[i] = conf_status_code(e->st) == TF_OK;
    if (!r->recorded[i]) {
      if (seen->record_failed++ == 0)
        snprintf(seen->record_msg, sizeof(seen->record_msg), "%s",
                 conf_status_msg(e->st));
      conf_note("record_event %d failed: %s: %s", i,
                conf_code_name(conf_status_code(e->st)),
                conf_status_msg(e->st));
    }
  }
  seen->sync[0] = conf_sync(e, 0, a);
  for (int i = 0; i < kBufs; i++) {
    if (r->d[i].opaque == NULL) continue;
    memset(r->dst[i], SENTINEL, kBytes);
    e->se.memcpy_dtoh(D0, b, r->dst[i], &r->d[i], kBytes, conf_st(e));
    r->dtoh[i] = conf_status_code(e->st);
    seen->enqueue_failed += r->dtoh[i] != TF_OK;
  }
  seen->sync[1] = conf_sync(e, 0, b);
  for (int k = 0; k < 2; k++) {
    e->se.get_stream_status(D0, st[k], conf_st(e));
    seen->status[k] = conf_status_code(e->st);
    snprintf(seen->msg[k], sizeof(seen->msg[k]), "%s", conf_status_msg(e->st));
  }
  for (int i = 0; i < kBufs; i++) {
    if (r->d[i].opaque == NULL) continue;
    long diff = generic_first_diff(r->src[i], r->dst[i], kBytes);
    if (diff >= 0) {
      seen->lost++;
      check_loss(r, seen, i, diff);
    }
    if (r->recorded[i]) {
      SE_EventStatus es = e->se.get_event_status(D0, r->ev[i]);
      EXPECT(R_F_EVENT_RESOLVES, es != SE_EVENT_PENDING,
             "event %d is %s after both streams were synchronized", i,
             generic_event_status_name(es));
    }
  }
  for (int k = 0; k < 2; k++) check_sticky(e, st[k], seen, k);
  conf_note(
      "plugin failures seen: %d allocate, %d record_event, %d copy "
      "enqueue, %d buffers not copied; stream a: %s%s%s, stream b: "
      "%s%s%s",
      seen->alloc_failed, seen->record_failed, seen->enqueue_failed, seen->lost,
      conf_code_name(seen->status[0]), seen->status[0] != TF_OK ? ": " : "",
      seen->msg[0], conf_code_name(seen->status[1]),
      seen->status[1] != TF_OK ? ": " : "", seen->msg[1]);
  if (stream_failed(seen, 0) || stream_failed(seen, 1) || seen->alloc_failed ||
      seen->record_failed) {
    other_stream_works(e, "the plugin's own errors");
  }
out:
  if (r != NULL) {
    for (int i = 0; i < kBufs; i++) {
      if (r->ev[i] != NULL) e->se.destroy_event(D0, r->ev[i]);
      if (r->d[i].opaque != NULL) conf_free(e, 0, &r->d[i]);
    }
  }
  conf_stream_free(e, 0, a);
  conf_stream_free(e, 0, b);
  free(r);
  int ok2 = 0;
  int64_t after = in_use(e, &ok2);
  if (stats_ok && ok2)
    EXPECT_CMP(R_F_FREE, after, ==, before,
               "bytes_in_use after the sequence's memory was freed");
}

static void test_plugin_errors(conf_env* e) {
  conf_faults_seen seen;
  conf_faults_sequence(e, &seen);
}

/* ------------------------------------------------------------ list */

const harness_test conf_generic_faults_tests[] = {
    {"faults.callback_error", test_callback_error, 0},
    {"faults.plugin_errors", test_plugin_errors, 0},
    {NULL, NULL, 0},
};
