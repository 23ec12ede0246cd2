/*
 * mapped.c - host memory mapped into a device's address space, the simdev
 * counterpart of cuMemHostRegister.
 *
 * A zero-copy DLPack import hands TF a buffer the producer (NumPy, JAX, TF
 * CPU) allocated. simdev memory is host memory, so kernels read such a
 * buffer directly; the memcpy callbacks, though, accept only pointers a
 * device owns (sim_mem_contains), so that TF handing the wrong pointer is
 * an error and not a silent host access. Registering the foreign range makes
 * it device memory for those checks until it is unregistered.
 *
 * Ranges are few and short-lived (one per live import), so a small array
 * scanned under mapped_lock is enough. The same range may be registered
 * more than once (one array imported twice); each registration is removed
 * by its own unregister. sim_mem_contains looks here only for pointers
 * outside the device region, so the common case never takes the lock.
 */
#include <stdatomic.h>
#include <string.h>

#include "sim_internal.h"

void sim_mapped_init(sim_device* dev) {
  sim_mutex_init(&dev->mapped_lock);
}

void sim_mapped_destroy(sim_device* dev) {
  free(dev->mapped);
  dev->mapped = NULL;
  sim_mutex_destroy(&dev->mapped_lock);
}

int sim_mem_register_host(sim_device* dev, void* p, uint64_t size) {
  if (dev == NULL || p == NULL || size == 0 ||
      (uintptr_t)p > UINTPTR_MAX - size)
    return SIM_EINVAL;
  int err = SIM_OK;
  sim_mutex_lock(&dev->mapped_lock);
  if (dev->nmapped == dev->capmapped) {
    int cap = dev->capmapped ? 2 * dev->capmapped : 8;
    sim_mapped_range* m = realloc(dev->mapped, (size_t)cap * sizeof(*m));
    if (m == NULL) {
      err = SIM_ENOMEM;
    } else {
      dev->mapped = m;
      dev->capmapped = cap;
    }
  }
  if (err == SIM_OK) {
    dev->mapped[dev->nmapped].base = (uintptr_t)p;
    dev->mapped[dev->nmapped].size = size;
    dev->nmapped++;
  }
  sim_mutex_unlock(&dev->mapped_lock);
  return err;
}

int sim_mem_unregister_host(sim_device* dev, void* p, uint64_t size) {
  if (dev == NULL || p == NULL) return SIM_EINVAL;
  int err = SIM_EINVAL;
  sim_mutex_lock(&dev->mapped_lock);
  for (int i = 0; i < dev->nmapped; i++) {
    if (dev->mapped[i].base == (uintptr_t)p && dev->mapped[i].size == size) {
      dev->mapped[i] = dev->mapped[dev->nmapped - 1];
      dev->nmapped--;
      err = SIM_OK;
      break;
    }
  }
  sim_mutex_unlock(&dev->mapped_lock);
  return err;
}

int sim_mapped_contains(const sim_device* dev, const void* p, uint64_t size) {
  sim_device* d = (sim_device*)dev; /* the lock is not part of the value */
  if (atomic_load(&d->nmapped) == 0) return 0;
  uintptr_t q = (uintptr_t)p;
  int found = 0;
  sim_mutex_lock(&d->mapped_lock);
  for (int i = 0; i < d->nmapped && !found; i++) {
    const sim_mapped_range* m = &d->mapped[i];
    found = q >= m->base && q - m->base <= m->size &&
            size <= m->size - (q - m->base);
  }
  sim_mutex_unlock(&d->mapped_lock);
  return found;
}
