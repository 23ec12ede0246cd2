/*
 * devices.c - the live simdev devices by ordinal.
 *
 * TF hands a device-to-device copy only one SP_Device (the stream's), while
 * the other pointer may belong to another simdev device; the copy callbacks
 * (executor.c) find its owner here. create_device / destroy_device
 * (plugin.c) keep the table.
 *
 * Lock contract: g_devices_lock guards g_devices. se_owner_of calls
 * sim_mem_contains under it, which takes only device_sim's own locks and
 * never calls back into se/.
 */
#include <pthread.h>

#include "se/se_internal.h"

static pthread_mutex_t g_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_device* g_devices[SIM_MAX_DEVICES];

void se_devices_add(int ordinal, sim_device* dev) {
  SIM_CHECK(ordinal >= 0 && ordinal < SIM_MAX_DEVICES);
  sim_mutex_lock(&g_devices_lock);
  g_devices[ordinal] = dev;
  sim_mutex_unlock(&g_devices_lock);
}

void se_devices_remove(sim_device* dev) {
  sim_mutex_lock(&g_devices_lock);
  for (int i = 0; i < SIM_MAX_DEVICES; i++)
    if (g_devices[i] == dev) g_devices[i] = NULL;
  sim_mutex_unlock(&g_devices_lock);
}

sim_device* se_owner_of(const void* p, uint64_t size) {
  sim_device* owner = NULL;
  sim_mutex_lock(&g_devices_lock);
  for (int i = 0; i < SIM_MAX_DEVICES && owner == NULL; i++)
    if (g_devices[i] && sim_mem_contains(g_devices[i], p, size))
      owner = g_devices[i];
  sim_mutex_unlock(&g_devices_lock);
  return owner;
}
