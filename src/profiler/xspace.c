/*
 * xspace.c - a snapshot as TensorFlow's XSpace (sp_xspace_encode), the
 * message TF_InitProfiler's collect_data_xspace hands TensorFlow, written
 * with src/pbwire (no protobuf library).
 *
 * Field numbers, from the descriptor in the TF 2.21 wheel
 * (tensorflow/tsl/profiler/protobuf/xplane_pb2.py, printed field by field):
 *   XSpace         planes 1
 *   XPlane         id 1, name 2, lines 3, event_metadata 4 (map<int64,
 *                  XEventMetadata>), stat_metadata 5 (map<int64,
 *                  XStatMetadata>), stats 6
 *   map entry      key 1, value 2
 *   XLine          id 1, name 2, timestamp_ns 3, events 4, duration_ps 9,
 *                  display_name 11
 *   XEvent         metadata_id 1, offset_ps 2, duration_ps 3, stats 4
 *   XStat          metadata_id 1, int64_value 4, str_value 5 (oneof value)
 *   XEventMetadata id 1, name 2;  XStatMetadata id 1, name 2
 *
 * Layout (names fixed by the issue-15 plan; tests check them): a plane per
 * device, "/device:CUSTOM:<ordinal>", id = ordinal, with the plane stat
 * "dropped_events" (every record lost on the device since the rings were
 * last emptied, not only in this window: its streams' dropped plus the
 * device's own, sim_trace_device); a line per stream that has
 * records in the snapshot, id = stream id, name and
 * display_name "simdev<d>-s<n>", timestamp_ns = its first record's start on
 * TF's clock (CLOCK_REALTIME: monotonic + snap->realtime_offset_ns), events
 * at offsets from it in picoseconds. Event metadata: one per distinct event
 * name (sp_event_name) per plane, ids from 1. Strings are repaired to UTF-8
 * (protobuf rejects a string field that is not, and TF drops an XSpace that
 * fails to parse without a word).
 *
 * Thread contract: none beyond the caller's: snap is read-only here.
 */
#include <stdlib.h>
#include <string.h>

#include "pbwire/pbwire.h"
#include "profiler/sp_internal.h"

enum {
  XSPACE_PLANES = 1,
  XPLANE_ID = 1,
  XPLANE_NAME = 2,
  XPLANE_LINES = 3,
  XPLANE_EVENT_METADATA = 4,
  XPLANE_STAT_METADATA = 5,
  XPLANE_STATS = 6,
  MAP_KEY = 1,
  MAP_VALUE = 2,
  XLINE_ID = 1,
  XLINE_NAME = 2,
  XLINE_TIMESTAMP_NS = 3,
  XLINE_EVENTS = 4,
  XLINE_DURATION_PS = 9,
  XLINE_DISPLAY_NAME = 11,
  XEVENT_METADATA_ID = 1,
  XEVENT_OFFSET_PS = 2,
  XEVENT_DURATION_PS = 3,
  XEVENT_STATS = 4,
  XSTAT_METADATA_ID = 1,
  XSTAT_INT64 = 4,
  XSTAT_STR = 5,
  XMETA_ID = 1,
  XMETA_NAME = 2,
};

/* Stat metadata: the same ids in every plane. */
enum {
  ST_TF_OP = 1,
  ST_OP_TYPE,
  ST_KIND,
  ST_BYTES,
  ST_QUEUE_DELAY_PS,
  ST_CORRELATION_ID,
  ST_PEER_STREAM,
  ST_STATUS,
  ST_INLINE,
  ST_DROPPED_EVENTS,
  ST_COUNT
};
static const char* const k_stat_names[ST_COUNT] = {
    [ST_TF_OP] = "tf_op",
    [ST_OP_TYPE] = "op_type",
    [ST_KIND] = "kind",
    [ST_BYTES] = "bytes",
    [ST_QUEUE_DELAY_PS] = "queue_delay_ps",
    [ST_CORRELATION_ID] = "correlation_id",
    [ST_PEER_STREAM] = "peer_stream",
    [ST_STATUS] = "status",
    [ST_INLINE] = "inline",
    [ST_DROPPED_EVENTS] = "dropped_events",
};

/* One plane's event names -> metadata ids (open addressing on the string;
 * ids are the insertion order + 1, so the output does not depend on the
 * hash). The strings are owned (repaired copies). */
typedef struct name_table {
  char** names; /* by id - 1 */
  size_t count;
  int64_t* slots; /* id, 0 = empty */
  size_t mask;
} name_table;

