/*
 * registration.c - loading, registering and tearing down a plugin as TF does.
 *
 * Mirrors TensorFlow 2.21's stream_executor.cc: InitStreamExecutorPlugin
 * (SE_InitPlugin, then ValidateSEPlatformRegistrationParams,
 * ValidateSPPlatform, ValidateSPPlatformFns, create_device_fns +
 * ValidateSPDeviceFns, create_stream_executor + ValidateSPStreamExecutor),
 * CPlatform's GetUncachedExecutor (create_device + ValidateSPDevice) and
 * ~CPlatform. TF aborts the process when any of that fails, so every rule
 * here is required.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NOLOAD */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define REGISTRATION_RULES(X)                                                 \
  X(R_EXPORTS, "plugin.exports_se_init", REQUIRED, "SE_InitPlugin",           \
    "The library exports SE_InitPlugin: TF looks it up with dlsym after "     \
    "loading every .so in tensorflow-plugins/ and registers no device "      \
    "without it.")                                                            \
  X(R_INIT_OK, "registration.init_ok", REQUIRED, "SE_InitPlugin",             \
    "SE_InitPlugin returns OK: TF's InitStreamExecutorPlugin passes the "     \
    "status to TF_CHECK_OK-style handling and the load fails (`import "       \
    "tensorflow` aborts for a plugin in tensorflow-plugins/).")               \
  X(R_KEEPS_STRUCTS, "registration.writes_tf_structs", REQUIRED,             \
    "SE_InitPlugin",                                                          \
    "The plugin fills the structs TF passes (params->platform, "             \
    "params->platform_fns, device_fns, stream_executor) and does not "       \
    "replace the pointers: TF reads its own copies, so replaced pointers "   \
    "are silently ignored.")                                                 \
  X(R_VERSION, "registration.version", RECOMMENDED, "SE_InitPlugin",          \
    "The plugin leaves (or sets) major_version and minor_version to those "  \
    "of the header it was built with. TF 2.21 writes SE_MAJOR.SE_MINOR "     \
    "before SE_InitPlugin and never reads them back, so a difference is "    \
    "ignored today; it says the plugin was built for another API.")          \
  X(R_DESTROY_FNS, "registration.destroy_functions", REQUIRED,               \
    "destroy_platform / destroy_platform_fns",                               \
    "SE_InitPlugin sets destroy_platform and destroy_platform_fns: TF's "    \
    "ValidateSEPlatformRegistrationParams rejects the plugin otherwise.")    \
  X(R_STRUCT_SIZE, "registration.struct_sizes", REQUIRED, "SE_InitPlugin",    \
    "Every struct the plugin fills keeps a non-zero struct_size: TF's "      \
    "Validate* functions reject a zero struct_size.")                        \
  X(R_NAME, "platform.name_valid", REQUIRED, "SP_Platform.name",             \
    "platform.name is set and matches [A-Z][A-Z_]*: TF's ValidateSPPlatform " \
    "rejects anything else (it becomes part of device names).")             \
  X(R_TYPE, "platform.type_valid", REQUIRED, "SP_Platform.type",             \
    "platform.type is set and matches [A-Z][A-Z_]*: users write it as "      \
    "/device:TYPE:0, and TF's ValidateSPPlatform rejects anything else.")    \
  X(R_PLATFORM_FNS, "platform_fns.set", REQUIRED, "SP_PlatformFns",          \
    "create_device, destroy_device, create_stream_executor, "                \
    "destroy_stream_executor, create_device_fns and destroy_device_fns are " \
    "set (TF's ValidateSPPlatformFns), and get_device_count too: TF calls "  \
    "it (about a dozen times) without checking for NULL.")                  \
  X(R_TIMER_FNS_SET, "platform_fns.destroy_timer_fns", RECOMMENDED,          \
    "SP_PlatformFns.destroy_timer_fns",                                      \
    "destroy_timer_fns is set: ~CPlatform calls it without checking for "    \
    "NULL, but TF 2.21 never destroys a registered platform in practice.")   \
  X(R_DEVICE_FNS, "device_fns.create", REQUIRED, "create_device_fns",        \
    "create_device_fns returns OK and keeps struct_size: TF aborts the "     \
    "registration otherwise (ValidateSPDeviceFns).")                         \
  X(R_SE_CREATE, "stream_executor.create", REQUIRED,                         \
    "create_stream_executor",                                                 \
    "create_stream_executor returns OK: TF aborts the registration "         \
    "otherwise.")                                                            \
  X(R_SE_FNS, "stream_executor.fns_set", REQUIRED, "SP_StreamExecutor",      \
    "Every callback TF's ValidateSPStreamExecutor requires is set (and "     \
    "unified_memory_* when supports_unified_memory).")                       \
  X(R_DTOD_SET, "stream_executor.memcpy_dtod", REQUIRED, "memcpy_dtod",      \
    "memcpy_dtod is set: TF 2.21 does not validate it but CStream::Memcpy "  \
    "calls it without checking for every copy between two tensors on the "  \
    "plugin's devices (a NULL crashes the process then).")                   \
  X(R_COUNT, "devices.count", RECOMMENDED, "get_device_count",               \
    "get_device_count returns OK and a count >= 0 (0 when there is no "      \
    "hardware): TF's CPlatform::VisibleDeviceCount logs an error status and " \
    "takes it, like a negative count, as 0 devices.")                        \
  X(R_DEVICE, "device.create", REQUIRED, "create_device",                    \
    "create_device returns OK for every ordinal below the count and keeps "  \
    "struct_size: TF creates every visible device when the session starts "  \
    "and fails device creation otherwise (ValidateSPDevice).")
