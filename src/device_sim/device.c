/*
 * device.c - a simulated device: its memory arena and the streams alive on
 * it.
 *
 * The device keeps a list of its streams only for two device-wide operations:
 * synchronize-all and teardown. Streams are linked through sim_stream's
 * `dev_next`, under streams_lock; a stream links itself in when it is created
 * and out when it is destroyed (stream.c), so device.c calls stream.c and
 * never the other way round. Neither operation holds streams_lock while
 * waiting on a stream (a stream's worker may be running a host callback that
 * creates or destroys another stream of the same device): they snapshot the
 * list first.
 */
#include <string.h>

#include "sim_internal.h"

const char* sim_device_create_error(void) {
  return sim_create_error_text();
}

int sim_device_create(int ordinal, uint64_t memory_mb, sim_device** out) {
  return sim_device_create_ex(ordinal, memory_mb, 0, out);
}

int sim_device_create_ex(int ordinal, uint64_t memory_mb, unsigned flags,
                         sim_device** out) {
  sim_create_error_set("%s", "");
  if (out == NULL || ordinal < 0 || memory_mb == 0 ||
      memory_mb > SIM_MAX_MEMORY_MB || (flags & ~SIM_DEVICE_DISCRETE) != 0)
    return SIM_EINVAL;
  sim_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return SIM_ENOMEM;
  dev->ordinal = ordinal;
  snprintf(dev->name, sizeof(dev->name), "simdev-%d", ordinal);
  int err = sim_arena_create(ordinal, dev->name, memory_mb << 20,
                             (flags & SIM_DEVICE_DISCRETE) != 0, &dev->arena);
  if (err != SIM_OK) {
    free(dev);
    return err;
  }
  err = sim_trace_device_born(dev);
  if (err != SIM_OK) {
    sim_arena_destroy(dev->arena);
    free(dev);
    return err;
  }
  sim_mutex_init(&dev->streams_lock);
  sim_mapped_init(dev);
  *out = dev;
  return SIM_OK;
}

void sim_device_destroy(sim_device* dev) {
  if (dev == NULL) return;
  /* Streams unlink themselves in sim_stream_destroy; take them one at a time
   * so no lock is held while a stream drains. */
  for (;;) {
    sim_mutex_lock(&dev->streams_lock);
    sim_stream* s = dev->streams;
    sim_mutex_unlock(&dev->streams_lock);
    if (s == NULL) break;
    sim_stream_destroy(s);
  }
  sim_arena_destroy(dev->arena);
  sim_trace_device_gone(dev);
  sim_mapped_destroy(dev);
  sim_mutex_destroy(&dev->streams_lock);
  free(dev);
}

int sim_device_ordinal(const sim_device* dev) {
  return dev->ordinal;
}
int sim_device_numa_node(const sim_device* dev) {
  return sim_arena_numa_node(dev->arena);
}
int sim_device_numa_bound(const sim_device* dev) {
  return sim_arena_numa_bound(dev->arena);
}
const char* sim_device_name(const sim_device* dev) {
  return dev->name;
}
int sim_device_discrete(const sim_device* dev) {
  return sim_arena_discrete(dev->arena);
}

/* Records a marker on every stream under the lock (cheap, non-blocking),
 * then waits for the markers without it. A marker is an event, so streams
 * destroyed meanwhile are harmless: the event outlives them. */
int sim_device_synchronize(sim_device* dev) {
  if (dev == NULL) return SIM_EINVAL;
  int first_err = SIM_OK;
  sim_mutex_lock(&dev->streams_lock);
  size_t count = 0, n = 0;
  int short_of_memory = 0;
  for (sim_stream* s = dev->streams; s != NULL; s = s->dev_next) count++;
  sim_event** marks = calloc(count ? count : 1, sizeof(*marks));
  for (sim_stream* s = marks ? dev->streams : NULL; s; s = s->dev_next) {
    int err = sim_stream_status(s, NULL, 0);
    if (err != SIM_OK && first_err == SIM_OK) first_err = err;
    if (sim_stream_is_current(s)) continue; /* a callback syncing its device */
    if (sim_event_create(&marks[n]) != SIM_OK) {
      short_of_memory = 1;
      break;
    }
    SIM_CHECK(sim_event_record_marker(marks[n], s) == SIM_OK);
    n++;
  }
  sim_mutex_unlock(&dev->streams_lock);
  if ((marks == NULL || short_of_memory) && first_err == SIM_OK)
    first_err = SIM_ENOMEM;
  int marker_err = SIM_OK;
  for (size_t i = 0; i < n; i++) {
    int err = sim_event_synchronize(marks[i]);
    if (err != SIM_OK && marker_err == SIM_OK) marker_err = err;
    sim_event_destroy(marks[i]);
  }
  free(marks);
  if (first_err == SIM_OK && marker_err != SIM_OK) {
    /* A stream failed while we waited: report its own error code, not the
     * marker's generic SIM_ESTREAM (unless the stream is gone already). */
    first_err = marker_err;
    sim_mutex_lock(&dev->streams_lock);
    for (sim_stream* s = dev->streams; s != NULL; s = s->dev_next) {
      int err = sim_stream_status(s, NULL, 0);
      if (err != SIM_OK) {
        first_err = err;
        break;
      }
    }
    sim_mutex_unlock(&dev->streams_lock);
  }
  return first_err;
}