static uint64_t hash_str(const char* s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static int table_init(name_table* t, size_t max_names) {
  size_t cap = 16;
  while (cap < 2 * max_names + 2) cap *= 2;
  t->names = calloc(max_names + 1, sizeof(char*));
  t->slots = calloc(cap, sizeof(int64_t));
  t->count = 0;
  t->mask = cap - 1;
  return t->names && t->slots ? SIM_OK : SIM_ENOMEM;
}

static void table_free(name_table* t) {
  if (t->names)
    for (size_t i = 0; i < t->count; i++) free(t->names[i]);
  free(t->names);
  free(t->slots);
}

/* The id of name (UTF-8 repaired), adding it if new; 0 if out of memory. */
static int64_t table_id(name_table* t, const char* raw) {
  char* owned;
  const char* name = sp_utf8_repair(raw, &owned);
  if (name == NULL) return 0;
  size_t i = hash_str(name) & t->mask;
  for (; t->slots[i] != 0; i = (i + 1) & t->mask) {
    if (strcmp(t->names[t->slots[i] - 1], name) == 0) {
      free(owned);
      return t->slots[i];
    }
  }
  char* copy = owned ? owned : strdup(name);
  if (copy == NULL) return 0;
  t->names[t->count++] = copy;
  t->slots[i] = (int64_t)t->count;
  return t->slots[i];
}

static void put_stat_int(pbw_buf* b, uint64_t stat, int64_t v) {
  size_t m = pbw_open(b);
  pbw_put_uint(b, XSTAT_METADATA_ID, stat);
  pbw_put_int(b, XSTAT_INT64, v);
  pbw_close(b, XEVENT_STATS, m);
}

/* A string stat (repaired to UTF-8). SIM_ENOMEM if the repair cannot
 * allocate. */
static int put_stat_str(pbw_buf* b, uint32_t field, uint64_t stat,
                        const char* raw) {
  char* owned;
  const char* s = sp_utf8_repair(raw, &owned);
  if (s == NULL) return SIM_ENOMEM;
  size_t m = pbw_open(b);
  pbw_put_uint(b, XSTAT_METADATA_ID, stat);
  pbw_put_string(b, XSTAT_STR, s);
  pbw_close(b, field, m);
  free(owned);
  return SIM_OK;
}

static int put_event(pbw_buf* b, name_table* names, const sim_trace_rec* r,
                     uint64_t line_t0) {
  int64_t meta = table_id(names, sp_event_name(r));
  if (meta == 0) return SIM_ENOMEM;
  size_t m = pbw_open(b);
  pbw_put_uint(b, XEVENT_METADATA_ID, (uint64_t)meta);
  uint64_t off = r->start_ns > line_t0 ? r->start_ns - line_t0 : 0;
  pbw_put_int(b, XEVENT_OFFSET_PS, (int64_t)off * 1000);
  uint64_t dur = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
  pbw_put_int(b, XEVENT_DURATION_PS, (int64_t)dur * 1000);

  int err = SIM_OK;
  const char* name = sim_trace_name(r->name);
  const char* type = sim_trace_name(r->type);
  if (r->kind == SIM_TRACE_KERNEL) {
    /* TF's own convention for the op of a device event: "<name>:<type>". */
    size_t nl = strlen(name), tl = strlen(type);
    char* tf_op = malloc(nl + tl + 2);
    if (tf_op == NULL) return SIM_ENOMEM;
    memcpy(tf_op, name, nl);
    tf_op[nl] = ':';
    memcpy(tf_op + nl + 1, type, tl + 1);
    err = put_stat_str(b, XEVENT_STATS, ST_TF_OP, tf_op);
    free(tf_op);
  }
  if (err == SIM_OK && type[0] != '\0')
    err = put_stat_str(b, XEVENT_STATS, ST_OP_TYPE, type);
  if (err == SIM_OK)
    err = put_stat_str(b, XEVENT_STATS, ST_KIND,
                       sim_trace_kind_name((int)r->kind));
  if (err != SIM_OK) return err;
  if (sp_rec_has_bytes(r)) put_stat_int(b, ST_BYTES, (int64_t)r->bytes);
  if (r->enq_ns != 0 && r->start_ns >= r->enq_ns)
    put_stat_int(b, ST_QUEUE_DELAY_PS,
                 (int64_t)(r->start_ns - r->enq_ns) * 1000);
  put_stat_int(b, ST_CORRELATION_ID, (int64_t)r->id);
  if (r->peer != 0) {
    char peer[48];
    sp_stream_key_label(r->peer, peer, sizeof(peer));
    put_stat_str(b, XEVENT_STATS, ST_PEER_STREAM, peer); /* ASCII */
  }
  if (r->status != SIM_OK)
    put_stat_str(b, XEVENT_STATS, ST_STATUS, sim_strerror(r->status));
  if (r->flags & SIM_TRACE_INLINE) put_stat_int(b, ST_INLINE, 1);
  pbw_close(b, XLINE_EVENTS, m);
  return SIM_OK;
}

static int put_line(pbw_buf* b, name_table* names, const sim_trace_stream* st,
                    uint64_t snap_t0, int64_t realtime_offset) {
  /* Records are in ascending start_ns: the first one opens the line. */
  uint64_t line_t0 = st->count ? st->recs[0].start_ns : snap_t0;
  uint64_t line_end = line_t0;
  for (size_t j = 0; j < st->count; j++)
    if (st->recs[j].end_ns > line_end) line_end = st->recs[j].end_ns;
  char label[48];
  sp_stream_label(st->device, st->stream, label, sizeof(label));

  size_t m = pbw_open(b);
  pbw_put_int(b, XLINE_ID, st->stream);
  pbw_put_string(b, XLINE_NAME, label);
  pbw_put_string(b, XLINE_DISPLAY_NAME, label);
  pbw_put_int(b, XLINE_TIMESTAMP_NS, (int64_t)line_t0 + realtime_offset);
  pbw_put_int(b, XLINE_DURATION_PS, (int64_t)(line_end - line_t0) * 1000);
  for (size_t j = 0; j < st->count; j++) {
    int err = put_event(b, names, &st->recs[j], line_t0);
    if (err != SIM_OK) return err;
  }
  pbw_close(b, XPLANE_LINES, m);
  return SIM_OK;
}

static void put_metadata_entry(pbw_buf* b, uint32_t field, int64_t id,
                               const char* name) {
  size_t e = pbw_open(b);
  pbw_put_int(b, MAP_KEY, id);
  size_t v = pbw_open(b);
  pbw_put_int(b, XMETA_ID, id);
  pbw_put_string(b, XMETA_NAME, name);
  pbw_close(b, MAP_VALUE, v);
  pbw_close(b, field, e);
}

static int put_plane(pbw_buf* b, const sim_trace_snapshot* snap, int dev,
                     uint64_t snap_t0) {
  size_t nrecs = 0;
  uint64_t dropped = 0;
  for (size_t i = 0; i < snap->nstreams; i++)
    if (snap->streams[i].device == dev) {
      nrecs += snap->streams[i].count;
      dropped += snap->streams[i].dropped;
    }
  for (size_t i = 0; i < snap->ndevices; i++)
    if (snap->devices[i].device == dev) dropped += snap->devices[i].dropped;

  name_table names;
  int err = table_init(&names, nrecs);
  char pname[32];
  snprintf(pname, sizeof(pname), "/device:CUSTOM:%d", dev);
  size_t m = pbw_open(b);
  pbw_put_int(b, XPLANE_ID, dev);
  pbw_put_string(b, XPLANE_NAME, pname);
  for (size_t i = 0; err == SIM_OK && i < snap->nstreams; i++)
    if (snap->streams[i].device == dev)
      err = put_line(b, &names, &snap->streams[i], snap_t0,
                     snap->realtime_offset_ns);
  if (err == SIM_OK) {
    for (size_t i = 0; i < names.count; i++)
      put_metadata_entry(b, XPLANE_EVENT_METADATA, (int64_t)i + 1,
                         names.names[i]);
    for (int s = 1; s < ST_COUNT; s++)
      put_metadata_entry(b, XPLANE_STAT_METADATA, s, k_stat_names[s]);
    size_t st = pbw_open(b);
    pbw_put_uint(b, XSTAT_METADATA_ID, ST_DROPPED_EVENTS);
    pbw_put_int(b, XSTAT_INT64, (int64_t)dropped);
    pbw_close(b, XPLANE_STATS, st);
    pbw_close(b, XSPACE_PLANES, m);
  }
  table_free(&names);
  return err;
}

int sp_xspace_encode(const sim_trace_snapshot* snap, uint8_t** out,
                     size_t* len) {
  if (snap == NULL || out == NULL || len == NULL) return SIM_EINVAL;
  *out = NULL;
  *len = 0;
  pbw_buf b = PBW_BUF_INIT;
  uint64_t t0 = sp_snapshot_t0(snap);
  int max_dev = sp_snapshot_max_device(snap);
  for (int d = 0; d <= max_dev; d++) {
    if (!sp_snapshot_has_device(snap, d)) continue;
    int err = put_plane(&b, snap, d, t0);
    if (err != SIM_OK) {
      pbw_buf_free(&b);
      return err;
    }
  }
  return pbw_buf_take(&b, out, len) == 0 ? SIM_OK : SIM_ENOMEM;
}