CONF_RULES(conf_registration_rules, REGISTRATION_RULES)

/* Poison for structs TF copies and then drops (see conf_env). */
#define CONF_POISON 0xA5

/* What a failed dlopen of a plugin most likely needs. */
static const char* load_hint(const char* why) {
  if (strstr(why, "undefined symbol: Py") != NULL) {
    return "the plugin links TF's Python extension and needs libpython: "
           "--preload libpython3.X.so.1.0 (the Python its TF was built for)";
  }
  if (strstr(why, "cannot open shared object file") != NULL) {
    return "a library the plugin needs is not on the search path: "
           "--lib-path DIR, or --tf-dir for TF's own libraries";
  }
  if (strstr(why, "undefined symbol") != NULL) {
    return "the plugin was built against another TF release: --tf-dir that "
           "release's tensorflow directory";
  }
  return "check `ldd` on the plugin";
}

int conf_load(conf_env* e, const char* path) {
  e->plugin_path = path;
  for (int i = 0; i < e->opt->npreload; i++) {
    if (dlopen(e->opt->preload[i], RTLD_NOW | RTLD_GLOBAL) == NULL) {
      fprintf(stderr, "simdev_conformance: --preload %s: %s\n",
              e->opt->preload[i], dlerror());
      return 0;
    }
  }
  /* As tsl::internal::LoadDynamicLibrary. A name without a '/' would be
   * looked up on the library search path: the user means a file. */
  char rel[4096];
  if (strchr(path, '/') == NULL) {
    snprintf(rel, sizeof(rel), "./%s", path);
    path = rel;
  }
  /* registration.imports reads the file first, in the run's own process
   * (a test's process loads what the run loaded already): it names every
   * TF function missing where dlopen names one, and keeps a file dlopen
   * would crash on from being loaded. */
  int scan = e->opt->run_test == NULL && e->opt->child_case == NULL;
  if (scan && !conf_imports_scan(path)) return 0;
  e->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  char why[1024] = "";
  if (e->dl == NULL) snprintf(why, sizeof(why), "%s", dlerror());
  int explained = scan && conf_imports_verdict(e->dl);
  if (e->dl == NULL) {
    fprintf(stderr, "simdev_conformance: cannot load %s: %s\n  hint: %s\n",
            path, why,
            explained ? "registration.imports lists the TF functions "
                        "missing, and why"
                      : load_hint(why));
    return 0;
  }
  dlerror();
  void* sym = dlsym(e->dl, "SE_InitPlugin");
  if (!EXPECT(R_EXPORTS, sym != NULL, "dlsym(SE_InitPlugin): %s", dlerror())) {
    return 0;
  }
  /* POSIX guarantees object and function pointers convert through dlsym. */
  memcpy(&e->init, &sym, sizeof(sym));
  return 1;
}

/* TF's ValidateDeviceType: the name and the type must match [A-Z][A-Z_]*
 * (no digits, no lowercase, no '/' or ':' which are device-spec syntax). */
