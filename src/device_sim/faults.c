/*
 * faults.c - SIMDEV_FAULTS, the fault plan (sim.h, "fault injection"):
 * its grammar, the plan in force, and the decisions the injection sites
 * (arena.c's sim_mem_alloc, stream.c's run path, event.c's record) ask for.
 *
 * Grammar (docs/debugging.md, "Fault injection", is the user's reference):
 *   plan  := item ("," item)*          no spaces anywhere
 *   item  := "seed=" N | rule          seed at most once, default 0
 *   rule  := kind (":" key "=" value)+
 * Every rule has exactly one trigger key, plus `op=` for launch:
 *   nth=N        the Nth matching operation since the plan was installed
 *                fails (once)
 *   every=N      operations N, 2N, 3N, ... fail
 *   p=P          each operation fails with probability P, 0 < P <= 1,
 *                decided by a hash of (seed, rule index, operation number):
 *                the same seed and the same sequence of operations fail the
 *                same operations
 *   after_bytes=SIZE  (alloc) allocations fail from the first one that
 *                brings the bytes requested since the plan was installed
 *                (failed requests included) above SIZE; K, M, G = KiB...
 *   fail_at=N    (stream) the Nth work item each stream runs fails
 * Counts N are decimal, 1 .. 2^63 (leading zeros allowed); nothing else
 * is accepted. A seed is 0 .. 2^64-1.
 *
 * State is process-wide. Each sim_faults_set publishes a new, immutable
 * plan behind one atomic pointer (NULL: no plan); a site loads it once and
 * uses that plan throughout, so replacing the plan while work is in flight
 * is safe: an operation is judged by the old plan or the new one, never a
 * mix. Replaced plans are kept (reachable) until exit: a process installs a
 * handful. Each rule counts its matching operations in atomics inside its
 * plan (any thread); stream:fail_at counts in the stream itself
 * (sim_stream.fault_items, touched only by the thread running the stream's
 * item), reset lazily when it meets a plan of another generation. With no
 * plan the sites pay one relaxed load (sim_faults_on).
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "sim_internal.h"

#define MAX_RULES 32
/* The rule as written, for messages: the longest useful rule
 * (launch:op=<63 bytes>:every=<19 digits>) fits; longer ones end in "...". */
#define RULE_TEXT 128
#define OP_MAX 64

enum trigger { T_NONE, T_NTH, T_EVERY, T_P, T_AFTER_BYTES, T_FAIL_AT };

typedef struct rule {
  int kind;
  int trigger;
  uint64_t n;         /* nth, every, fail_at, after_bytes */
  uint64_t threshold; /* p: fires when hash < threshold; p = 1: always */
  int p_always;
  char op[OP_MAX]; /* launch: op type to match, "" = any kernel */
  char text[RULE_TEXT];
  _Atomic uint64_t count; /* matching operations seen */
  _Atomic uint64_t bytes; /* alloc: bytes requested (after_bytes) */
} rule;

typedef struct sim_fault_plan {
  int nrules; /* >= 1 once published */
  uint64_t seed;
  uint64_t gen; /* generation, from 1: stream:fail_at's reset */
  struct sim_fault_plan* retired; /* older plans, kept reachable */
  rule rules[MAX_RULES];
} plan;

/* The plan in force; written only by sim_faults_set (under g_set_lock),
 * read by the sites with one acquire load. */
__attribute__((
    visibility("hidden"))) _Atomic(struct sim_fault_plan*) sim_faults_plan;
static plan* g_all;    /* every plan ever published; g_set_lock */
static uint64_t g_gen; /* last generation handed out; g_set_lock */
static _Atomic uint64_t g_injected[SIM_FAULT_KIND_COUNT];
static pthread_mutex_t g_set_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char tls_last[256]; /* sim_faults_last: the last record's */

static const char* const kind_names[SIM_FAULT_KIND_COUNT] = {
    "alloc",  "memcpy_h2d", "memcpy_d2h", "memcpy_d2d",
    "launch", "stream",     "event",      "callback",
};

