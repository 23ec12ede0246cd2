/*
 * test_discrete.c - SIM_DEVICE_DISCRETE: the alias, copies and memsets
 * through it, and the report a host access to device memory gets (death
 * tests: a forked child makes the access and the parent reads its stderr).
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/memcheck.h>

#include "testutil.h"

static sim_device* discrete_device(int ordinal) {
  sim_device* dev = NULL;
  assert_int_equal(
      sim_device_create_ex(ordinal, TU_MEMORY_MB, SIM_DEVICE_DISCRETE, &dev),
      SIM_OK);
  return dev;
}

static void flags_and_alias(void** state) {
  (void)state;
  sim_device* plain = NULL;
  assert_int_equal(sim_device_create_ex(0, TU_MEMORY_MB, 0, &plain), SIM_OK);
  assert_int_equal(sim_device_discrete(plain), 0);
  sim_device* bad = NULL;
  assert_int_equal(sim_device_create_ex(0, TU_MEMORY_MB, 1u << 7, &bad),
                   SIM_EINVAL);
  assert_null(bad);
  sim_device* dev = discrete_device(1);
  assert_int_equal(sim_device_discrete(dev), 1);

  /* A plain device's memory, host memory and NULL are their own alias. */
  char* q = sim_mem_alloc(plain, 100);
  assert_non_null(q);
  assert_ptr_equal(sim_mem_alias(q), q);
  int local = 0;
  assert_ptr_equal(sim_mem_alias(&local), &local);
  assert_null(sim_mem_alias(NULL));

  /* A discrete device's: another address, at one fixed offset, whose bytes
   * the host can use; the region's bounds are exact. */
  char* p = sim_mem_alloc(dev, 4096);
  char* r = sim_mem_alloc(dev, 64);
  assert_non_null(p);
  assert_non_null(r);
  char* pa = sim_mem_alias(p);
  assert_ptr_not_equal(pa, p);
  assert_ptr_equal(sim_mem_alias(p + 4095), pa + 4095);
  assert_ptr_equal((char*)sim_mem_alias(r) - r, pa - p);
  assert_true(sim_mem_contains(dev, p, 4096)); /* TF's address */
  assert_false(sim_mem_contains(dev, pa, 1));  /* the alias is not */
  memset(pa, 0x5a, 4096);
  assert_int_equal(((unsigned char*)sim_mem_alias(p))[100], 0x5a);
  assert_ptr_equal(sim_mem_alias(pa), pa); /* the alias is host memory */
  sim_mem_free(dev, r);
  sim_mem_free(dev, p);
  sim_mem_free(plain, q);
  sim_device_destroy(dev);
  sim_device_destroy(plain);
  /* Destroyed: its addresses are nobody's any more. */
  assert_ptr_equal(sim_mem_alias(p), p);
}

/* Copies and memsets translate at enqueue; the bytes land in the region. */
static void copies(void** state) {
  (void)state;
  sim_device* dev = discrete_device(0);
  sim_stream* s = NULL;
  assert_int_equal(sim_stream_create(dev, &s), SIM_OK);
  enum { N = 1 << 17 }; /* larger than the inline copy limit */
  unsigned char* a = sim_mem_alloc(dev, N);
  unsigned char* b = sim_mem_alloc(dev, N);
  unsigned char* h = malloc(N);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(h);
  for (int i = 0; i < N; i++) h[i] = (unsigned char)(i * 13);
  assert_int_equal(sim_memcpy_async_kind(s, a, h, N, SIM_TRACE_MEMCPY_H2D),
                   SIM_OK);
  assert_int_equal(sim_memcpy_async(s, b, a, N), SIM_OK);      /* d2d */
  assert_int_equal(sim_memset8_async(s, a, 0x11, 64), SIM_OK); /* inline */
  assert_int_equal(sim_memset32_async(s, a + 64, 0xa1b2c3d4u, 128), SIM_OK);
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  const unsigned char* av = sim_mem_alias(a);
  const unsigned char* bv = sim_mem_alias(b);
  for (int i = 0; i < N; i++)
    if (bv[i] != (unsigned char)(i * 13)) fail_msg("b[%d] = %d", i, bv[i]);
  for (int i = 0; i < 64; i++) assert_int_equal(av[i], 0x11);
  uint32_t w;
  memcpy(&w, av + 64 + 124, 4);
  assert_int_equal(w, 0xa1b2c3d4u);
  assert_int_equal(av[64 + 128], (unsigned char)((64 + 128) * 13));
  memset(h, 0, N);
  assert_int_equal(sim_memcpy_async(s, h, b, N), SIM_OK); /* d2h */
  assert_int_equal(sim_stream_synchronize(s), SIM_OK);
  assert_int_equal(h[N - 1], (unsigned char)((N - 1) * 13));
  free(h);
  sim_mem_free(dev, b);
  sim_mem_free(dev, a);
  sim_stream_destroy(s);
  sim_device_destroy(dev);
}