int conf_valid_device_type(const char* s) {
  if (s == NULL || !(s[0] >= 'A' && s[0] <= 'Z')) return 0;
  for (const char* p = s + 1; *p; p++) {
    if (!((*p >= 'A' && *p <= 'Z') || *p == '_')) return 0;
  }
  return 1;
}

void conf_registration_params(SE_PlatformRegistrationParams* params,
                              SP_Platform* platform, SP_PlatformFns* pfns) {
  *params = (SE_PlatformRegistrationParams){
      .struct_size = SE_PLATFORM_REGISTRATION_PARAMS_STRUCT_SIZE,
      .major_version = SE_MAJOR,
      .minor_version = SE_MINOR,
      .patch_version = SE_PATCH,
      .platform = platform,
      .platform_fns = pfns};
  *platform = (SP_Platform){.struct_size = SP_PLATFORM_STRUCT_SIZE};
  *pfns = (SP_PlatformFns){.struct_size = SP_PLATFORM_FNS_STRUCT_SIZE};
}

/* Each named pointer must be set; one check per entry, so the observed
 * text names the missing callback. */
typedef struct named_fn {
  const char* name;
  int set;
} named_fn;

#define FN(s, m) {#m, (s).m != NULL}

static int all_set(const conf_rule* rule, const named_fn* fns, size_t n,
                   const char* what) {
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    ok &= conf_check(rule, fns[i].set, __FILE__, __LINE__, "%s.%s is NULL",
                     what, fns[i].name);
  }
  return ok;
}

static int platform_fns_ok(const SP_PlatformFns* p) {
  const named_fn fns[] = {
      FN(*p, create_device),      FN(*p, destroy_device),
      FN(*p, create_stream_executor), FN(*p, destroy_stream_executor),
      FN(*p, create_device_fns),  FN(*p, destroy_device_fns),
      FN(*p, get_device_count)};
  return all_set(&R_PLATFORM_FNS, fns, sizeof(fns) / sizeof(fns[0]),
                 "SP_PlatformFns");
}

static int stream_executor_ok(const SP_StreamExecutor* se, int unified) {
  const named_fn fns[] = {
      FN(*se, allocate),          FN(*se, deallocate),
      FN(*se, get_allocator_stats), FN(*se, host_memory_allocate),
      FN(*se, host_memory_deallocate), FN(*se, device_memory_usage),
      FN(*se, create_stream),     FN(*se, destroy_stream),
      FN(*se, create_stream_dependency), FN(*se, get_stream_status),
      FN(*se, create_event),      FN(*se, destroy_event),
      FN(*se, get_event_status),  FN(*se, record_event),
      FN(*se, wait_for_event),    FN(*se, memcpy_dtoh),
      FN(*se, memcpy_htod),       FN(*se, sync_memcpy_dtoh),
      FN(*se, sync_memcpy_htod),  FN(*se, block_host_for_event),
      FN(*se, synchronize_all_activity), FN(*se, host_callback),
      FN(*se, mem_zero),          FN(*se, memset),
      FN(*se, memset32)};
  int ok = all_set(&R_SE_FNS, fns, sizeof(fns) / sizeof(fns[0]),
                   "SP_StreamExecutor");
  if (unified) {
    const named_fn um[] = {FN(*se, unified_memory_allocate),
                           FN(*se, unified_memory_deallocate)};
    ok &= all_set(&R_SE_FNS, um, 2,
                  "SP_StreamExecutor (supports_unified_memory is set)");
  }
  return ok;
}

/* SE_InitPlugin with TF's pre-filled structs, then TF's validation. The
 * structs live here until they are copied into *e, as in
 * InitStreamExecutorPlugin (whose locals are moved into the CPlatform). */
