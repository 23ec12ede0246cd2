/*
 * plugin.c - SE_InitPlugin and the platform-level tables: SP_Platform,
 * SP_PlatformFns, SP_DeviceFns, SP_TimerFns.
 *
 * TensorFlow calls SE_InitPlugin once per process, on the thread that runs
 * `import tensorflow`. It then creates one SP_Device per ordinal (lazily,
 * from any thread), each with its SP_StreamExecutor (executor.c). Settings are
 * read from SIMDEV_* once, here; an invalid one fails SE_InitPlugin with a
 * message naming the variable. (TensorFlow turns any plugin init error into a
 * process abort with that message: the plugin itself never crashes.)
 *
 * Refusing to run: the C API matches structs by size, not by version, so a
 * plugin built against one TensorFlow release and loaded into another would
 * go wrong at some field offset. SE_InitPlugin checks the running release
 * (TF_Version) and the sizes of the structs TF hands in; on a mismatch, or
 * with SIMDEV_DISABLE=1, it still registers the platform (an init error
 * would make TF abort the process) but offers no device, says why in one
 * line on stderr, and TF_InitKernel registers no kernel.
 */
#include <stdio.h>
#include <string.h>

#include "profiler/sp.h"
#include "se/se_internal.h"
#include "tfcompat/tfc.h"

/* The release whose headers simdev was built against, "major.minor.patch",
 * from the wheel's metadata (CMakeLists.txt). */
#ifndef SIMDEV_TF_VERSION
#error "the build must define SIMDEV_TF_VERSION"
#endif

static sim_config g_config; /* read once, by SE_InitPlugin */
/* Why this process gets no SIMDEV device, or NULL. Set once by
 * SE_InitPlugin, read after it (TF calls everything else later). */
static const char* g_off_reason;
static char g_off_buf[256];

const sim_config* se_config(void) {
  return &g_config;
}
const char* se_disabled_reason(void) {
  return g_off_reason;
}

/* ---- SP_DeviceFns ------------------------------------------------------ */

static int32_t get_numa_node(const SP_Device* device) {
  return sim_device_numa_node(se_device(device));
}

/* get_memory_bandwidth and get_gflops stay NULL: simdev does not measure
 * them, and TF treats a missing entry as "unknown". */