/* The table holds 64 discrete devices at once; the 65th is refused with a
 * message, and a slot freed by a destroy is used again, with the new
 * device's alias. 1 MiB devices: the limit is on devices, not bytes. */
static void region_limit_and_reuse(void** state) {
  (void)state;
  enum { MAX = 64 };
  static sim_device* devs[MAX];
  for (int i = 0; i < MAX; i++)
    assert_int_equal(sim_device_create_ex(i, 1, SIM_DEVICE_DISCRETE, &devs[i]),
                     SIM_OK);
  sim_device* extra = NULL;
  assert_int_equal(sim_device_create_ex(MAX, 1, SIM_DEVICE_DISCRETE, &extra),
                   SIM_ENOMEM);
  assert_null(extra);
  assert_non_null(strstr(sim_device_create_error(),
                         "at most 64 discrete devices can exist at once"));
  /* Plain devices are not in the table. */
  assert_int_equal(sim_device_create_ex(MAX, 1, 0, &extra), SIM_OK);
  sim_device_destroy(extra);
  sim_device_destroy(devs[10]);
  assert_int_equal(sim_device_create_ex(10, 1, SIM_DEVICE_DISCRETE, &devs[10]),
                   SIM_OK);
  assert_string_equal(sim_device_create_error(), "");
  unsigned char* p = sim_mem_alloc(devs[10], 128);
  assert_non_null(p);
  unsigned char* pa = sim_mem_alias(p);
  assert_ptr_not_equal(pa, p);
  memset(pa, 0x77, 128);
  assert_int_equal(((unsigned char*)sim_mem_alias(p + 127))[0], 0x77);
  sim_mem_free(devs[10], p);
  for (int i = 0; i < MAX; i++) sim_device_destroy(devs[i]);
}

/* fork(): the child gets neither view (MADV_DONTFORK) and forgets the
 * regions (pthread_atfork), so it cannot share the parent's device memory;
 * the parent's device is untouched. */
static void fork_child_has_no_device_memory(void** state) {
  (void)state;
  sim_device* dev = discrete_device(0);
  unsigned char* p = sim_mem_alloc(dev, 4096);
  assert_non_null(p);
  unsigned char* pa = sim_mem_alias(p);
  memset(pa, 0x3c, 4096);
  /* The child's verdict comes through a pipe: under valgrind, which
   * follows fork, its exit status is valgrind's (--error-exitcode counts
   * what helgrind says of jemalloc's own fork handlers). */
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    int code = sim_mem_alias(p) == p ? 0 : 10; /* forgotten */
    FILE* f = fopen("/proc/self/maps", "r");
    char line[512];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
      if (strstr(line, "memfd:simdev-0") != NULL) code |= 20; /* mapped */
    if (f == NULL)
      code = 30;
    else
      fclose(f);
    /* The records lock is usable (not inherited locked). */
    unsigned char* q = sim_mem_alloc(dev, 64);
    if (q == NULL) code |= 40;
    /* Cleaned up, so memcheck's leak check of the child (it follows
     * fork) finds nothing; nothing here touches the unmapped views. */
    sim_mem_free(dev, q);
    sim_mem_free(dev, p);
    sim_device_destroy(dev);
    (void)!write(fds[1], &code, sizeof(code));
    _exit(0);
  }
  close(fds[1]);
  int code = -1;
  ssize_t got = read(fds[0], &code, sizeof(code));
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(got, (ssize_t)sizeof(code));
  assert_int_equal(code, 0);
  assert_ptr_equal(sim_mem_alias(p), pa);
  assert_int_equal(pa[4095], 0x3c);
  sim_mem_free(dev, p);
  sim_device_destroy(dev);
}

