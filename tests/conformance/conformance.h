/*
 * conformance.h - what the conformance checks share: the loaded plugin as TF
 * holds it (conf_env), TF-style calls (fresh status, pre-filled structs) and
 * host-callback probes that block, sleep or fail on a plugin's stream.
 *
 * Files
 *   simdev_conformance.c  main: options, the run, one process per test
 *   report.c              results: printed, collapsed, JSON (report.h)
 *   tf.c                  TensorFlow's libraries, loaded at run time
 *   registration.c        loading, registration (TF's validation), teardown
 *   imports.c             the TF functions a plugin imports, read from its
 *                         file before it is loaded (registration.imports)
 *   child.c               child processes: one per test, environment cases
 *   util.c                the helpers declared here
 *   generic.c             checks valid for any PluggableDevice plugin:
 *                         devices, memory, allocator stats
 *   generic_streams.c     ... streams, stream dependencies, events
 *   generic_work.c        ... copies, memset
 *   generic_callbacks.c   ... host callbacks, timers
 *   generic_order.c       ... synchronize_all, ordering, concurrent streams
 *   generic_faults.c      ... error paths: after a callback's error
 *                         (--faults), and the plugin's own failures
 *   generic.h             the rules and helpers those files share
 *   kernel_checks.c       what TF_InitKernel registered, read back from TF
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

/* Devices created beyond this are not (TF has no limit; a harness must). */
#define CONF_MAX_DEVICES 1024
#define CONF_MAX_LIST 16

/* The command line (simdev_conformance.c documents each option). */
typedef struct conf_options {
  const char* plugin;
  const char* tf_dir;
  const char* json;
  const char* filters[CONF_MAX_LIST];
  int nfilters;
  const char* excludes[CONF_MAX_LIST];
  int nexcludes;
  const char* preload[CONF_MAX_LIST];
  int npreload;
  int timeout_s;
  int require_devices;
  int simdev;
  int strict;
  int no_fork;
  const char* run_test;   /* internal: run one test in this process */
  const char* child_case; /* internal: run one environment case */
} conf_options;

typedef void (*conf_init_fn)(SE_PlatformRegistrationParams* params,
                             TF_Status* status);

/* The plugin as TF's CPlatform holds it. After registration TF copies every
 * struct the plugin filled (CPlatform keeps them by value, CStreamExecutor
 * keeps its SP_Device by value), so the addresses passed to callbacks are not
 * the ones the plugin saw while filling: the harness does the same and
 * poisons the originals. */
typedef struct conf_env {
  const conf_options* opt;
  const char* plugin_path;
  void* dl;
  conf_init_fn init;

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
  int device_count; /* get_device_count; -1 until it was called */
  int ndev;         /* devices created (ordinals 0..ndev-1) */
  SP_Device* dev;   /* ndev of them (calloc) */

  TF_Status* st; /* scratch status: see conf_st */
} conf_env;

/* ------------------------------------------------------------ lifecycle */

/* The --preload libraries, then dlopen (RTLD_NOW | RTLD_LOCAL) and
 * dlsym("SE_InitPlugin"). A failed dlopen says what to try (libpython,
 * --tf-dir, --lib-path). */
int conf_load(conf_env* e, const char* path);
/* SE_InitPlugin, TF's validation, create_device_fns, create_stream_executor,
 * get_device_count and create_device for every ordinal up to max_devices
 * (0 devices is not an error). Every rule is a check. Returns 1 if the
 * platform registered. */
int conf_setup(conf_env* e, int max_devices);
/* Fills the registration params exactly as TF does before SE_InitPlugin:
 * every struct_size pre-filled, versions set, platform and platform_fns
 * pointing at the caller's (zeroed, sized) structs. */
void conf_registration_params(SE_PlatformRegistrationParams* params,
                              SP_Platform* platform, SP_PlatformFns* pfns);
/* TF's ValidateDeviceType: 1 if s matches [A-Z][A-Z_]*. */
int conf_valid_device_type(const char* s);
/* registration.imports (imports.c), around conf_load's dlopen. The scan,
 * before: reads the plugin file's ELF64 headers and dynamic symbol table
 * and looks up every TF C API function it imports (conf_tf_exports).
 * Returns 0 when the file is not one dlopen could load (the rule failed:
 * do not dlopen it, glibc dies of SIGBUS on a truncated file), else 1 (a
 * file it cannot open is left to dlopen to explain). The verdict, after:
 * dl is dlopen's handle or NULL; returns 1 if the rule failed (missing
 * symbols explain dlopen's failure). Main thread only. */
int conf_imports_scan(const char* path);
int conf_imports_verdict(void* dl);
/* Destroys what conf_setup created, in CPlatform's order. */
void conf_teardown(conf_env* e);

/* ------------------------------------------------------------ TF

 * TensorFlow's libraries are loaded at run time (tf.c), not linked: the
 * harness starts without them (--help, --list), and --tf-dir picks the
 * release a plugin was built for. */

/* dlopen(DIR/libtensorflow_framework.so.2, RTLD_NOW | RTLD_GLOBAL), DIR from
 * tf_dir, else the library search path, else the TF the harness was built
 * with. 0 on success; else err says why and what to pass. */