static void create_device_fns(const SP_Platform* platform,
                              SE_CreateDeviceFnsParams* params,
                              TF_Status* status) {
  SP_DeviceFns* fns = params->device_fns;
  fns->struct_size = SP_DEVICE_FNS_STRUCT_SIZE;
  fns->ext = NULL;
  fns->get_numa_node = get_numa_node;
  fns->get_memory_bandwidth = NULL;
  fns->get_gflops = NULL;
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_device_fns(const SP_Platform* platform,
                               SP_DeviceFns* device_fns) {}

/* ---- devices ----------------------------------------------------------- */

static void get_device_count(const SP_Platform* platform, int* device_count,
                             TF_Status* status) {
  *device_count = g_config.device_count;
  TF_SetStatus(status, TF_OK, "");
}

static void create_device(const SP_Platform* platform,
                          SE_CreateDeviceParams* params, TF_Status* status) {
  int ordinal = params->ordinal;
  if (ordinal < 0 || ordinal >= g_config.device_count) {
    se_set_statusf(status, SIM_EINVAL,
                   "device ordinal %d out of range [0, %d) (%s)", ordinal,
                   g_config.device_count,
                   g_off_reason ? g_off_reason : "SIMDEV_DEVICE_COUNT");
    return;
  }
  sim_device* dev = NULL;
  int err =
      sim_device_create_ex(ordinal, g_config.memory_mb,
                           g_config.discrete ? SIM_DEVICE_DISCRETE : 0, &dev);
  if (err != SIM_OK) {
    /* A discrete device fails for reasons of its own (ulimit -f, memfd,
     * too many of them), which device_sim explains. */
    const char* why = sim_device_create_error();
    if (why[0] != '\0')
      se_set_statusf(status, err, "cannot create device %d with %llu MiB: %s",
                     ordinal, (unsigned long long)g_config.memory_mb, why);
    else
      se_set_statusf(status, err,
                     "cannot create device %d with %llu MiB "
                     "(SIMDEV_MEMORY_MB): %s",
                     ordinal, (unsigned long long)g_config.memory_mb,
                     sim_strerror(err));
    return;
  }
  /* SIMDEV_INLINE: every stream of the device inherits it. */
  sim_device_set_inline(dev, g_config.inline_small);
  se_devices_add(ordinal, dev);
  SP_Device* d = params->device;
  d->struct_size = SP_DEVICE_STRUCT_SIZE;
  d->ext = NULL;
  d->ordinal = ordinal;
  d->device_handle = dev;
  d->hardware_name = sim_device_name(dev);
  d->device_vendor = "simdev (simulated on the host CPU)";
  d->pci_bus_id = NULL; /* not a PCI device */
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_device(const SP_Platform* platform, SP_Device* device) {
  sim_device* dev = se_device(device);
  se_devices_remove(dev);
  sim_device_destroy(dev);
  device->device_handle = NULL;
}

/* ---- stream executor and timers ---------------------------------------- */

static void create_stream_executor(const SP_Platform* platform,
                                   SE_CreateStreamExecutorParams* params,
                                   TF_Status* status) {
  se_fill_stream_executor(params->stream_executor);
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_stream_executor(const SP_Platform* platform,
                                    SP_StreamExecutor* se) {}

static void create_timer_fns(const SP_Platform* platform, SP_TimerFns* timer,
                             TF_Status* status) {
  timer->struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  timer->ext = NULL;
  timer->nanoseconds = se_timer_nanoseconds;
  TF_SetStatus(status, TF_OK, "");
}

static void destroy_timer_fns(const SP_Platform* platform,
                              SP_TimerFns* timer_fns) {}

/* ---- platform ---------------------------------------------------------- */

/* Sets ptr->field only if the struct TF handed in (its struct_size) holds
 * it: on the refusing path (check_compatible) an older TensorFlow may hand
 * in shorter structs than these headers describe, and nothing may be
 * written past their end. With TF 2.21 every field is there. */
#define SE_SET(ptr, TYPE, field, value)                         \
  do {                                                          \
    if (SE_HAS_FIELD(ptr, TYPE, field)) (ptr)->field = (value); \
  } while (0)

static void fill_platform_fns(SP_PlatformFns* fns) {
  if (fns->struct_size > SP_PLATFORM_FNS_STRUCT_SIZE)
    fns->struct_size = SP_PLATFORM_FNS_STRUCT_SIZE; /* a newer TF */
  SE_SET(fns, SP_PlatformFns, ext, NULL);
  SE_SET(fns, SP_PlatformFns, get_device_count, get_device_count);
  SE_SET(fns, SP_PlatformFns, create_device, create_device);
  SE_SET(fns, SP_PlatformFns, destroy_device, destroy_device);
  SE_SET(fns, SP_PlatformFns, create_device_fns, create_device_fns);
  SE_SET(fns, SP_PlatformFns, destroy_device_fns, destroy_device_fns);
  SE_SET(fns, SP_PlatformFns, create_stream_executor, create_stream_executor);
  SE_SET(fns, SP_PlatformFns, destroy_stream_executor, destroy_stream_executor);
  SE_SET(fns, SP_PlatformFns, create_timer_fns, create_timer_fns);
  SE_SET(fns, SP_PlatformFns, destroy_timer_fns, destroy_timer_fns);
}

static void destroy_platform(SP_Platform* platform) {}
static void destroy_platform_fns(SP_PlatformFns* platform_fns) {}

/* "major.minor" of a version string, for comparing releases: patch
 * releases keep the C API's structs. */
static int same_release(const char* a, const char* b) {
  const char* dot = strchr(a, '.');
  if (dot == NULL || (dot = strchr(dot + 1, '.')) == NULL) return 0;
  size_t n = (size_t)(dot - a);
  return strncmp(a, b, n) == 0 && (b[n] == '.' || b[n] == '\0');
}

/* The running TensorFlow's version, or NULL when the process has none (the
 * conformance harness drives the plugin without TF's runtime). TF_Version
 * lives in libtensorflow_cc, which TF's Python module loads with global
 * symbols; the RTLD_NOLOAD lookup covers a host that loaded it locally. */
static const char* running_tf_version(void) {
  const char* (*fn)(void) = NULL;
  return TFC_FIND(fn, TF_Version) ? fn() : NULL;
}

/* An alloc rule in SIMDEV_FAULTS counts simdev's allocations; with TF's BFC
 * allocator on those are a few large chunks, so a rule such as nth=3 would
 * fire late or never, silently. sim_config_from_env turned BFC off unless
 * SIMDEV_BFC was set; say which way it went, once, at load. */
static void report_bfc_choice(void) {
  if (g_config.disabled || g_off_reason != NULL) return; /* no device */
  if (g_config.bfc_off_for_faults)
    fprintf(stderr,
            "simdev: SIMDEV_FAULTS has an alloc rule, so TensorFlow's BFC "
            "allocator is off for this run (as with SIMDEV_BFC=0): every "
            "tensor is one device allocation that the rule counts. Set "
            "SIMDEV_BFC=1 to keep BFC (the rule then counts its chunks)\n");
  else if (g_config.bfc && sim_faults_has(g_config.faults, SIM_FAULT_ALLOC))
    fprintf(stderr,
            "simdev: SIMDEV_FAULTS has an alloc rule and SIMDEV_BFC=1: the "
            "rule counts the BFC allocator's chunk allocations, not "
            "tensors\n");
}

/* Sets g_off_reason if this process must get no device. */
static void check_compatible(const SE_PlatformRegistrationParams* params) {
  const char* running = NULL;
  if (g_config.disabled) {
    g_off_reason = "SIMDEV_DISABLE=1";
  } else if ((running = running_tf_version()) != NULL &&
             !same_release(SIMDEV_TF_VERSION, running)) {
    snprintf(g_off_buf, sizeof(g_off_buf),
             "built for TensorFlow %s, running in TensorFlow %s (install "
             "tensorflow-cpu==%.*s.*, or rebuild simdev against this one)",
             SIMDEV_TF_VERSION, running,
             (int)(strrchr(SIMDEV_TF_VERSION, '.') - SIMDEV_TF_VERSION),
             SIMDEV_TF_VERSION);
    g_off_reason = g_off_buf;
  } else if (params->struct_size <
                 SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE ||
             params->platform->struct_size < SP_PLATFORM_STRUCT_SIZE ||
             params->platform_fns->struct_size < SP_PLATFORM_FNS_STRUCT_SIZE) {
    snprintf(g_off_buf, sizeof(g_off_buf),
             "TensorFlow %s hands in smaller structs than the %s headers "
             "simdev was built with (registration params %zu < %zu, platform "
             "%zu < %zu, platform fns %zu < %zu)",
             running ? running : "(version unknown)", SIMDEV_TF_VERSION,
             params->struct_size,
             (size_t)SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE,
             params->platform->struct_size, (size_t)SP_PLATFORM_STRUCT_SIZE,
             params->platform_fns->struct_size,
             (size_t)SP_PLATFORM_FNS_STRUCT_SIZE);
    g_off_reason = g_off_buf;
  }
  if (g_off_reason != NULL) {
    g_config.device_count = 0;
    fprintf(stderr, "simdev: no SIMDEV device: %s\n", g_off_reason);
  }
}

__attribute__((visibility("default"))) void SE_InitPlugin(
    SE_PlatformRegistrationParams* params, TF_Status* status) {
  char msg[512]; /* se_set_status keeps 512 */
  int err = sim_config_from_env(&g_config, msg, sizeof(msg));
  if (err != SIM_OK) {
    se_set_status(status, err, "bad setting", msg);
    return;
  }
  check_compatible(params);
  report_bfc_choice();
  /* SIMDEV_FAULTS, checked by sim_config_from_env: installed before any
   * device exists, so the plan counts from the first allocation. */
  err = sim_faults_set(g_config.faults, msg, sizeof(msg));
  if (err != SIM_OK) {
    se_set_status(status, err, "bad setting", msg);
    return;
  }
  /* SIMDEV_TRACE: open the file and start recording now, before any device
   * or stream exists, so the trace holds the whole run; a path that cannot
   * be written fails start-up here rather than losing the trace at exit. */
  sp_profiler_set_ring_records(g_config.trace_records);
  if (!g_config.disabled && g_config.trace_path[0] != '\0') {
    err = sp_tracefile_start(g_config.trace_path, g_config.trace_records, msg,
                             sizeof(msg));
    if (err != SIM_OK) {
      se_set_status(status, err, "SIMDEV_TRACE", msg);
      return;
    }
  }
  SE_SET(params, SE_PlatformRegistrationParams, major_version, SE_MAJOR);
  SE_SET(params, SE_PlatformRegistrationParams, minor_version, SE_MINOR);
  SE_SET(params, SE_PlatformRegistrationParams, patch_version, SE_PATCH);

  SP_Platform* p = params->platform;
  if (p->struct_size > SP_PLATFORM_STRUCT_SIZE)
    p->struct_size = SP_PLATFORM_STRUCT_SIZE; /* a newer TF: we fill ours */
  SE_SET(p, SP_Platform, ext, NULL);
  SE_SET(p, SP_Platform, name, SE_SIMDEV_NAME);
  SE_SET(p, SP_Platform, type, SE_SIMDEV_TYPE);
  /* unified_* callbacks stay NULL; TF's BFC sits on our allocate; grow on
   * demand, do not grab the whole region. */
  SE_SET(p, SP_Platform, supports_unified_memory, 0);
  /* SIMDEV_BFC=0: every tensor is its own allocation (for debugging). */
  SE_SET(p, SP_Platform, use_bfc_allocator, g_config.bfc ? 1 : 0);
  SE_SET(p, SP_Platform, force_memory_growth, 1);

  fill_platform_fns(params->platform_fns);
  SE_SET(params, SE_PlatformRegistrationParams, destroy_platform,
         destroy_platform);
  SE_SET(params, SE_PlatformRegistrationParams, destroy_platform_fns,
         destroy_platform_fns);
  TF_SetStatus(status, TF_OK, "");
}