/* ---- parsing ------------------------------------------------------------ */

typedef struct parse_ctx {
  const char* spec;
  char* msg;
  size_t msg_len;
} parse_ctx;

/* The message names the rule and the problem first (a caller's buffer may
 * be short), then the whole setting. */
static int fail(parse_ctx* c, const char* item, size_t len, const char* fmt,
                const char* a) {
  char what[200];
  snprintf(what, sizeof(what), fmt, a);
  snprintf(
      c->msg, c->msg_len,
      "invalid SIMDEV_FAULTS rule \"%.*s%s\": %s (SIMDEV_FAULTS=\"%.96s%s\")",
      (int)(len > 96 ? 96 : len), item, len > 96 ? "..." : "", what, c->spec,
      strlen(c->spec) > 96 ? "..." : "");
  return SIM_EINVAL;
}

/* Decimal digits only, no sign or spaces, no overflow, <= max. */
static int parse_dec(const char* v, size_t len, uint64_t max, uint64_t* out) {
  if (len == 0) return -1;
  uint64_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    uint64_t d = (uint64_t)(v[i] - '0');
    if (n > (max - d) / 10) return -1;
    n = n * 10 + d;
  }
  *out = n;
  return 0;
}
static int parse_count(const char* v, size_t len, uint64_t* out) {
  return parse_dec(v, len, 1ull << 63, out);
}

/* A count with an optional K, M or G suffix (binary). */
static int parse_size(const char* v, size_t len, uint64_t* out,
                      const char** why) {
  unsigned shift = 0;
  *why = "expected a whole number of bytes, with an optional K, M or G";
  if (len > 0 && (v[len - 1] < '0' || v[len - 1] > '9')) {
    switch (v[len - 1]) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: *why = "bad size suffix (K, M or G: KiB, MiB, GiB)"; return -1;
    }
    len--;
  }
  uint64_t n;
  if (parse_count(v, len, &n) != 0) return -1;
  if (shift && n > ((1ull << 63) >> shift)) {
    *why = "too large";
    return -1;
  }
  *out = n << shift;
  return 0;
}

/* 0 < p <= 1, plain decimal ("0.25", "1", ".5"); no exponent or sign. */
static int parse_prob(const char* v, size_t len, double* out) {
  char buf[32];
  if (len == 0 || len >= sizeof(buf)) return -1;
  int dots = 0, digits = 0;
  for (size_t i = 0; i < len; i++) {
    if (v[i] == '.')
      dots++;
    else if (v[i] >= '0' && v[i] <= '9')
      digits++;
    else
      return -1;
  }
  if (dots > 1 || digits == 0) return -1;
  memcpy(buf, v, len);
  buf[len] = '\0';
  double p = strtod(buf, NULL);
  if (!(p > 0.0 && p <= 1.0)) return -1;
  *out = p;
  return 0;
}

static int kind_of(const char* s, size_t len) {
  for (int k = 0; k < SIM_FAULT_KIND_COUNT; k++)
    if (strlen(kind_names[k]) == len && strncmp(s, kind_names[k], len) == 0)
      return k;
  return -1;
}

/* Which keys a kind takes. */
static int key_allowed(int kind, const char* key) {
  if (strcmp(key, "nth") == 0 || strcmp(key, "every") == 0 ||
      strcmp(key, "p") == 0)
    return kind != SIM_FAULT_STREAM;
  if (strcmp(key, "after_bytes") == 0) return kind == SIM_FAULT_ALLOC;
  if (strcmp(key, "op") == 0) return kind == SIM_FAULT_LAUNCH;
  if (strcmp(key, "fail_at") == 0) return kind == SIM_FAULT_STREAM;
  return -1; /* unknown everywhere */
}

static const char* keys_of(int kind) {
  switch (kind) {
    case SIM_FAULT_ALLOC: return "nth, every, p, after_bytes";
    case SIM_FAULT_LAUNCH: return "op, nth, every, p";
    case SIM_FAULT_STREAM: return "fail_at";
    default: return "nth, every, p";
  }
}