static int register_platform(conf_env* e) {
  SE_PlatformRegistrationParams params;
  SP_Platform platform;
  SP_PlatformFns pfns;
  conf_registration_params(&params, &platform, &pfns);

  TF_Status* st = conf_st(e);
  e->init(&params, st);
  if (!EXPECT_OK(R_INIT_OK, st, "SE_InitPlugin")) return 0;
  /* The plugin writes into TF's structs; TF reads its own locals. */
  EXPECT(R_KEEPS_STRUCTS, params.platform == &platform,
         "params->platform was replaced by another pointer");
  EXPECT(R_KEEPS_STRUCTS, params.platform_fns == &pfns,
         "params->platform_fns was replaced by another pointer");
  EXPECT(R_VERSION,
         params.major_version == SE_MAJOR && params.minor_version == SE_MINOR,
         "version %d.%d; this harness's header (TF 2.21) has %d.%d",
         (int)params.major_version, (int)params.minor_version, SE_MAJOR,
         SE_MINOR);
  int ok = 1;

  /* TF: ValidateSEPlatformRegistrationParams. */
  ok &= EXPECT(R_STRUCT_SIZE, params.struct_size != 0,
               "SE_PlatformRegistrationParams.struct_size is 0");
  ok &= EXPECT(R_DESTROY_FNS, params.destroy_platform != NULL,
               "destroy_platform is NULL");
  ok &= EXPECT(R_DESTROY_FNS, params.destroy_platform_fns != NULL,
               "destroy_platform_fns is NULL");
  /* TF: ValidateSPPlatform. */
  ok &= EXPECT(R_STRUCT_SIZE, platform.struct_size != 0,
               "SP_Platform.struct_size is 0");
  ok &= EXPECT(R_NAME, conf_valid_device_type(platform.name),
               "platform name %s%s%s", platform.name ? "'" : "",
               platform.name ? platform.name : "NULL",
               platform.name ? "'" : "");
  ok &= EXPECT(R_TYPE, conf_valid_device_type(platform.type),
               "device type %s%s%s", platform.type ? "'" : "",
               platform.type ? platform.type : "NULL",
               platform.type ? "'" : "");
  /* TF: ValidateSPPlatformFns, plus what TF calls unconditionally. */
  ok &= EXPECT(R_STRUCT_SIZE, pfns.struct_size != 0,
               "SP_PlatformFns.struct_size is 0");
  ok &= platform_fns_ok(&pfns);
  /* Checked, but TF registers the plugin without it: not a reason to stop. */
  EXPECT(R_TIMER_FNS_SET, pfns.destroy_timer_fns != NULL,
         "SP_PlatformFns.destroy_timer_fns is NULL");
  if (!ok) {
    if (params.destroy_platform_fns != NULL) params.destroy_platform_fns(&pfns);
    if (params.destroy_platform != NULL) params.destroy_platform(&platform);
    return 0;
  }

  /* create_device_fns: TF pre-fills struct_size, plugin fills the rest. */
  SE_CreateDeviceFnsParams dfp = {.struct_size =
                                      SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE};
  SP_DeviceFns dfns = {.struct_size = SP_DEVICE_FNS_STRUCT_SIZE};
  dfp.device_fns = &dfns;
  pfns.create_device_fns(&platform, &dfp, conf_st(e));
  if (!EXPECT_OK(R_DEVICE_FNS, e->st, "create_device_fns")) {
    goto fail_platform;
  }
  EXPECT(R_KEEPS_STRUCTS, dfp.device_fns == &dfns,
         "params->device_fns was replaced by another pointer");
  /* TF: ValidateSPDeviceFns. */
  if (!EXPECT(R_DEVICE_FNS, dfns.struct_size != 0,
              "SP_DeviceFns.struct_size is 0")) {
    goto fail_dfns;
  }

  SE_CreateStreamExecutorParams sep = {
      .struct_size = SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE};
  SP_StreamExecutor se = {.struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE};
  sep.stream_executor = &se;
  pfns.create_stream_executor(&platform, &sep, conf_st(e));
  if (!EXPECT_OK(R_SE_CREATE, e->st, "create_stream_executor")) {
    goto fail_dfns;
  }
  EXPECT(R_KEEPS_STRUCTS, sep.stream_executor == &se,
         "params->stream_executor was replaced by another pointer");
  /* TF: ValidateSPStreamExecutor. */
  ok &= EXPECT(R_STRUCT_SIZE, se.struct_size != 0,
               "SP_StreamExecutor.struct_size is 0");
  ok &= stream_executor_ok(&se, platform.supports_unified_memory);
  /* TF registers the plugin without it; the copy tests then crash on it
   * (reported as their failure), as TF would. */
  EXPECT(R_DTOD_SET, se.memcpy_dtod != NULL,
         "SP_StreamExecutor.memcpy_dtod is NULL");
  if (!ok) {
    pfns.destroy_stream_executor(&platform, &se);
    goto fail_dfns;
  }

  /* CPlatform keeps copies; the plugin must not hold on to the originals. */
  e->params = params;
  e->params.platform = NULL; /* TF keeps only the two destroy functions */
  e->params.platform_fns = NULL;
  e->platform = platform;
  e->pfns = pfns;
  e->dfns = dfns;
  e->se = se;
  /* TF 2.21: `SP_TimerFns timer_fns{SP_TIMER_FNS_STRUCT_SIZE};` and no call
   * to create_timer_fns. */
  memset(&e->tfns, 0, sizeof(e->tfns));
  e->tfns.struct_size = SP_TIMER_FNS_STRUCT_SIZE;
  memset(&platform, CONF_POISON, sizeof(platform));
  memset(&pfns, CONF_POISON, sizeof(pfns));
  memset(&dfns, CONF_POISON, sizeof(dfns));
  memset(&se, CONF_POISON, sizeof(se));
  e->registered = e->have_dfns = e->have_se = 1;
  return 1;

fail_dfns:
  pfns.destroy_device_fns(&platform, &dfns);
fail_platform:
  /* TF would abort here; release what the plugin handed out anyway. */
  params.destroy_platform_fns(&pfns);
  params.destroy_platform(&platform);
  return 0;
}

