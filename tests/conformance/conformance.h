/*
 * conformance.h - what the conformance checks share: the loaded plugin as TF
 * holds it (conf_env), TF-style calls (fresh status, pre-filled structs) and
 * host-callback probes that block, sleep or fail on a plugin's stream.
 *
 * Files
 *   simdev_conformance.c  main: loading, registration (TF's validation),
 *                         teardown, child processes, the test runner
 *   util.c                the helpers declared here
 *   registration.c        loading, TF's registration and validation, teardown
 *   child.c               child processes for environment-dependent cases
 *   generic.c             checks valid for any PluggableDevice plugin
 *   generic_work.c        ... for work on streams (copies, callbacks, timers)
 *   simdev_checks.c       checks that know simdev (--simdev)
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_CONFORMANCE_H_
#define SIMDEV_TESTS_CONFORMANCE_CONFORMANCE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"
#include "tensorflow/c/tf_status.h"

#define CONF_MAX_DEVICES 16

typedef void (*conf_init_fn)(SE_PlatformRegistrationParams* params,
                             TF_Status* status);

/* The plugin as TF's CPlatform holds it. After registration TF copies every
 * struct the plugin filled (CPlatform keeps them by value, CStreamExecutor
 * keeps its SP_Device by value), so the addresses passed to callbacks are not
 * the ones the plugin saw while filling: the harness does the same and
 * poisons the originals. */
typedef struct conf_env {
  const char* plugin_path;
  void* dl;
  conf_init_fn init;
  int simdev; /* --simdev: run simdev_checks.c too */

  SE_PlatformRegistrationParams params;
  SP_Platform platform;
  SP_PlatformFns pfns;
  SP_DeviceFns dfns;
  SP_StreamExecutor se;
  /* TF 2.21 never calls create_timer_fns: this stays as TF initialized it
   * ({SP_TIMER_FNS_STRUCT_SIZE}) and is what destroy_timer_fns receives. */
  SP_TimerFns tfns;

  int registered;   /* SE_InitPlugin + validation passed */
  int have_dfns;    /* create_device_fns succeeded */
  int have_se;      /* create_stream_executor succeeded */
  int device_count; /* get_device_count */
  int ndev;         /* devices created (ordinals 0..ndev-1) */
  SP_Device dev[CONF_MAX_DEVICES];

  TF_Status* st; /* scratch status: see conf_st */
} conf_env;

/* ------------------------------------------------------------ lifecycle */

/* dlopen (RTLD_NOW | RTLD_LOCAL) and dlsym("SE_InitPlugin"). */
int conf_load(conf_env* e, const char* path);
/* SE_InitPlugin, TF's validation, create_device_fns, create_stream_executor,
 * get_device_count and create_device for every ordinal up to max_devices.
 * Every rule is a CHECK. Returns 1 if the plugin is usable. */
int conf_setup(conf_env* e, int max_devices);
/* Fills the registration params exactly as TF does before SE_InitPlugin:
 * every struct_size pre-filled, versions set, platform and platform_fns
 * pointing at the caller's (zeroed, sized) structs. */
void conf_registration_params(SE_PlatformRegistrationParams* params,
                              SP_Platform* platform, SP_PlatformFns* pfns);
/* TF's ValidateDeviceType: 1 if s matches [A-Z][A-Z_]*. */
int conf_valid_device_type(const char* s);
/* Destroys what conf_setup created, in CPlatform's order. */
void conf_teardown(conf_env* e);

/* ------------------------------------------------------------ status */

/* Resets e->st to TF_OK and returns it: TF passes a fresh (OK) status to
 * every call, so a plugin may leave it untouched on success. */
TF_Status* conf_st(conf_env* e);
int conf_status_ok(const TF_Status* s, const char* file, int line,
                   const char* what);
/* CHECK that a status is OK; prints its code and message otherwise. */
#define CHECK_OK(st, what) conf_status_ok((st), __FILE__, __LINE__, (what))
#define REQUIRE_OK(st, what)       \
  do {                             \
    if (!CHECK_OK((st), (what))) { \
      goto out;                    \
    }                              \
  } while (0)

/* ------------------------------------------------------------ memory */

/* allocate() as CStreamExecutor::Allocate calls it: struct pre-filled with
 * SP_DEVICE_MEMORY_BASE_STRUCT_SIZE, memory_space 0. */
SP_DeviceMemoryBase conf_alloc(conf_env* e, int d, uint64_t size);
/* deallocate() of a copy made as DeviceMemoryBaseToC does it. Zeroes *m. */
void conf_free(conf_env* e, int d, SP_DeviceMemoryBase* m);
/* A sub-buffer as TF forms them: opaque advanced by `offset` bytes. */
SP_DeviceMemoryBase conf_slice(const SP_DeviceMemoryBase* m, uint64_t offset,
                               uint64_t size);