int conf_tf_load(const char* tf_dir, char* err, size_t errlen);
/* The directory libtensorflow_framework.so.2 was loaded from. */
const char* conf_tf_dir(void);
/* A symbol of libtensorflow_cc.so.2 (loaded from conf_tf_dir() on first
 * use, RTLD_GLOBAL); NULL with err set if it is not there. */
void* conf_tf_cc_sym(const char* name, char* err, size_t errlen);

/* Whether a TF library exports `name`: those in the global scope
 * (libtensorflow_framework.so.2, --preload), then libtensorflow_cc.so.2 (or
 * TF <= 2.10's Python extension) from conf_tf_dir(), opened RTLD_LOCAL on
 * first need. 1 yes, 0 no, -1 cannot tell (err says why). */
int conf_tf_exports(const char* name, char* err, size_t errlen);

/* TF_Status through the loaded library. */
TF_Status* conf_status_new(void);
void conf_status_free(TF_Status* s);
void conf_status_set(TF_Status* s, TF_Code code, const char* msg);
TF_Code conf_status_code(const TF_Status* s);
const char* conf_status_msg(const TF_Status* s);

/* ------------------------------------------------------------ status */

/* Resets e->st to TF_OK and returns it: TF passes a fresh (OK) status to
 * every call, so a plugin may leave it untouched on success. */
TF_Status* conf_st(conf_env* e);
/* A check that a status is OK; observed: "<what> returned <code>: msg". */
int conf_check_ok(const conf_rule* rule, const TF_Status* s, const char* file,
                  int line, const char* what);
#define EXPECT_OK(rule, st, what) \
  conf_check_ok(&(rule), (st), __FILE__, __LINE__, (what))
#define ENSURE_OK(rule, st, what)        \
  do {                                   \
    if (!EXPECT_OK(rule, (st), (what))) { \
      goto out;                          \
    }                                    \
  } while (0)
/* The name of a TF_Code ("INTERNAL"). */
const char* conf_code_name(TF_Code code);

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
 * hang: half the per-test timeout (--timeout; 30 s by default), so that
 * only a hang, never a slow machine, trips it. */
int conf_safety_ms(void);
uint64_t conf_now_ns(void);
/* Deterministic byte pattern (seeded) for data checks. */
void conf_fill(void* buf, size_t n, unsigned seed);
/* Index of the first byte differing from value, or -1. */
long conf_find_not(const void* buf, size_t n, unsigned char value);

/* ------------------------------------------------------------ rules */

/* Rules the helpers above check and that many tests share (defined in
 * util.c). A test that fails one of these usually cannot go on. */
#define CONF_COMMON_RULES(X)                                                   \
  X(R_STREAM_CREATE, "stream.create", REQUIRED, "create_stream",               \
    "create_stream returns OK and a non-NULL SP_Stream: TF creates a compute " \
    "stream and host-to-device, device-to-host and device-to-device streams "  \
    "for every device (CStream::Create) and cannot create the device "         \
    "without them.")                                                           \
  X(R_STREAM_SYNC, "stream.sync", REQUIRED,                                    \
    "block_host_until_done / block_host_for_event",                            \
    "Waiting for a stream whose work succeeded returns OK once that work is "  \
    "done: TF's CStream::BlockHostUntilDone calls block_host_until_done, or "  \
    "create_event + record_event + block_host_for_event when it is NULL "      \
    "(PluggableDeviceUtil::Sync, ~CStream).")                                  \
  X(R_ALLOCATE, "allocate.returns_memory", REQUIRED, "allocate",               \
    "allocate returns a non-NULL opaque of at least the size asked while the " \
    "device has memory: TF's allocators (DeviceMemAllocator under BFC or the " \
    "simple allocator) take NULL as out of memory and fail the op with "       \
    "ResourceExhausted.")                                                      \
  X(R_EVENT_CREATE, "event.create", REQUIRED, "create_event",                  \
    "create_event returns OK and a non-NULL SP_Event: TF's EventMgr records "  \
    "an event after every copy to know when its tensors may be freed.")        \
  X(R_EVENT_RECORD, "event.record", REQUIRED, "record_event / wait_for_event", \
    "record_event and wait_for_event on a healthy stream return OK: TF's "     \
    "EventMgr ignores record_event's status (IgnoreError) and then polls the " \
    "event, so a record that failed leaves TF waiting for it.")                \
  X(R_COPY_OK, "memcpy.returns_ok", REQUIRED, "memcpy_* / sync_memcpy_*",      \
    "A copy between valid buffers returns OK: CStream::Memcpy logs the error " \
    "and the op that needed the copy fails with it.")                          \
  X(R_MEMSET_OK, "memset.returns_ok", REQUIRED, "mem_zero / memset32",         \
    "mem_zero and memset32 on a valid buffer return OK: TF's "                 \
    "CStream::MemZero and CStream::Memset32 forward to them and return the "   \
    "error to whoever initializes device memory that way.")                    \
  X(R_HOST_CB_TRUE, "host_callback.returns_true", REQUIRED, "host_callback",   \
    "host_callback returns true (the callback was enqueued): TF's "            \
    "CStream::DoHostCallbackWithStatus turns false into Internal \"Failed "    \
    "to host callback.\" (and leaks its context), failing whatever asked "     \
    "for the callback. TF 2.21's own PluggableDevice runtime completes work "  \
    "through events and makes no such call; users of TF's Stream interface "   \
    "do.")                                                                     \
  X(R_STREAM_STATUS_OK, "stream_status.ok", REQUIRED, "get_stream_status",     \
    "get_stream_status is OK for a stream on which nothing failed: TF's "      \
    "CStream::RefreshStatus latches an error for good (Stream::ok() is then "  \
    "false and PluggableDeviceUtil's copies and SyncAll fail). No caller of "  \
    "RefreshStatus was found in TF 2.21's PluggableDevice runtime.")