/* Parses one rule [s, s+len) into *r. */
static int parse_rule(parse_ctx* c, const char* s, size_t len, rule* r) {
  memset(r, 0, sizeof(*r));
  if (len < sizeof(r->text))
    snprintf(r->text, sizeof(r->text), "%.*s", (int)len, s);
  else /* cut, and say so */
    snprintf(r->text, sizeof(r->text), "%.*s...", (int)(sizeof(r->text) - 4),
             s);
  const char* colon = memchr(s, ':', len);
  size_t klen = colon ? (size_t)(colon - s) : len;
  r->kind = kind_of(s, klen);
  if (r->kind < 0) {
    char k[40];
    snprintf(k, sizeof(k), "%.*s%s", (int)(klen > 32 ? 32 : klen), s,
             klen > 32 ? "..." : "");
    return fail(c, s, len,
                "unknown kind \"%s\" (kinds: alloc, memcpy_h2d, memcpy_d2h, "
                "memcpy_d2d, launch, stream, event, callback)",
                k);
  }
  if (colon == NULL)
    return fail(c, s, len, "no trigger: give one of %s (kind:key=value)",
                keys_of(r->kind));
  const char* end = s + len;
  const char* p = colon + 1;
  char seen[8][16];
  int nseen = 0;
  for (;;) {
    const char* next = memchr(p, ':', (size_t)(end - p));
    const char* kv_end = next ? next : end;
    const char* eq = memchr(p, '=', (size_t)(kv_end - p));
    if (kv_end == p)
      return fail(c, s, len, "%s", "empty key=value (a ':' too many)");
    if (eq == NULL || eq == p)
      return fail(c, s, len, "%s", "expected key=value after the kind");
    char key[16];
    size_t keylen = (size_t)(eq - p);
    if (keylen >= sizeof(key)) { /* longer than any key: quote it cut */
      char k[40];
      snprintf(k, sizeof(k), "%.*s%s", (int)(keylen > 32 ? 32 : keylen), p,
               keylen > 32 ? "..." : "");
      return fail(c, s, len, "unknown key \"%s\"", k);
    }
    snprintf(key, sizeof(key), "%.*s", (int)keylen, p);
    int allowed = key_allowed(r->kind, key);
    if (allowed < 0) return fail(c, s, len, "unknown key \"%s\"", key);
    if (!allowed) {
      char why[128];
      snprintf(why, sizeof(why),
               "key \"%s\" is not valid for %s (its keys: %s)", key,
               kind_names[r->kind], keys_of(r->kind));
      return fail(c, s, len, "%s", why);
    }
    for (int i = 0; i < nseen; i++)
      if (strcmp(seen[i], key) == 0)
        return fail(c, s, len, "duplicate key \"%s\"", key);
    if (nseen < 8) snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
    const char* v = eq + 1;
    size_t vlen = (size_t)(kv_end - v);
    if (strcmp(key, "op") == 0) {
      if (vlen == 0 || vlen >= OP_MAX || memchr(v, '=', vlen) != NULL)
        return fail(c, s, len, "op= needs an op type name of 1 to %s bytes",
                    "63");
      memcpy(r->op, v, vlen);
      r->op[vlen] = '\0';
    } else {
      if (r->trigger != T_NONE)
        return fail(c, s, len,
                    "more than one trigger (\"%s\"): a rule takes one of nth, "
                    "every, p, after_bytes, fail_at; write two rules",
                    key);
      if (strcmp(key, "p") == 0) {
        double prob;
        if (parse_prob(v, vlen, &prob) != 0)
          return fail(c, s, len, "p must be a decimal probability in (0, 1]%s",
                      "");
        r->trigger = T_P;
        r->p_always = prob >= 1.0;
        r->threshold =
            r->p_always ? 0 : (uint64_t)(prob * 18446744073709551616.0);
        if (!r->p_always && r->threshold == 0)
          return fail(c, s, len, "p is too small (%s)", "below 2^-64");
      } else if (strcmp(key, "after_bytes") == 0) {
        const char* why;
        if (parse_size(v, vlen, &r->n, &why) != 0)
          return fail(c, s, len, "after_bytes: %s", why);
        if (r->n == 0)
          return fail(c, s, len, "after_bytes must be at least 1 (%s)",
                      "every=1 fails every allocation");
        r->trigger = T_AFTER_BYTES;
      } else {
        if (parse_count(v, vlen, &r->n) != 0)
          return fail(c, s, len, "%s= needs a decimal count from 1 to 2^63",
                      key);
        if (r->n == 0) return fail(c, s, len, "%s=0: counts start at 1", key);
        r->trigger = strcmp(key, "nth") == 0     ? T_NTH
                     : strcmp(key, "every") == 0 ? T_EVERY
                                                 : T_FAIL_AT;
      }
    }
    if (next == NULL) break;
    p = next + 1;
  }
  if (r->trigger == T_NONE)
    return fail(c, s, len, "no trigger: give one of %s", keys_of(r->kind));
  return SIM_OK;
}

