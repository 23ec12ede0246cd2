/*
 * registration.c - loading, registering and tearing down a plugin as TF does.
 *
 * Mirrors TensorFlow 2.21's stream_executor.cc: InitStreamExecutorPlugin
 * (SE_InitPlugin, then ValidateSEPlatformRegistrationParams,
 * ValidateSPPlatform, ValidateSPPlatformFns, create_device_fns +
 * ValidateSPDeviceFns, create_stream_executor + ValidateSPStreamExecutor),
 * CPlatform's GetUncachedExecutor (create_device + ValidateSPDevice) and
 * ~CPlatform. TF's rules are marked "TF:"; rules TF does not validate but
 * relies on (a NULL there crashes TF later) are marked "TF calls it
 * unconditionally".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* Poison for structs TF copies and then drops (see conf_env). */
#define CONF_POISON 0xA5

int conf_load(conf_env* e, const char* path) {
  e->plugin_path = path;
  /* As tsl::internal::LoadDynamicLibrary. */
  e->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!CHECKF(e->dl != NULL, "dlopen(%s): %s", path, dlerror())) return 0;
  dlerror();
  void* sym = dlsym(e->dl, "SE_InitPlugin");
  if (!CHECKF(sym != NULL, "dlsym(SE_InitPlugin): %s", dlerror())) return 0;
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
  if (!CHECK_OK(st, "SE_InitPlugin")) return 0;
  /* The plugin writes into TF's structs; TF reads its own locals, so a
   * replaced pointer would be silently ignored. */
  CHECK(params.platform == &platform);
  CHECK(params.platform_fns == &pfns);
  /* Same header on both sides: the plugin must not report another API. */
  CHECK_EQ(params.major_version, SE_MAJOR);
  CHECK_EQ(params.minor_version, SE_MINOR);

  int ok = 1;
  /* TF: ValidateSEPlatformRegistrationParams. */
  ok &= CHECK(params.struct_size != 0);
  ok &= CHECK(params.destroy_platform != NULL);
  ok &= CHECK(params.destroy_platform_fns != NULL);
  /* TF: ValidateSPPlatform. */
  ok &= CHECK(platform.struct_size != 0);
  ok &= CHECK(platform.name != NULL);
  ok &= CHECK(platform.type != NULL);
  ok &= CHECKF(conf_valid_device_type(platform.name),
               "platform name '%s' must match [A-Z][A-Z_]*",
               platform.name ? platform.name : "(null)");
  ok &= CHECKF(conf_valid_device_type(platform.type),
               "device type '%s' must match [A-Z][A-Z_]*",
               platform.type ? platform.type : "(null)");
  /* TF: ValidateSPPlatformFns. */
  ok &= CHECK(pfns.struct_size != 0);
  ok &= CHECK(pfns.create_device != NULL);
  ok &= CHECK(pfns.destroy_device != NULL);
  ok &= CHECK(pfns.create_stream_executor != NULL);
  ok &= CHECK(pfns.destroy_stream_executor != NULL);
  ok &= CHECK(pfns.create_device_fns != NULL);
  ok &= CHECK(pfns.destroy_device_fns != NULL);
  /* TF calls it unconditionally (CPlatform::VisibleDeviceCount). */
  ok &= CHECK(pfns.get_device_count != NULL);
  /* TF calls it unconditionally (~CPlatform). */
  ok &= CHECK(pfns.destroy_timer_fns != NULL);
  if (!ok) return 0;

  /* create_device_fns: TF pre-fills struct_size, plugin fills the rest. */
  SE_CreateDeviceFnsParams dfp = {.struct_size =
                                      SE_CREATE_DEVICE_FNS_PARAMS_STRUCT_SIZE};
  SP_DeviceFns dfns = {.struct_size = SP_DEVICE_FNS_STRUCT_SIZE};
  dfp.device_fns = &dfns;
  pfns.create_device_fns(&platform, &dfp, conf_st(e));
  if (!CHECK_OK(e->st, "create_device_fns")) goto fail_platform;
  CHECK(dfp.device_fns == &dfns);
  /* TF: ValidateSPDeviceFns. */
  if (!CHECK(dfns.struct_size != 0)) goto fail_dfns;

  SE_CreateStreamExecutorParams sep = {
      .struct_size = SE_CREATE_STREAM_EXECUTOR_PARAMS_STRUCT_SIZE};
  SP_StreamExecutor se = {.struct_size = SP_STREAMEXECUTOR_STRUCT_SIZE};
  sep.stream_executor = &se;
  pfns.create_stream_executor(&platform, &sep, conf_st(e));
  if (!CHECK_OK(e->st, "create_stream_executor")) goto fail_dfns;
  CHECK(sep.stream_executor == &se);
  /* TF: ValidateSPStreamExecutor. */
  ok &= CHECK(se.struct_size != 0);
  ok &= CHECK(se.allocate != NULL);
  ok &= CHECK(se.deallocate != NULL);
  ok &= CHECK(se.get_allocator_stats != NULL);
  ok &= CHECK(se.host_memory_allocate != NULL);
  ok &= CHECK(se.host_memory_deallocate != NULL);
  if (platform.supports_unified_memory) {
    ok &= CHECK(se.unified_memory_allocate != NULL);
    ok &= CHECK(se.unified_memory_deallocate != NULL);
  }
  ok &= CHECK(se.device_memory_usage != NULL);
  ok &= CHECK(se.create_stream != NULL);
  ok &= CHECK(se.destroy_stream != NULL);
  ok &= CHECK(se.create_stream_dependency != NULL);
  ok &= CHECK(se.get_stream_status != NULL);
  ok &= CHECK(se.create_event != NULL);
  ok &= CHECK(se.destroy_event != NULL);
  ok &= CHECK(se.get_event_status != NULL);
  ok &= CHECK(se.record_event != NULL);
  ok &= CHECK(se.wait_for_event != NULL);
  ok &= CHECK(se.memcpy_dtoh != NULL);
  ok &= CHECK(se.memcpy_htod != NULL);
  ok &= CHECK(se.sync_memcpy_dtoh != NULL);
  ok &= CHECK(se.sync_memcpy_htod != NULL);
  ok &= CHECK(se.block_host_for_event != NULL);
  ok &= CHECK(se.synchronize_all_activity != NULL);
  ok &= CHECK(se.host_callback != NULL);
  ok &= CHECK(se.mem_zero != NULL);
  ok &= CHECK(se.memset != NULL);
  ok &= CHECK(se.memset32 != NULL);
  /* TF calls it unconditionally for device-to-device copies. */
  ok &= CHECK(se.memcpy_dtod != NULL);
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
  params.destroy_platform(&platform);
  params.destroy_platform_fns(&pfns);
  return 0;
}