/* Under memcheck (unit.discrete.memcheck) valgrind's view is the alias,
 * where the accesses happen: addressable while allocated, not before or
 * after, so overruns in kernels are still reported. */
static void valgrind_sees_alias(void** state) {
  (void)state;
  static uint8_t probe[8];
  VALGRIND_DISABLE_ERROR_REPORTING;
  VALGRIND_MAKE_MEM_NOACCESS(probe, sizeof(probe));
  int memcheck = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(probe, 1) != 0;
  VALGRIND_MAKE_MEM_DEFINED(probe, sizeof(probe));
  VALGRIND_ENABLE_ERROR_REPORTING;
  if (!memcheck) skip();
  sim_device* dev = discrete_device(0);
  uint8_t* p = sim_mem_alloc(dev, 256);
  assert_non_null(p);
  uint8_t* b = sim_mem_alias(p);
  VALGRIND_DISABLE_ERROR_REPORTING;
  uintptr_t live = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(b, 256);
  uintptr_t past = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(b + 256, 1);
  sim_mem_free(dev, p);
  uintptr_t freed = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(b, 1);
  VALGRIND_ENABLE_ERROR_REPORTING;
  assert_int_equal(live, 0);
  assert_int_equal(past, (uintptr_t)(b + 256));
  assert_int_equal(freed, (uintptr_t)b);
  sim_device_destroy(dev);
}

/* ---- death tests ----------------------------------------------------------
 * The child is this executable again (`test_discrete --child NAME`), with
 * stderr into a pipe: a fresh process, where simdev installs its handler
 * when the first discrete device is created (once per process; cmocka
 * swaps SIGSEGV handlers around every test, so a forked copy of this
 * process would not have it). The parent collects the output and how the
 * child ended. Under valgrind the child runs natively (no
 * --trace-children). */

typedef struct child_out {
  char text[16384];
  int status;
} child_out;

static const char* g_argv0;

/* env: "NAME=value" put in the child's environment before exec, or NULL.
 * Returns the child's output and status, in one buffer that the next call
 * overwrites (the tests run one at a time). */
static const child_out* run_child_env(const char* name, const char* env) {
  static child_out out;
  memset(&out, 0, sizeof(out));
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    if (env != NULL) putenv((char*)env);
    execl(g_argv0, g_argv0, "--child", name, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], out.text + n, sizeof(out.text) - 1 - n)) > 0)
    n += (size_t)r;
  out.text[n] = '\0';
  close(fds[0]);
  assert_int_equal(waitpid(pid, &out.status, 0), pid);
  return &out;
}

static const child_out* run_child(const char* name) {
  return run_child_env(name, NULL);
}

/* In a child: a new discrete device, or exit status 3. */
static sim_device* child_device(int ordinal) {
  sim_device* dev = NULL;
  if (sim_device_create_ex(ordinal, TU_MEMORY_MB, SIM_DEVICE_DISCRETE, &dev) !=
      0)
    _exit(3);
  return dev;
}

/* The child died of the access: SIGSEGV by default; under ASan, whose own
 * SEGV handler was there first, its error exit. Never a clean exit. */
static void assert_died(const child_out* o) {
  if (WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0)
    fail_msg("the child survived a host access:\n%s", o->text);
  if (WIFSIGNALED(o->status)) assert_int_equal(WTERMSIG(o->status), SIGSEGV);
}