int conf_setup(conf_env* e, int max_devices) {
  if (!register_platform(e)) return 0;

  /* CPlatform::VisibleDeviceCount: TF starts from 0, so a plugin that
   * leaves the count alone reports no device. */
  int count = 0;
  e->pfns.get_device_count(&e->platform, &count, conf_st(e));
  if (!EXPECT_OK(R_COUNT, e->st, "get_device_count") ||
      !EXPECT(R_COUNT, count >= 0, "get_device_count reported %d", count)) {
    count = 0; /* as TF takes it */
  }
  e->device_count = count;
  if (count == 0) {
    conf_note("get_device_count reported 0 devices: TF creates none; "
              "device checks are skipped");
  }

  /* The device factory creates an executor per visible device:
   * CPlatform::GetUncachedExecutor. */
  int n = count < max_devices ? count : max_devices;
  if (n < count) {
    conf_note("%d devices reported; the first %d are created", count, n);
  }
  if (n > 0 && e->dev == NULL) {
    e->dev = calloc((size_t)max_devices, sizeof(SP_Device));
    if (e->dev == NULL) abort();
  }
  for (int i = 0; i < n; i++) {
    SE_CreateDeviceParams dp = {.struct_size =
                                    SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
    SP_Device dev = {.struct_size = SP_DEVICE_STRUCT_SIZE};
    dp.device = &dev;
    dp.ext = NULL;
    dp.ordinal = i;
    e->pfns.create_device(&e->platform, &dp, conf_st(e));
    char what[64];
    snprintf(what, sizeof(what), "create_device(ordinal %d)", i);
    if (!EXPECT_OK(R_DEVICE, e->st, what)) return 1;
    EXPECT(R_KEEPS_STRUCTS, dp.device == &dev,
           "params->device was replaced by another pointer");
    /* TF: ValidateSPDevice. */
    if (!EXPECT(R_DEVICE, dev.struct_size != 0,
                "ordinal %d: SP_Device.struct_size is 0", i)) {
      e->pfns.destroy_device(&e->platform, &dev);
      return 1;
    }
    /* CStreamExecutor keeps the SP_Device by value. */
    e->dev[i] = dev;
    memset(&dev, CONF_POISON, sizeof(dev));
    e->ndev = i + 1;
  }
  return 1;
}

void conf_teardown(conf_env* e) {
  /* Executors first (~CStreamExecutor: destroy_device), then ~CPlatform's
   * body. In TF 2.21 the executor cache is a CPlatform member, destroyed
   * after the body ran; TF never destroys a registered platform in practice,
   * and the order here is the one TF used while ~CPlatform destroyed its
   * executors explicitly. */
  for (int i = 0; i < e->ndev; i++) {
    e->pfns.destroy_device(&e->platform, &e->dev[i]);
  }
  e->ndev = 0;
  if (!e->registered) return;
  e->pfns.destroy_device_fns(&e->platform, &e->dfns);
  e->pfns.destroy_stream_executor(&e->platform, &e->se);
  if (e->pfns.destroy_timer_fns != NULL) {
    e->pfns.destroy_timer_fns(&e->platform, &e->tfns);
  }
  e->params.destroy_platform(&e->platform);
  e->params.destroy_platform_fns(&e->pfns);
  e->registered = e->have_dfns = e->have_se = 0;
}
