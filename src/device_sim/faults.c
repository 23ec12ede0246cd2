/*
 * faults.c - SIMDEV_FAULTS, the fault plan (sim.h, "fault injection").
 *
 * Not implemented yet: any non-empty plan is refused, so a user's plan is
 * never silently ignored.
 */
#include <string.h>

#include "sim_internal.h"

static const char* const kind_names[SIM_FAULT_KIND_COUNT] = {
    "alloc",  "memcpy_h2d", "memcpy_d2h", "memcpy_d2d",
    "launch", "stream",     "event",      "callback",
};

const char* sim_fault_kind_name(int kind) {
  return kind >= 0 && kind < SIM_FAULT_KIND_COUNT ? kind_names[kind] : "?";
}

int sim_faults_check(const char* spec, char* msg, size_t msg_len) {
  if (spec == NULL || spec[0] == '\0') return SIM_OK;
  snprintf(msg, msg_len,
           "invalid SIMDEV_FAULTS=\"%.64s\": fault injection is not "
           "implemented yet",
           spec);
  return SIM_EINVAL;
}

int sim_faults_set(const char* spec, char* msg, size_t msg_len) {
  return sim_faults_check(spec, msg, msg_len);
}

uint64_t sim_faults_injected(int kind) {
  (void)kind;
  return 0;
}