int conf_setup(conf_env* e, int max_devices) {
  if (!register_platform(e)) return 0;

  /* CPlatform::VisibleDeviceCount. */
  int count = -1;
  e->pfns.get_device_count(&e->platform, &count, conf_st(e));
  if (!CHECK_OK(e->st, "get_device_count")) return 0;
  if (!CHECK_GE(count, 1)) return 0;
  CHECK_LE(count, CONF_MAX_DEVICES);
  e->device_count = count;

  /* The device factory creates an executor per visible device:
   * CPlatform::GetUncachedExecutor. */
  int n = count < max_devices ? count : max_devices;
  if (n > CONF_MAX_DEVICES) n = CONF_MAX_DEVICES;
  for (int i = 0; i < n; i++) {
    SE_CreateDeviceParams dp = {.struct_size =
                                    SE_CREATE_DEVICE_PARAMS_STRUCT_SIZE};
    SP_Device dev = {.struct_size = SP_DEVICE_STRUCT_SIZE};
    dp.device = &dev;
    dp.ext = NULL;
    dp.ordinal = i;
    e->pfns.create_device(&e->platform, &dp, conf_st(e));
    if (!CHECK_OK(e->st, "create_device")) return 0;
    CHECK(dp.device == &dev);
    /* TF: ValidateSPDevice. */
    if (!CHECK(dev.struct_size != 0)) {
      e->pfns.destroy_device(&e->platform, &dev);
      return 0;
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
  e->pfns.destroy_timer_fns(&e->platform, &e->tfns);
  e->params.destroy_platform(&e->platform);
  e->params.destroy_platform_fns(&e->pfns);
  e->registered = e->have_dfns = e->have_se = 0;
}
