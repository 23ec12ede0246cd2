/*
 * discrete_report.c - the SIGSEGV/SIGBUS handler that reports a host access
 * to a discrete device's memory (view A, PROT_NONE: discrete.c), installed
 * when the first discrete device is created (arena.c).
 *
 * The handler finds the region and the allocation (discrete.c's table and
 * records), writes a report to stderr without stdio or malloc, restores the
 * previous disposition and returns: the access runs again and the previous
 * handler (e.g. Python's faulthandler) or the default action (death by
 * SIGSEGV) takes over. Under gdb the debugger stops at the access before any
 * of this runs.
 * The handler calls (all of them): write(2); pthread_mutex_trylock/unlock
 * on discrete.c's g_rec_mu (sim_discrete_recs_trylock/_unlock, checked as
 * every lock call is: only a broken invariant aborts, and that abort's
 * report, sim_pthread_failed's snprintf/fprintf, is not async-signal-safe:
 * acceptable on the way to abort()), with
 * sched_yield between tries; the lock-free region lookup
 * (sim_discrete_region_at) and record lookups (sim_discrete_live_at/
 * _freed_at, with that lock held); nanosleep while another thread's report
 * is under way; syscall(SYS_gettid); prctl(PR_GET_NAME); clock_gettime
 * through sim_now_ns (whose SIM_CHECK aborts if it fails); glibc's
 * backtrace (its first call, which loads libgcc's unwinder, is made at
 * install) and backtrace_symbols_fd; sigaction; and for a signal that is
 * not ours, pthread_sigmask and raise or the previous handler (chain()).
 *
 * Locks and atomics: g_reporting (below), one report at a time; the
 * records' lock is only ever tried, never waited for. g_prev_segv/_bus are
 * written once, at install (pthread_once), before the handler can run.
 */
#include <errno.h>
#include <execinfo.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

/* ---- the report (signal context: no stdio, no malloc) ------------------ */

typedef struct out_buf {
  char b[1024];
  size_t n;
} out_buf;