/* Parses spec into *out (counters zero). */
static int parse_plan(const char* spec, plan* out, char* msg, size_t msg_len) {
  char scratch[8];
  if (msg == NULL || msg_len == 0) {
    msg = scratch;
    msg_len = sizeof(scratch);
  }
  msg[0] = '\0';
  memset(out, 0, sizeof(*out));
  if (spec == NULL || spec[0] == '\0') return SIM_OK;
  parse_ctx c = {spec, msg, msg_len};
  int have_seed = 0;
  const char* s = spec;
  for (;;) {
    const char* comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (len == 0)
      return fail(&c, s, 0, "empty rule (%s)", "two commas, or one at an end");
    for (size_t i = 0; i < len; i++)
      if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')
        return fail(&c, s, len, "%s", "no spaces allowed");
    if (len >= 5 && strncmp(s, "seed=", 5) == 0) {
      if (have_seed) return fail(&c, s, len, "%s", "seed given twice");
      if (parse_dec(s + 5, len - 5, UINT64_MAX, &out->seed) != 0)
        return fail(&c, s, len, "%s",
                    "seed= needs a decimal number from 0 to 2^64-1");
      have_seed = 1;
    } else {
      if (out->nrules == MAX_RULES)
        return fail(&c, s, len, "more than %s rules", "32");
      int err = parse_rule(&c, s, len, &out->rules[out->nrules]);
      if (err != SIM_OK) return err;
      out->nrules++;
    }
    if (comma == NULL) break;
    s = comma + 1;
  }
  return SIM_OK;
}

int sim_faults_check(const char* spec, char* msg, size_t msg_len) {
  plan* p = malloc(sizeof(*p)); /* a few KiB: not on the caller's stack */
  if (p == NULL) return SIM_ENOMEM;
  int err = parse_plan(spec, p, msg, msg_len);
  free(p);
  return err;
}

int sim_faults_has(const char* spec, sim_fault_kind kind) {
  plan* p = malloc(sizeof(*p));
  if (p == NULL) return 0;
  int has = 0;
  if (parse_plan(spec, p, NULL, 0) == SIM_OK)
    for (int i = 0; i < p->nrules; i++) has |= p->rules[i].kind == (int)kind;
  free(p);
  return has;
}

