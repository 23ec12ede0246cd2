/*
 * config.c - SIMDEV_* environment settings.
 *
 * Parsing is strict: a number must be a whole decimal integer in range (a
 * path, SIMDEV_TRACE, must be non-empty and fit).
 * A typo must never silently become a default (SIMDEV_MEMORY_MB=2g is an
 * error, not 2 MiB), because the caller turns the error into a refusal to
 * load the plugin with a message that names the variable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Parses env var `name` into *out if set. 0, or SIM_EINVAL with msg. */
static int parse_u64(const char* name, uint64_t lo, uint64_t hi, uint64_t* out,
                     char* msg, size_t msg_len) {
  const char* v = getenv(name);
  if (v == NULL) return SIM_OK;
  const char* p = v;
  while (*p == ' ' || *p == '\t') p++;
  int ok = *p >= '0' && *p <= '9';
  char* end = NULL;
  errno = 0;
  unsigned long long n = ok ? strtoull(p, &end, 10) : 0;
  if (ok) {
    while (*end == ' ' || *end == '\t') end++;
    ok = errno == 0 && *end == '\0' && n >= lo && n <= hi;
  }
  if (!ok) {
    snprintf(msg, msg_len,
             "invalid %s=\"%s\": expected an integer from %" PRIu64
             " to %" PRIu64,
             name, v, lo, hi);
    return SIM_EINVAL;
  }
  *out = n;
  return SIM_OK;
}

/* SIMDEV_TRACE: a path, not opened here (the plugin checks at start-up that
 * it can write it). Set but empty, or too long for trace_path, is an error:
 * an empty value is more likely a broken script than a wish for no trace. */
static int parse_path(const char* name, char* out, size_t out_len, char* msg,
                      size_t msg_len) {
  const char* v = getenv(name);
  out[0] = '\0';
  if (v == NULL) return SIM_OK;
  size_t n = strlen(v);
  if (n == 0 || n >= out_len) {
    snprintf(msg, msg_len,
             "invalid %s=\"%.64s%s\": expected a file path of 1 to %zu bytes",
             name, v, n > 64 ? "..." : "", out_len - 1);
    return SIM_EINVAL;
  }
  memcpy(out, v, n + 1);
  return SIM_OK;
}

/* SIMDEV_FAULTS: copied, and its grammar checked (faults.c) so a typo fails
 * start-up with the other settings. Set but empty is allowed: no faults. */
static int parse_faults(char* out, size_t out_len, char* msg, size_t msg_len) {
  const char* v = getenv("SIMDEV_FAULTS");
  out[0] = '\0';
  if (v == NULL) return SIM_OK;
  size_t n = strlen(v);
  if (n >= out_len) {
    snprintf(msg, msg_len,
             "invalid SIMDEV_FAULTS=\"%.64s...\": longer than %zu bytes", v,
             out_len - 1);
    return SIM_EINVAL;
  }
  memcpy(out, v, n + 1);
  return sim_faults_check(out, msg, msg_len);
}

int sim_config_from_env(sim_config* cfg, char* msg, size_t msg_len) {
  if (cfg == NULL || msg == NULL || msg_len == 0) return SIM_EINVAL;
  msg[0] = '\0';
  uint64_t count = 1, mb = 2048, sync = 0, early = 0, inl = 0, disabled = 0;
  uint64_t discrete = 0, bfc = 1;
  int err = parse_u64("SIMDEV_DISABLE", 0, 1, &disabled, msg, msg_len);
  if (err != SIM_OK) return err;
  if (disabled) {
    *cfg = (sim_config){.device_count = 0,
                        .memory_mb = 0,
                        .disabled = 1,
                        .bfc = 1,
                        .trace_records = SIM_TRACE_DEFAULT_RECORDS};
    return SIM_OK;
  }
  err = parse_u64("SIMDEV_DEVICE_COUNT", 1, SIM_MAX_DEVICES, &count, msg,
                  msg_len);
  if (err == SIM_OK)
    err =
        parse_u64("SIMDEV_MEMORY_MB", 1, SIM_MAX_MEMORY_MB, &mb, msg, msg_len);
  if (err == SIM_OK) err = parse_u64("SIMDEV_SYNC", 0, 1, &sync, msg, msg_len);
  if (err == SIM_OK)
    err =
        parse_u64("SIMDEV_UNSAFE_EARLY_COMPLETION", 0, 1, &early, msg, msg_len);
  if (err == SIM_OK) err = parse_u64("SIMDEV_INLINE", 0, 1, &inl, msg, msg_len);
  uint64_t records = SIM_TRACE_DEFAULT_RECORDS;
  if (err == SIM_OK)
    err = parse_u64("SIMDEV_TRACE_EVENTS", 1024, SIM_TRACE_MAX_RECORDS,
                    &records, msg, msg_len);
  if (err == SIM_OK)
    err = parse_path("SIMDEV_TRACE", cfg->trace_path, sizeof(cfg->trace_path),
                     msg, msg_len);
  if (err == SIM_OK)
    err = parse_u64("SIMDEV_DISCRETE", 0, 1, &discrete, msg, msg_len);
  if (err == SIM_OK) err = parse_u64("SIMDEV_BFC", 0, 1, &bfc, msg, msg_len);
  if (err == SIM_OK)
    err = parse_faults(cfg->faults, sizeof(cfg->faults), msg, msg_len);
  if (err != SIM_OK) return err;
  cfg->bfc_off_for_faults = getenv("SIMDEV_BFC") == NULL &&
                            sim_faults_has(cfg->faults, SIM_FAULT_ALLOC);
  if (cfg->bfc_off_for_faults) bfc = 0;
  cfg->discrete = (int)discrete;
  cfg->bfc = (int)bfc;
  cfg->trace_records = (uint32_t)records;
  cfg->device_count = (int)count;
  cfg->memory_mb = mb;
  cfg->sync_launch = (int)sync;
  cfg->unsafe_early_completion = (int)early;
  cfg->inline_small = (int)inl;
  cfg->disabled = 0;
  return SIM_OK;
}