static void assert_has(const child_out* o, const char* what) {
  if (strstr(o->text, what) == NULL)
    fail_msg("report lacks \"%s\":\n%s", what, o->text);
}

static volatile unsigned char g_sink;

/* Not static: the executable exports it (ENABLE_EXPORTS), so the
 * report's backtrace can name it. */
__attribute__((visibility("default"))) void body_live_read(void);
void body_live_read(void) {
  sim_device* dev = child_device(2);
  sim_mem_set_site("MatMul", "dense_1/MatMul");
  /* Enough records to grow the table, some freed (backward-shift deletes). */
  enum { K = 3000 };
  static unsigned char* blocks[K];
  for (int i = 0; i < K; i++) blocks[i] = sim_mem_alloc(dev, 64 + i % 7);
  for (int i = 0; i < K; i += 2) sim_mem_free(dev, blocks[i]);
  sim_mem_set_site(NULL, NULL);
  pthread_setname_np(pthread_self(), "tu-reader");
  g_sink = blocks[2501][17]; /* the host read */
  _exit(0);
}

static void report_live(void** state) {
  (void)state;
  const child_out* o = run_child("live_read");
  assert_died(o);
  assert_has(o, "simdev: host access to device memory at 0x");
  assert_has(o, "(SIGSEGV)");
  assert_has(o, "device: simdev-2 is discrete");
  assert_has(o, "bytes, offset 17, allocated ");
  assert_has(o, " ms ago by op MatMul (node \"dense_1/MatMul\") on tid ");
  assert_has(o, "thread: \"tu-reader\" tid ");
  assert_has(o, "backtrace");
  /* The frame that made the access (valgrind's signal frames may stop
   * glibc's unwinder before it). */
  if (!RUNNING_ON_VALGRIND) assert_has(o, "body_live_read");
  assert_has(o, "hint: run under gdb");
}

static void body_freed_read(void) {
  sim_device* dev = child_device(0);
  sim_mem_set_site("Conv2D", "conv/Conv2D");
  unsigned char* p = sim_mem_alloc(dev, 1 << 20);
  sim_mem_set_site(NULL, NULL);
  sim_mem_free(dev, p);
  g_sink = p[4096];
  _exit(0);
}

static void report_freed(void** state) {
  (void)state;
  const child_out* o = run_child("freed_read");
  assert_died(o);
  assert_has(o, "not in a live allocation (freed ");
  assert_has(o, "bytes, offset 4096, allocated ");
  assert_has(o, "by op Conv2D (node \"conv/Conv2D\")");
}

static void body_never_allocated(void) {
  sim_device* dev = child_device(0);
  unsigned char* p = sim_mem_alloc(dev, 64);
  /* Far beyond anything jemalloc handed out, inside the region. */
  ((volatile unsigned char*)p)[(TU_MEMORY_MB << 20) / 2] = 1; /* a write */
  _exit(0);
}

static void report_never_allocated(void** state) {
  (void)state;
  const child_out* o = run_child("never_allocated");
  assert_died(o);
  assert_has(o, "not in a live allocation (never allocated");
}

/* A fault outside every discrete region goes to the handler that was there
 * before, untouched, and simdev says nothing. */
static void prior_handler(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  static const char msg[] = "prior handler ran\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  _exit(sig == SIGSEGV && si->si_code > 0 ? 42 : 41);
}

static void install_prior(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = prior_handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
}

static void body_foreign_fault(void) {
  install_prior();
  (void)child_device(0);
  unsigned char* guard =
      mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (guard == MAP_FAILED) _exit(4);
  /* memcheck reports the access too, and would turn exit 42 into its
   * --error-exitcode. */
  VALGRIND_DISABLE_ERROR_REPORTING;
  g_sink = guard[1];
  _exit(0);
}