int sim_faults_set(const char* spec, char* msg, size_t msg_len) {
  plan* p = malloc(sizeof(*p));
  if (p == NULL) return SIM_ENOMEM;
  int err = parse_plan(spec, p, msg, msg_len);
  if (err != SIM_OK || p->nrules == 0) {
    free(p);
    p = NULL;
  }
  if (err != SIM_OK) return err;
  sim_mutex_lock(&g_set_lock);
  if (p != NULL) {
    p->gen = ++g_gen;
    p->retired = g_all;
    g_all = p;
  }
  for (int k = 0; k < SIM_FAULT_KIND_COUNT; k++)
    atomic_store_explicit(&g_injected[k], 0, memory_order_relaxed);
  /* Release: a site that loads p sees its rules and zeroed counters. For
   * helgrind: the pointer is read relaxed by every stream item
   * (sim_faults_on), and p is published to cur_plan's acquire load. */
  SIM_HG_BENIGN(&sim_faults_plan, sizeof(sim_faults_plan));
  if (p != NULL) SIM_HG_BEFORE(p);
  atomic_store_explicit(&sim_faults_plan, p, memory_order_release);
  sim_mutex_unlock(&g_set_lock);
  return SIM_OK;
}

/* The plan in force for one operation (NULL: none). */
static plan* cur_plan(void) {
  plan* p = atomic_load_explicit(&sim_faults_plan, memory_order_acquire);
  if (p != NULL) SIM_HG_AFTER(p);
  return p;
}

uint64_t sim_faults_injected(sim_fault_kind kind) {
  if (kind < 0 || kind >= SIM_FAULT_KIND_COUNT) return 0;
  return atomic_load_explicit(&g_injected[kind], memory_order_relaxed);
}

int sim_faults_last(char* msg, size_t msg_len) {
  if (msg == NULL || msg_len == 0) return tls_last[0] != '\0';
  snprintf(msg, msg_len, "%s", tls_last);
  return tls_last[0] != '\0';
}

/* ---- decisions ---------------------------------------------------------- */

/* splitmix64's finaliser: a good 64-bit mix, cheap. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Whether rule i of plan pl fires for its operation number n (from 1). */
static int fires(const plan* pl, const rule* r, int i, uint64_t n) {
  switch (r->trigger) {
    case T_NTH: return n == r->n;
    case T_EVERY: return n % r->n == 0;
    case T_P:
      return r->p_always ||
             mix(pl->seed ^ mix(((uint64_t)i << 56) ^ n)) < r->threshold;
    default: return 0;
  }
}

/* Records an injection: counted under the rule's kind, message kept for
 * sim_faults_last and printed on stderr. Not static and never inlined:
 * `break sim_fault_hit` in gdb stops at every injected fault, on the
 * thread whose operation it fails. */
__attribute__((noinline, visibility("hidden"))) void sim_fault_hit(
    const rule* r, const char* msg);
void sim_fault_hit(const rule* r, const char* msg) {
  atomic_fetch_add_explicit(&g_injected[r->kind], 1, memory_order_relaxed);
  fprintf(stderr, "simdev: %s\n", msg);
}

int sim_faults_alloc(const char* dev_name, uint64_t size) {
  plan* pl = cur_plan();
  if (pl == NULL) return 0;
  const rule* hit = NULL;
  for (int i = 0; i < pl->nrules; i++) {
    rule* r = &pl->rules[i];
    if (r->kind != SIM_FAULT_ALLOC) continue;
    uint64_t n = atomic_fetch_add(&r->count, 1) + 1;
    int f;
    if (r->trigger == T_AFTER_BYTES)
      f = atomic_fetch_add(&r->bytes, size) + size > r->n;
    else
      f = fires(pl, r, i, n);
    if (f && hit == NULL) hit = r;
  }
  if (hit == NULL) return 0;
  char msg[256];
  snprintf(msg, sizeof(msg),
           "injected by SIMDEV_FAULTS (%s): allocation of %" PRIu64
           " bytes on %s refused",
           hit->text, size, dev_name);
  sim_fault_hit(hit, msg);
  return 1;
}