CONF_RULES_DECLARE(CONF_COMMON_RULES)

/* ------------------------------------------------------------ tests */

/* The test and rule tables of each file. */
extern const harness_test conf_generic_tests[];         /* generic.c */
extern const harness_test conf_generic_streams_tests[]; /* generic_streams.c */
extern const harness_test conf_generic_work_tests[];    /* generic_work.c */
extern const harness_test
    conf_generic_callbacks_tests[];                   /* generic_callbacks.c */
extern const harness_test conf_generic_order_tests[]; /* generic_order.c */
extern const harness_test conf_generic_faults_tests[]; /* generic_faults.c */
extern const harness_test conf_simdev_tests[];        /* simdev_checks.c */
extern const conf_rule* const conf_common_rules[];    /* util.c */
extern const conf_rule* const conf_registration_rules[];
extern const conf_rule* const conf_imports_rules[];
extern const conf_rule* const conf_runner_rules[]; /* simdev_conformance.c */
extern const conf_rule* const conf_generic_rules[];
extern const conf_rule* const conf_generic_streams_rules[];
extern const conf_rule* const conf_generic_work_rules[];
extern const conf_rule* const conf_generic_callbacks_rules[];
extern const conf_rule* const conf_generic_order_rules[];
extern const conf_rule* const conf_generic_faults_rules[];
/* --faults SPEC: 1 if the harness can inject it, else 0 and why (its own
 * host callbacks' errors only: generic_faults.c). */
int conf_faults_option_ok(const char* spec, char* msg, size_t len);

/* What faults.plugin_errors's sequence saw of the plugin's own failures. */
typedef struct conf_faults_seen {
  int alloc_failed;     /* allocate calls that returned NULL */
  int record_failed;    /* record_event calls that returned an error */
  int enqueue_failed;   /* memcpy_htod / memcpy_dtoh calls that did */
  int lost;             /* buffers whose bytes did not come back */
  char record_msg[256]; /* the first failed record_event's message */
  /* Stream 0 copies in and records events, stream 1 copies out:
   * block_host_until_done's code, then get_stream_status's and its
   * message. */
  TF_Code sync[2], status[2];
  char msg[2][256];
} conf_faults_seen;
/* Runs faults.plugin_errors's sequence on device 0 (generic_faults.c):
 * every failure the plugin shows is held to TF's contracts (the rules of
 * generic_faults.c) and counted in *seen. Main thread only. */
void conf_faults_sequence(conf_env* e, conf_faults_seen* seen);
extern const conf_rule* const conf_simdev_rules[];

/* Sets the per-test timeout conf_safety_ms derives its waits from. */
void conf_set_timeout_s(int seconds);

/* Child cases (simdev_checks.c): run in a fresh process with their own
 * environment, since a plugin is initialized once per process. */
typedef struct conf_child_case {
  const char* name;
  const char* env[4]; /* "NAME=value" entries added to the environment */
  int (*fn)(conf_env* env);
} conf_child_case;
extern const conf_child_case conf_child_cases[];

/* Runs child case `name` in a fresh process (re-executing this program);
 * its results join this test's. */
void conf_run_child(conf_env* e, const char* name);

/* The file descriptor a child writes its result records to (child.c). */
#define CONF_RECORD_FD 3

/* Starts this program again with `args` (after argv[0]) and environment
 * envp (NULL: this one) in a process group of its own: its stdout and
 * stderr on one pipe (*out_fd), its records (CONF_RECORD_FD) on another
 * (*rec_fd). Returns the pid, or -1 with errno set. */
int conf_spawn_self(char* const* args, char* const* envp, int* out_fd,
                    int* rec_fd);
/* Spawns `--run-test test` with this process's TF, preloads and options. */
int conf_spawn_test(const conf_env* e, const char* test, int* out_fd,
                    int* rec_fd);
/* Reads a spawned child's output and records until it exits or timeout_s
 * passes (then kills its process group): records go to the report, output
 * lines are printed with `prefix`. Returns the wait status, or -1 after a
 * timeout. */
int conf_collect_child(int pid, int out_fd, int rec_fd, int timeout_s,
                       const char* prefix);

#endif /* SIMDEV_TESTS_CONFORMANCE_CONFORMANCE_H_ */