static void foreign_fault_chained(void** state) {
  (void)state;
  const child_out* o = run_child("foreign_fault");
  assert_true(WIFEXITED(o->status));
  assert_int_equal(WEXITSTATUS(o->status), 42);
  assert_has(o, "prior handler ran");
  if (strstr(o->text, "simdev:") != NULL)
    fail_msg("simdev spoke:\n%s", o->text);
}

/* After its report, simdev hands the access to the previous handler (here
 * the test's; in Python, faulthandler): the access runs again and meets it. */
static void body_ours_then_prior(void) {
  install_prior();
  sim_device* dev = child_device(0);
  unsigned char* p = sim_mem_alloc(dev, 64);
  VALGRIND_DISABLE_ERROR_REPORTING; /* as above */
  g_sink = p[0];
  _exit(0);
}

static void report_then_prior(void** state) {
  (void)state;
  const child_out* o = run_child("ours_then_prior");
  assert_true(WIFEXITED(o->status));
  assert_int_equal(WEXITSTATUS(o->status), 42);
  assert_has(o, "simdev: host access to device memory");
  assert_has(o,
             "simdev: passing the signal on to the previous handler\n"
             "prior handler ran");
}

/* A prior handler without SA_SIGINFO, whose sa_mask holds SIGUSR1: chained
 * to as the kernel would call it, with that mask applied. */
static void plain_prior(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, NULL, &now);
  static const char msg[] = "plain prior ran\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  _exit(sig == SIGSEGV && sigismember(&now, SIGUSR1) == 1 ? 43 : 44);
}

/* The child's last act: a read of a PROT_NONE page of its own, outside
 * every device (a fault simdev must hand to the prior handler). */
static void read_foreign_page(void) {
  unsigned char* g =
      mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g == MAP_FAILED) _exit(4);
  VALGRIND_DISABLE_ERROR_REPORTING;
  g_sink = g[1];
  _exit(0);
}

static void body_plain_prior(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = plain_prior;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGUSR1);
  sigaction(SIGSEGV, &sa, NULL);
  (void)child_device(0);
  read_foreign_page();
}

static void plain_prior_chained(void** state) {
  (void)state;
  const child_out* o = run_child("plain_prior");
  assert_true(WIFEXITED(o->status));
  assert_int_equal(WEXITSTATUS(o->status), 43); /* 44: sa_mask not applied */
  assert_has(o, "plain prior ran");
}

/* SA_RESETHAND: the prior handler runs once, the disposition is then the
 * default, and the access that faults again kills the process. */
static int g_resethand_calls;
static void resethand_prior(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)si, (void)uc;
  if (++g_resethand_calls > 1) _exit(45); /* SA_RESETHAND ignored */
  static const char msg[] = "resethand prior ran\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
}

static void body_resethand_prior(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = resethand_prior;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigaction(SIGSEGV, &sa, NULL);
  (void)child_device(0);
  read_foreign_page();
}

static void resethand_prior_once(void** state) {
  (void)state;
  const child_out* o = run_child("resethand_prior");
  assert_true(WIFSIGNALED(o->status));
  assert_int_equal(WTERMSIG(o->status), SIGSEGV);
  assert_has(o, "resethand prior ran");
  assert_null(strstr(strstr(o->text, "resethand prior ran") + 1,
                     "resethand prior ran"));
}

/* SIGSEGV ignored before simdev: a kill() of it stays ignored and simdev's
 * handler stays installed, so a host access later is still reported (and
 * kills: the kernel overrides SIG_IGN for a real fault). */
static void body_ignored_kill(void) {
  signal(SIGSEGV, SIG_IGN);
  sim_device* dev = child_device(0);
  unsigned char* p = sim_mem_alloc(dev, 64);
  kill(getpid(), SIGSEGV);
  static const char msg[] = "survived kill -SEGV\n";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  VALGRIND_DISABLE_ERROR_REPORTING;
  g_sink = p[0];
  _exit(0);
}

static void ignored_kill_then_report(void** state) {
  (void)state;
  const child_out* o = run_child("ignored_kill");
  assert_has(o, "survived kill -SEGV\n\nsimdev: host access to device memory");
  assert_true(WIFSIGNALED(o->status));
  assert_int_equal(WTERMSIG(o->status), SIGSEGV);
}

