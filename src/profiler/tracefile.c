/*
 * tracefile.c - SIMDEV_TRACE: record the whole run, write it as Chrome
 * trace-event JSON at exit (sp_tracefile_start / sp_tracefile_flush).
 *
 * The file is opened once, at start (so a path that cannot be written is an
 * error at start-up, naming the OS's reason, not a silent loss at exit), and
 * must be a regular file (a FIFO, a tty or /dev/null cannot be truncated and
 * rewritten, and opening a FIFO would block the import), and kept open
 * (close-on-exec: no child process inherits it): each flush truncates it and
 * writes the whole snapshot again, so a later flush (the exit handler's)
 * supersedes an earlier one and a relative path or a changed working directory
 * does not matter.
 *
 * "%p" in the path becomes the process id ("%%" a "%"): one file per
 * process when several load the plugin with the same SIMDEV_TRACE (the
 * conformance harness runs each test in a child process; multi-process
 * jobs). Without it, each process truncates the same file and the last one
 * to exit wins.
 *
 * At exit: an atexit handler flushes. Only in the process that started the
 * trace: a child that forks and exits through exit() would otherwise
 * overwrite the parent's file with a copy of the parent's rings. A process
 * that ends with _exit() or a signal writes nothing (nothing runs then);
 * sp_tracefile_flush is there for callers who want a file earlier.
 *
 * Thread contract: g_lock guards the state below; a flush holds it while it
 * writes, so concurrent flushes write one after the other. The snapshot is
 * taken under it too (device_sim's own locks nest inside, never the other
 * way round).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profiler/sp.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE* g_file;  /* open from start on; never closed (exit does) */
static char* g_path;  /* for messages */
static pid_t g_pid;   /* the process that started the trace */
static int g_started; /* sp_tracefile_start succeeded */

static int flush_locked(char* msg, size_t msg_len) {
  sim_trace_snapshot* snap = NULL;
  int err = sim_trace_snapshot_take(0, 0, &snap);
  if (err != SIM_OK) {
    snprintf(msg, msg_len, "%s: taking the trace snapshot failed: %s", g_path,
             sim_strerror(err));
    return err;
  }
  /* Truncate and rewrite from the start: the file holds one JSON object.
   * An earlier failed write left the stream's error flag set: clear it, so
   * this write is judged on its own. */
  (void)fflush(g_file);
  clearerr(g_file);
  if (ftruncate(fileno(g_file), 0) != 0 || fseek(g_file, 0, SEEK_SET) != 0) {
    snprintf(msg, msg_len, "%s: cannot rewrite: %s", g_path, strerror(errno));
    sim_trace_snapshot_free(snap);
    return SIM_ESYS;
  }
  char why[256];
  err = sp_chrome_json_write(snap, g_file, why, sizeof(why));
  sim_trace_snapshot_free(snap);
  if (err != SIM_OK) snprintf(msg, msg_len, "%s: %s", g_path, why);
  return err;
}

static void flush_at_exit(void) {
  sim_mutex_lock(&g_lock);
  if (g_started && getpid() == g_pid) {
    char msg[512];
    if (flush_locked(msg, sizeof(msg)) != SIM_OK)
      fprintf(stderr, "simdev: SIMDEV_TRACE: writing the trace failed: %s\n",
              msg);
  }
  sim_mutex_unlock(&g_lock);
}

/* path with "%p" replaced by the process id and "%%" by "%" (any other
 * "%" stays): malloc'd, NULL if out of memory. */
static char* expand_path(const char* path) {
  size_t n = 0;
  for (const char* p = path; *p; p++)
    n += (p[0] == '%' && p[1] == 'p') ? 20 : 1;
  char* out = malloc(n + 1);
  if (out == NULL) return NULL;
  char* o = out;
  for (const char* p = path; *p; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      o += sprintf(o, "%ld", (long)getpid());
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      *o++ = '%';
      p++;
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
  return out;
}

int sp_tracefile_start(const char* path, uint32_t ring_records, char* msg,
                       size_t msg_len) {
  if (msg_len > 0) msg[0] = '\0';
  if (path == NULL || path[0] == '\0') {
    snprintf(msg, msg_len, "trace file: empty path");
    return SIM_EINVAL;
  }
  sim_mutex_lock(&g_lock);
  int err = SIM_OK;
  if (g_started) {
    snprintf(msg, msg_len, "trace file: already started (%s)", g_path);
    err = SIM_EINVAL;
    goto out;
  }
  char* copy = expand_path(path);
  if (copy == NULL) {
    snprintf(msg, msg_len, "trace file: out of memory");
    err = SIM_ENOMEM;
    goto out;
  }
  path = copy; /* from here on: the file's real name */
  /* Non-blocking, so a FIFO without a reader fails (ENXIO) instead of
   * blocking the import; then what was opened must be a regular file (no
   * window between a check and the open); only then truncate it. */
  int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
  struct stat st;
  if (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(msg, msg_len,
             "not a regular file (the trace is rewritten in place at exit): "
             "%s",
             path);
    free(copy);
    err = SIM_EINVAL;
    goto out;
  }
  FILE* f = NULL;
  if (fd >= 0 && ftruncate(fd, 0) == 0 &&
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
    f = fdopen(fd, "w");
  if (f == NULL) {
    /* The OS's reason first: a long path may be cut, the reason not. */
    snprintf(msg, msg_len, "cannot open for writing (%s): %s", strerror(errno),
             path);
    if (fd >= 0) close(fd);
    free(copy);
    err = SIM_ESYS;
    goto out;
  }
  err = sim_trace_start(ring_records);
  if (err != SIM_OK) {
    snprintf(msg, msg_len,
             "%s: cannot start recording (%u records per "
             "stream): %s",
             path, ring_records, sim_strerror(err));
    fclose(f);
    free(copy);
    goto out;
  }
  /* atexit fails only when out of memory: then nothing would write the
   * file, which must not look like success. */
  static int handler_registered;
  if (!handler_registered && atexit(flush_at_exit) != 0) {
    snprintf(msg, msg_len,
             "%s: cannot register the exit handler that "
             "writes it",
             path);
    sim_trace_stop();
    fclose(f);
    free(copy);
    err = SIM_ENOMEM;
    goto out;
  }
  handler_registered = 1;
  g_file = f;
  g_path = copy;
  g_pid = getpid();
  g_started = 1;
out:
  sim_mutex_unlock(&g_lock);
  return err;
}

int sp_tracefile_flush(char* msg, size_t msg_len) {
  if (msg_len > 0) msg[0] = '\0';
  sim_mutex_lock(&g_lock);
  int err;
  if (!g_started) {
    snprintf(msg, msg_len, "trace file: not started");
    err = SIM_EINVAL;
  } else {
    err = flush_locked(msg, msg_len);
  }
  sim_mutex_unlock(&g_lock);
  return err;
}