/* ------------------------------------------------------------ streams */

/* create_stream; NULL (after a failed CHECK) on error. */
SP_Stream conf_stream_new(conf_env* e, int d);
/* As ~CStream: block until done, then destroy_stream. NULL is a no-op. */
void conf_stream_free(conf_env* e, int d, SP_Stream s);
/* Stream::BlockHostUntilDone: block_host_until_done when set, else TF's
 * fallback (create_event, record_event, block_host_for_event,
 * destroy_event). Returns the status code. */
TF_Code conf_sync(conf_env* e, int d, SP_Stream s);
/* The fallback path only, regardless of block_host_until_done. */
TF_Code conf_sync_by_event(conf_env* e, int d, SP_Stream s);

/* ------------------------------------------------------------ probes */

/* A host callback that can wait for a gate, sleep, and return an error.
 * All probes of a test share one mutex (conf_probes_reset). */
typedef struct conf_probe {
  int gate;        /* wait until conf_gate_open(gate); -1 = don't */
  int sleep_ms;    /* then sleep this long */
  TF_Code code;    /* then set this code ... */
  const char* msg; /* ... with this message (TF_OK: "") */
  /* Results, written by the callback under the shared mutex. */
  int entered; /* the callback started (it may still be at its gate) */
  int ran;     /* times it completed */
  int order;   /* completion sequence number (1, 2, ...) */
  int status_nonnull;
  TF_Code code_at_entry; /* TF_GetCode of the status it was given */
} conf_probe;

#define CONF_GATES 8

/* Closes every gate, resets the sequence counter. */
void conf_probes_reset(void);
void conf_gate_open(int gate);
/* Opens every gate (cleanup: nothing may stay blocked). */
void conf_gates_open_all(void);
/* Opens `gate` from a helper thread after `ms` milliseconds (the thread ends
 * early if the gate is opened before; it polls, see util.c). Join it with
 * conf_join_later. Used as a safety net where a broken plugin would
 * otherwise block the main thread forever, and to release work while the
 * main thread is blocked in a synchronizing call: then the check must hold
 * whether or not the main thread got there before the gate opened (it is
 * only weaker if not), never depend on it. */
pthread_t conf_gate_open_later(int gate, int ms);
void conf_join_later(pthread_t t);
/* Initializes p; returns host_callback's TF_Bool. */
int conf_enqueue_probe(conf_env* e, int d, SP_Stream s, conf_probe* p, int gate,
                       int sleep_ms, TF_Code code, const char* msg);
/* Snapshot of a probe's result fields, read under the shared mutex. */
conf_probe conf_probe_get(const conf_probe* p);
/* Waits until p->entered (up to timeout_ms; a hang detector, so callers
 * pass conf_safety_ms()). Returns 1 if it entered. */
int conf_probe_wait_entered(const conf_probe* p, int timeout_ms);
/* Marks p as entered and ran (under the shared mutex), for callbacks that
 * are not probes but want to be waited for like one. */
void conf_probe_mark_ran(conf_probe* p);
/* Waits until p->ran (up to timeout_ms). Returns 1 if it ran. */
int conf_probe_wait_ran(const conf_probe* p, int timeout_ms);

/* ------------------------------------------------------------ misc */

void conf_sleep_ms(int ms);
/* How long a safety net waits before opening a gate the main thread would
 * otherwise wait for forever (an enqueue that blocks), and how long a wait
 * for work a correct plugin runs at once may take before it counts as a
 * hang: half the watchdog (CONF_TIMEOUT / 2, 30 s by default), so that
 * only a hang, never a slow machine, trips it. */
int conf_safety_ms(void);
uint64_t conf_now_ns(void);
/* Deterministic byte pattern (seeded) for data checks. */
void conf_fill(void* buf, size_t n, unsigned seed);
/* Index of the first byte differing from value, or -1. */
long conf_find_not(const void* buf, size_t n, unsigned char value);

/* ------------------------------------------------------------ tests */

extern const harness_test conf_generic_tests[];      /* generic.c */
extern const harness_test conf_generic_work_tests[]; /* generic_work.c */
extern const harness_test conf_simdev_tests[];

/* Child cases (simdev_checks.c): run in a fresh process with their own
 * environment, since a plugin is initialized once per process. */
typedef struct conf_child_case {
  const char* name;
  const char* env[4]; /* "NAME=value" entries added to the environment */
  int (*fn)(conf_env* env);
} conf_child_case;
extern const conf_child_case conf_child_cases[];

/* Runs child case `name` in a fresh process (re-executing this program) and
 * merges its result into this process's counts. */
void conf_run_child(conf_env* e, const char* name);

#endif /* SIMDEV_TESTS_CONFORMANCE_CONFORMANCE_H_ */