/* The SIGBUS path of the handler. The kernel raises SIGSEGV for a PROT_NONE
 * page, so the SIGBUS is sent by the thread to itself with the fields a
 * fault would carry (rt_tgsigqueueinfo accepts si_code > 0 for the
 * caller's own thread); no access runs again afterwards, so the child
 * lives on and shows the disposition the handler left: the default. */
static void body_sigbus(void) {
  struct sigaction before, now;
  sigaction(SIGBUS, NULL, &before); /* SIG_DFL, or ASan's handler */
  sim_device* dev = child_device(4);
  unsigned char* p = sim_mem_alloc(dev, 256);
  siginfo_t si;
  memset(&si, 0, sizeof(si));
  si.si_signo = SIGBUS;
  si.si_code = BUS_ADRERR;
  si.si_addr = p + 8;
  if (syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid),
              SIGBUS, &si) != 0)
    _exit(5);
  sigaction(SIGBUS, NULL, &now);
  fprintf(stderr, "after: %s\n",
          now.sa_handler == before.sa_handler ? "the previous disposition"
                                              : "still simdev's");
  _exit(0);
}

static void report_sigbus(void** state) {
  (void)state;
  const child_out* o = run_child("sigbus");
  assert_true(WIFEXITED(o->status));
  assert_int_equal(WEXITSTATUS(o->status), 0);
  assert_has(o, "(SIGBUS)\n  device: simdev-4 is discrete");
  assert_has(o, "256 bytes, offset 8, allocated ");
  assert_has(o, "after: the previous disposition");
}

/* Two threads read device memory after one barrier. However they meet the
 * handler (together, or one after the other's report restored the
 * default), the process writes exactly one report and dies of SIGSEGV:
 * the assertion holds in every interleaving, none is relied on. */
static pthread_barrier_t g_both;
static unsigned char* g_target;
static void* fault_thread(void* arg) {
  (void)arg;
  pthread_barrier_wait(&g_both);
  g_sink = g_target[(uintptr_t)arg];
  return NULL;
}

static void body_two_threads(void) {
  sim_device* dev = child_device(0);
  g_target = sim_mem_alloc(dev, 4096);
  pthread_barrier_init(&g_both, NULL, 2);
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, fault_thread, (void*)(i * 64));
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  _exit(0);
}

static void two_threads_one_report(void** state) {
  (void)state;
  /* ASan's SEGV handler is the previous one there: it returns control to
   * no one but reports and exits itself, and simdev releases the claim
   * before handing over to it, so a second report may come. */
#if defined(__SANITIZE_ADDRESS__)
  skip();
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  skip();
#endif
#endif
  const child_out* o = run_child("two_threads");
  assert_true(WIFSIGNALED(o->status));
  assert_int_equal(WTERMSIG(o->status), SIGSEGV);
  const char* first = strstr(o->text, "simdev: host access to device memory");
  assert_non_null(first);
  if (strstr(first + 1, "simdev: host access to device memory") != NULL)
    fail_msg("two reports:\n%s", o->text);
}

/* A slot of the region table reused by another device: the report names
 * the device alive now, not the one before it in the slot. */
static void body_reused_slot(void) {
  sim_device_destroy(child_device(5));
  sim_device* dev = child_device(7);
  unsigned char* p = sim_mem_alloc(dev, 64);
  g_sink = p[1];
  _exit(0);
}

static void report_after_slot_reuse(void** state) {
  (void)state;
  const child_out* o = run_child("reused_slot");
  assert_died(o);
  assert_has(o, "device: simdev-7 is discrete");
  if (strstr(o->text, "simdev-5") != NULL) fail_msg("stale name:\n%s", o->text);
}

/* ulimit -f below the region: ftruncate of the memfd would raise SIGXFSZ
 * (death with a core); the device is refused with a message instead. */