static void out_flush(out_buf* o) {
  size_t off = 0;
  while (off < o->n) {
    ssize_t w = write(STDERR_FILENO, o->b + off, o->n - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
  o->n = 0;
}

static void out_s(out_buf* o, const char* s) {
  for (; *s; s++) {
    if (o->n == sizeof(o->b)) out_flush(o);
    o->b[o->n++] = *s;
  }
}

static void out_u(out_buf* o, uint64_t v) {
  char t[24];
  int i = 0;
  do t[i++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  char r[24];
  for (int k = 0; k < i; k++) r[k] = t[i - 1 - k];
  r[i] = '\0';
  out_s(o, r);
}

static void out_x(out_buf* o, uint64_t v) {
  char r[24] = "0x";
  int i = 2;
  int shift = 60;
  while (shift > 0 && ((v >> shift) & 0xf) == 0) shift -= 4;
  for (; shift >= 0; shift -= 4)
    r[i++] = "0123456789abcdef"[(v >> shift) & 0xf];
  r[i] = '\0';
  out_s(o, r);
}

static void out_ms_ago(out_buf* o, uint64_t then, uint64_t now) {
  out_u(o, now > then ? (now - then) / 1000000u : 0);
  out_s(o, " ms ago");
}

static void out_rec_origin(out_buf* o, const sim_disc_rec* r) {
  if (r->op_type[0] != '\0') {
    out_s(o, " by op ");
    out_s(o, r->op_type);
    if (r->op_name[0] != '\0') {
      out_s(o, " (node \"");
      out_s(o, r->op_name);
      out_s(o, "\")");
    }
  } else {
    out_s(o, " outside any simdev kernel");
  }
  out_s(o, " on tid ");
  out_u(o, (uint64_t)r->tid);
}

/* "base B, N bytes, offset K, allocated T ms ago by op ... on tid N": where
 * a lies in record r, the same words for a live and a freed allocation. */
static void out_rec(out_buf* o, const sim_disc_rec* r, uintptr_t a,
                    uint64_t now) {
  out_s(o, "base ");
  out_x(o, r->base);
  out_s(o, ", ");
  out_u(o, r->size);
  out_s(o, " bytes, offset ");
  out_u(o, a - r->base);
  out_s(o, ", allocated ");
  out_ms_ago(o, r->alloc_ns, now);
  out_rec_origin(o, r);
}

static void report_allocation(out_buf* o, uintptr_t a) {
  int locked = 0;
  for (int i = 0; i < 1000 && !locked; i++) {
    locked = sim_discrete_recs_trylock();
    if (!locked) sched_yield();
  }
  out_s(o, "  allocation: ");
  if (!locked) {
    out_s(o, "unknown (the allocation table is busy in another thread)\n");
    return;
  }
  uint64_t now = sim_now_ns();
  const sim_disc_rec* hit = sim_discrete_live_at(a);
  if (hit != NULL) {
    out_rec(o, hit, a, now);
    out_s(o, "\n");
  } else {
    /* The most recent free that covered a, if still remembered. */
    const sim_disc_rec* f = sim_discrete_freed_at(a);
    out_s(o, "not in a live allocation (");
    if (f != NULL) {
      out_s(o, "freed ");
      out_ms_ago(o, f->free_ns, now);
      out_s(o, ": ");
      out_rec(o, f, a, now);
    } else {
      out_s(o, "never allocated, or freed before the last ");
      out_u(o, SIM_DISC_FREED);
      out_s(o, " frees");
    }
    out_s(o, ")\n");
  }
  sim_discrete_recs_unlock();
}

static struct sigaction g_prev_segv, g_prev_bus;

static void report(int sig, const siginfo_t* si, const sim_disc_view* v) {
  out_buf o = {.n = 0};
  uintptr_t a = (uintptr_t)si->si_addr;
  out_s(&o, "\nsimdev: host access to device memory at ");
  out_x(&o, a);
  out_s(&o, sig == SIGSEGV ? " (SIGSEGV)\n" : " (SIGBUS)\n");
  out_s(&o, "  device: ");
  out_s(&o, (const char*)v->name);
  out_s(&o,
        " is discrete (SIMDEV_DISCRETE=1): its memory is not accessible "
        "to host code, only to simdev's streams\n");
  report_allocation(&o, a);
  char tname[32] = "?";
  (void)prctl(PR_GET_NAME, tname, 0, 0, 0);
  tname[sizeof(tname) - 1] = '\0';
  out_s(&o, "  thread: \"");
  out_s(&o, tname);
  out_s(&o, "\" tid ");
  out_u(&o, (uint64_t)syscall(SYS_gettid));
  out_s(&o,
        "\n  backtrace (the faulting access is in the frame after the "
        "signal frame):\n");
  out_flush(&o);
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  out_s(&o,
        "  hint: run under gdb, which stops at the access itself "
        "(gdb --args python script.py, then run; bt), and see "
        "docs/debugging.md, \"Discrete memory\"\n"
        "simdev: passing the signal on to the previous handler\n");
  out_flush(&o);
}

/* Hands a signal that is not ours to whoever had it before, as the kernel
 * would have delivered it to them (the handler runs with their sa_mask and
 * SA_NODEFER, SA_RESETHAND is honoured). */
static void chain(int sig, siginfo_t* si, void* uc,
                  const struct sigaction* prev) {
  void (*h)(int) = prev->sa_handler; /* shares storage with sa_sigaction */
  if (h == SIG_IGN && si->si_code <= 0) return; /* kill(): ignored, as before */
  if (h == SIG_DFL || h == SIG_IGN) {
    /* Default (or ignored, which the kernel overrides for a real fault):
     * give the signal back to it; the access faults again and the process
     * dies of it, as it would have without simdev. A signal sent with
     * kill() is raised again (default action: death). */
    sigaction(sig, prev, NULL);
    if (si->si_code <= 0) raise(sig);
    return;
  }
  if (prev->sa_flags & SA_RESETHAND) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
  }
  sigset_t mask, old;
  pthread_sigmask(SIG_SETMASK, NULL, &mask);
  for (int s = 1; s < NSIG; s++)
    if (sigismember(&prev->sa_mask, s) == 1) sigaddset(&mask, s);
  if (prev->sa_flags & SA_NODEFER)
    sigdelset(&mask, sig);
  else
    sigaddset(&mask, sig);
  pthread_sigmask(SIG_SETMASK, &mask, &old);
  if (prev->sa_flags & SA_SIGINFO)
    prev->sa_sigaction(sig, si, uc);
  else
    h(sig);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Tid of the thread writing a report, or 0. Taken by compare-and-swap from
 * 0, released only by a compare-and-swap from the holder's own tid. */
static _Atomic int g_reporting;

/* 1 when the previous disposition of a fault in view A will not return:
 * SIG_DFL, or SIG_IGN (which the kernel overrides for a fault). */
static int prev_kills(const struct sigaction* prev) {
  return prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN;
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
  int saved = errno;
  const struct sigaction* prev = sig == SIGSEGV ? &g_prev_segv : &g_prev_bus;
  sim_disc_view v;
  /* si_addr means something only for a fault the kernel raised. */
  if (si->si_code <= 0 ||
      sim_discrete_region_at((uintptr_t)si->si_addr, &v) != 0) {
    chain(sig, si, uc, prev);
    errno = saved;
    return;
  }
  /* One report at a time: threads that fault together (TF runs several
   * kernels at once) would interleave their lines. A thread that finds
   * another's report under way waits for it, up to ~2 s, then writes its
   * own anyway. The holder keeps the claim when the previous disposition
   * kills the process (the usual case): a thread that faulted meanwhile
   * then never writes, and the one report is not followed by half of
   * another before the process dies. */
  int me = (int)syscall(SYS_gettid), holder = 0, claimed = 0;
  for (int i = 0; i < 2000; i++) {
    if (atomic_compare_exchange_strong(&g_reporting, &holder, me)) {
      claimed = 1;
      break;
    }
    /* Our own claim: the other signal (SIGBUS in a SIGSEGV report or the
     * reverse; not blocked by ours) came in the middle of our report. The
     * same signal is blocked in its own handler, so a fault of that kind
     * here kills the process at once, without reaching this line. */
    if (holder == me) break;
    holder = 0;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  report(sig, si, &v);
  /* The access runs again on return and meets the previous handler. */
  sigaction(sig, prev, NULL);
  if (claimed && !prev_kills(prev)) {
    holder = me;
    atomic_compare_exchange_strong(&g_reporting, &holder, 0);
  }
  errno = saved;
}

static void install_handler(void) {
  /* backtrace() loads libgcc's unwinder on first use (dlopen, malloc):
   * do that now, not in the handler. */
  void* f[2];
  (void)backtrace(f, 2);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  SIM_CHECK(sigaction(SIGSEGV, &sa, &g_prev_segv) == 0);
  SIM_CHECK(sigaction(SIGBUS, &sa, &g_prev_bus) == 0);
}

static pthread_once_t g_install_once = PTHREAD_ONCE_INIT;

void sim_discrete_report_install(void) {
  SIM_CHECK_PT(pthread_once(&g_install_once, install_handler));
}