int sim_faults_event(void) {
  tls_last[0] = '\0'; /* sim_faults_last speaks of this record only */
  plan* pl = cur_plan();
  if (pl == NULL) return SIM_OK;
  const rule* hit = NULL;
  for (int i = 0; i < pl->nrules; i++) {
    rule* r = &pl->rules[i];
    if (r->kind != SIM_FAULT_EVENT) continue;
    uint64_t n = atomic_fetch_add(&r->count, 1) + 1;
    if (fires(pl, r, i, n) && hit == NULL) hit = r;
  }
  if (hit == NULL) return SIM_OK;
  char msg[256];
  snprintf(msg, sizeof(msg),
           "injected by SIMDEV_FAULTS (%s): event record refused", hit->text);
  sim_fault_hit(hit, msg);
  snprintf(tls_last, sizeof(tls_last), "%s", msg);
  return SIM_EFAILED;
}

static int item_kind(const sim_work* w) {
  switch (w->trace.kind) {
    case SIM_TRACE_MEMCPY_H2D: return SIM_FAULT_MEMCPY_H2D;
    case SIM_TRACE_MEMCPY_D2H: return SIM_FAULT_MEMCPY_D2H;
    case SIM_TRACE_MEMCPY_D2D: return SIM_FAULT_MEMCPY_D2D;
    case SIM_TRACE_KERNEL: return SIM_FAULT_LAUNCH;
    case SIM_TRACE_HOST_CALLBACK: return SIM_FAULT_CALLBACK;
    default: return -1;
  }
}

int sim_faults_item(sim_stream* s, sim_work* w, int after_run, char* msg,
                    size_t msg_len) {
  int kind = item_kind(w);
  if (after_run && kind != SIM_FAULT_CALLBACK) return SIM_OK;
  if (!after_run && kind == SIM_FAULT_CALLBACK) return SIM_OK;
  plan* pl = cur_plan();
  if (pl == NULL) return SIM_OK;
  /* stream:fail_at counts the items a stream runs that it would otherwise
   * have been free to skip: not the SIM_WORK_ALWAYS_RUN markers (event
   * records and waits, host callbacks, timers), which must run so that
   * nobody waiting on them hangs. */
  uint64_t item = 0;
  if (!after_run && !(w->flags & SIM_WORK_ALWAYS_RUN)) {
    if (s->fault_gen != pl->gen) {
      s->fault_gen = pl->gen;
      s->fault_items = 0;
    }
    item = ++s->fault_items;
  }
  const rule* hit = NULL;
  for (int i = 0; i < pl->nrules; i++) {
    rule* r = &pl->rules[i];
    int f;
    if (r->kind == SIM_FAULT_STREAM) {
      f = item != 0 && item == r->n;
    } else {
      if (r->kind != kind) continue;
      if (r->op[0] != '\0' && strcmp(sim_trace_name(w->trace.type), r->op))
        continue;
      f = fires(pl, r, i, atomic_fetch_add(&r->count, 1) + 1);
    }
    if (f && hit == NULL) hit = r;
  }
  if (hit == NULL) return SIM_OK;
  char what[128];
  if (kind == SIM_FAULT_LAUNCH)
    snprintf(what, sizeof(what), "kernel %s (%s) not run",
             sim_trace_name(w->trace.type), sim_trace_name(w->trace.name));
  else if (kind == SIM_FAULT_CALLBACK)
    snprintf(what, sizeof(what), "host callback ran, then failed");
  else if (kind >= 0)
    snprintf(what, sizeof(what), "%s of %" PRIu64 " bytes not done",
             sim_trace_kind_name((int)w->trace.kind), w->trace.bytes);
  else
    snprintf(what, sizeof(what), "%s not run",
             w->label ? w->label : "work item");
  char full[400];
  if (hit->kind == SIM_FAULT_STREAM)
    snprintf(full, sizeof(full),
             "injected by SIMDEV_FAULTS (%s): item %" PRIu64
             " of stream simdev%d-s%d: %s",
             hit->text, item, s->dev->ordinal, s->id, what);
  else
    snprintf(full, sizeof(full), "injected by SIMDEV_FAULTS (%s): %s",
             hit->text, what);
  sim_fault_hit(hit, full);
  snprintf(msg, msg_len, "%s", full);
  return SIM_EFAILED;
}