static void body_fsize_limit(void) {
  struct rlimit lim = {1 << 20, 1 << 20};
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(5);
  sim_device* dev = NULL;
  int err = sim_device_create_ex(0, TU_MEMORY_MB, SIM_DEVICE_DISCRETE, &dev);
  fprintf(stderr, "err %d: %s\n", err, sim_device_create_error());
  if (dev != NULL) _exit(6);
  /* A plain device is no file: unaffected. */
  if (sim_device_create_ex(0, TU_MEMORY_MB, 0, &dev) != SIM_OK) _exit(7);
  fprintf(stderr, "plain: \"%s\"\n", sim_device_create_error());
  _exit(0);
}

static void refused_under_fsize_limit(void** state) {
  (void)state;
  const child_out* o = run_child("fsize_limit");
  if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0)
    fail_msg("child status %d:\n%s", o->status, o->text);
  assert_has(o,
             "err -2: SIMDEV_DISCRETE=1: the device's 64 MiB are a memfd,"
             " and the file size limit (ulimit -f) is 1024 KiB");
  assert_has(o, "plain: \"\"");
}

/* jemalloc's junk fill, turned on at run time, would write into view A. */
static void body_junk(void) {
  sim_device* dev = NULL;
  int err = sim_device_create_ex(0, TU_MEMORY_MB, SIM_DEVICE_DISCRETE, &dev);
  fprintf(stderr, "err %d: %s\n", err, sim_device_create_error());
  _exit(dev == NULL ? 0 : 6);
}

static void refused_with_jemalloc_junk(void** state) {
  (void)state;
  const child_out* o = run_child_env("junk", "SDJE_MALLOC_CONF=junk:true");
  if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0)
    fail_msg("child status %d:\n%s", o->status, o->text);
  assert_has(o,
             "err -1: SIMDEV_DISCRETE=1 cannot be used with jemalloc's "
             "junk or zero fill");
}

static const struct {
  const char* name;
  void (*body)(void);
} kBodies[] = {
    {"plain_prior", body_plain_prior},
    {"resethand_prior", body_resethand_prior},
    {"ignored_kill", body_ignored_kill},
    {"sigbus", body_sigbus},
    {"two_threads", body_two_threads},
    {"reused_slot", body_reused_slot},
    {"fsize_limit", body_fsize_limit},
    {"junk", body_junk},
    {"live_read", body_live_read},
    {"freed_read", body_freed_read},
    {"never_allocated", body_never_allocated},
    {"foreign_fault", body_foreign_fault},
    {"ours_then_prior", body_ours_then_prior},
};

int main(int argc, char** argv) {
  g_argv0 = argv[0];
  if (argc == 3 && strcmp(argv[1], "--child") == 0) {
    for (size_t i = 0; i < TU_ARRAY_SIZE(kBodies); i++) {
      if (strcmp(argv[2], kBodies[i].name) != 0) continue;
      kBodies[i].body();
      return 0;
    }
    return 126;
  }
  tu_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flags_and_alias),
      cmocka_unit_test(copies),
      cmocka_unit_test(valgrind_sees_alias),
      cmocka_unit_test(report_live),
      cmocka_unit_test(report_freed),
      cmocka_unit_test(report_never_allocated),
      cmocka_unit_test(foreign_fault_chained),
      cmocka_unit_test(report_then_prior),
      cmocka_unit_test(plain_prior_chained),
      cmocka_unit_test(resethand_prior_once),
      cmocka_unit_test(ignored_kill_then_report),
      cmocka_unit_test(report_sigbus),
      cmocka_unit_test(two_threads_one_report),
      cmocka_unit_test(report_after_slot_reuse),
      cmocka_unit_test(refused_under_fsize_limit),
      cmocka_unit_test(refused_with_jemalloc_junk),
      cmocka_unit_test(region_limit_and_reuse),
      cmocka_unit_test(fork_child_has_no_device_memory),
  };
  return cmocka_run_group_tests_name("discrete", tests, NULL, NULL);
}
