/*
 * child.c - child processes: one per test, and environment cases.
 *
 * A plugin reads its configuration and is initialized once per process (TF
 * aborts on a second registration), and a broken plugin can crash or hang
 * the process it runs in. So the runner starts this program again for each
 * test (`--run-test NAME`), and simdev's environment-dependent checks start
 * it with another environment (`--child-case NAME`). A fork() without exec
 * would inherit the already-initialized plugin and its worker threads, so it
 * is not an option.
 *
 * A child writes its results as record lines (report.h) to its own pipe,
 * on file descriptor CONF_RECORD_FD, never to stdout: the plugin owns
 * stdout and stderr and may print anything there (text without a newline,
 * NUL bytes, even a line that looks like a record), and none of it can hide
 * or forge a result. The parent prints the plugin's output with a prefix.
 * A child that is killed by a signal, outlives its timeout (it and its own
 * children are killed: each child leads a process group) or exits non-zero
 * (e.g. valgrind's --error-exitcode under --trace-children=yes) is reported
 * by the caller.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"
#include "report.h"

extern char** environ;

int conf_spawn_self(char* const* args, char* const* envp, int* out_fd,
                    int* rec_fd) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  char* argv[64];
  int n = 0;
  argv[n++] = self;
  for (int i = 0; args[i] != NULL && n < 63; i++) argv[n++] = args[i];
  argv[n] = NULL;

  int out[2], rec[2];
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  if (pipe2(rec, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return -1;
  }
  char* const* env = envp != NULL ? envp : environ;
  /* fork + execve rather than posix_spawn: under valgrind posix_spawn's
   * CLONE_VFORK becomes a plain fork whose exec failure the parent never
   * learns (only an exit status 127); here the child says why. Between
   * fork and exec only async-signal-safe calls (this process has threads).
   * dup2 clears FD_CLOEXEC on the copies the child keeps. */
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(out[0]);
    close(out[1]);
    close(rec[0]);
    close(rec[1]);
    errno = err;
    return -1;
  }
  if (pid == 0) {
    setpgid(0, 0); /* a timeout kills the whole group */
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    dup2(rec[1], CONF_RECORD_FD);
    execve(self, argv, env);
    char msg[96] = "simdev_conformance: execve failed, errno ";
    size_t used = strlen(msg);
    used = conf_put_num(msg, used, sizeof(msg) - 1, errno);
    msg[used++] = '\n';
    ssize_t w = write(STDERR_FILENO, msg, used);
    (void)w;
    _exit(127);
  }
  setpgid(pid, pid); /* also here: no race with the kill below */
  close(out[1]);
  close(rec[1]);
  *out_fd = out[0];
  *rec_fd = rec[0];
  return pid;
}

/* Line splitting for one pipe. Lines longer than the buffer are cut into
 * pieces; NUL bytes are kept out of the way of string functions. */
typedef struct line_buf {
  int fd; /* -1 once at end of file */
  int records; /* lines are records, not plugin output */
  size_t have;
  char buf[8192];
} line_buf;

static void emit_line(line_buf* b, char* line, size_t n, const char* prefix) {
  for (size_t i = 0; i < n; i++) {
    if (line[i] == '\0') line[i] = ' ';
  }
  line[n] = '\0';
  if (b->records) {
    conf_report_ingest(line);
  } else {
    printf("%s%s\n", prefix, line);
  }
}

/* Reads what is there; returns 0 at end of file. */
static int read_lines(line_buf* b, const char* prefix) {
  ssize_t got = read(b->fd, b->buf + b->have, sizeof(b->buf) - 1 - b->have);
  if (got < 0 && errno == EINTR) return 1;
  if (got <= 0) {
    if (b->have > 0) emit_line(b, b->buf, b->have, prefix);
    b->have = 0;
    return 0;
  }
  b->have += (size_t)got;
  size_t start = 0;
  char* nl;
  while ((nl = memchr(b->buf + start, '\n', b->have - start)) != NULL) {
    size_t len = (size_t)(nl - (b->buf + start));
    emit_line(b, b->buf + start, len, prefix);
    start += len + 1;
  }
  memmove(b->buf, b->buf + start, b->have - start);
  b->have -= start;
  if (b->have == sizeof(b->buf) - 1) { /* a line longer than the buffer */
    emit_line(b, b->buf, b->have, prefix);
    b->have = 0;
  }
  return 1;
}

int conf_collect_child(int pid, int out_fd, int rec_fd, int timeout_s,
                       const char* prefix) {
  const uint64_t deadline = conf_now_ns() + (uint64_t)timeout_s * 1000000000u;
  line_buf* out = malloc(sizeof(line_buf));
  line_buf* rec = malloc(sizeof(line_buf));
  if (out == NULL || rec == NULL) abort();
  *out = (line_buf){.fd = out_fd, .records = 0};
  *rec = (line_buf){.fd = rec_fd, .records = 1};
  int status = 0, done = 0, timed_out = 0;
  while (!done) {
    uint64_t now = conf_now_ns();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    int ms = (int)((deadline - now) / 1000000u) + 1;
    if (out->fd < 0 && rec->fd < 0) {
      /* Both pipes closed: wait for the exit, still with the deadline (a
       * child may close its output and go on running). */
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        done = 1;
      } else if (r < 0 && errno != EINTR) {
        done = 1;
      } else {
        conf_sleep_ms(ms < 10 ? ms : 10);
      }
      continue;
    }
    struct pollfd p[2] = {{.fd = out->fd, .events = POLLIN},
                          {.fd = rec->fd, .events = POLLIN}};
    int r = poll(p, 2, ms);
    if (r <= 0) continue; /* EINTR or the deadline: checked above */
    line_buf* b[2] = {out, rec};
    for (int i = 0; i < 2; i++) {
      if (b[i]->fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        if (!read_lines(b[i], prefix)) {
          close(b[i]->fd);
          b[i]->fd = -1;
        }
      }
    }
  }
  if (out->fd >= 0) close(out->fd);
  if (rec->fd >= 0) close(rec->fd);
  free(out);
  free(rec);
  fflush(stdout);
  if (timed_out) {
    kill(-pid, SIGKILL); /* the child and anything it started */
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return -1;
  }
  return status;
}

/* ------------------------------------------------------------ cases */

/* environ without SIMDEV_*, plus the case's assignments. Caller frees the
 * array (not the strings). */
static char** case_environ(const conf_child_case* c) {
  size_t n = 0;
  while (environ[n] != NULL) n++;
  char** envp = calloc(n + 6, sizeof(char*));
  if (envp == NULL) abort();
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(environ[i], "SIMDEV_", 7) != 0) envp[k++] = environ[i];
  }
  for (int i = 0; i < 4 && c->env[i] != NULL; i++) {
    envp[k++] = (char*)c->env[i];
  }
  envp[k] = NULL;
  return envp;
}

/* The same TF, preloads and timeout as this process. */
static int forward_args(const conf_env* e, char** args, int cap) {
  const conf_options* o = e->opt;
  static char timeout[16];
  int n = 0;
  args[n++] = "--tf-dir";
  args[n++] = (char*)conf_tf_dir();
  for (int i = 0; i < o->npreload && n + 2 < cap; i++) {
    args[n++] = "--preload";
    args[n++] = (char*)o->preload[i];
  }
  snprintf(timeout, sizeof(timeout), "%d", o->timeout_s);
  args[n++] = "--timeout";
  args[n++] = timeout;
  return n;
}

int conf_spawn_test(const conf_env* e, const char* test, int* out_fd,
                    int* rec_fd) {
  char* args[48];
  int n = forward_args(e, args, 40);
  args[n++] = "--run-test";
  args[n++] = (char*)test;
  if (e->opt->simdev) args[n++] = "--simdev";
  args[n++] = (char*)e->plugin_path;
  args[n] = NULL;
  return conf_spawn_self(args, NULL, out_fd, rec_fd);
}

/* Environment cases are simdev's (simdev_checks.c): their rule. */
static const conf_rule* case_rule(void) {
  return conf_report_find_rule("simdev.env_case_finishes");
}

void conf_run_child(conf_env* e, const char* name) {
  const conf_child_case* c = conf_child_cases;
  while (c->name != NULL && strcmp(c->name, name) != 0) c++;
  const conf_rule* rule = case_rule();
  if (c->name == NULL || rule == NULL) {
    fprintf(stderr, "%s:%d: unknown child case '%s'\n", __FILE__, __LINE__,
            name);
    abort();
  }
  char vars[256] = "";
  for (int i = 0; i < 4 && c->env[i] != NULL; i++) {
    size_t used = strlen(vars);
    snprintf(vars + used, sizeof(vars) - used, " %s", c->env[i]);
  }
  conf_note("child %s:%s", name, vars);
  char* args[48];
  int n = forward_args(e, args, 40);
  args[n++] = "--child-case";
  args[n++] = (char*)name;
  args[n++] = (char*)e->plugin_path;
  args[n] = NULL;
  char** envp = case_environ(c);
  int out_fd, rec_fd;
  int pid = conf_spawn_self(args, envp, &out_fd, &rec_fd);
  free(envp);
  if (!conf_check(rule, pid > 0, __FILE__, __LINE__,
                  "starting the child process: %s", strerror(errno))) {
    return;
  }
  /* Half the test's own limit, so that a hung case is reported as itself
   * before the whole test times out. */
  int limit = e->opt->timeout_s / 2 > 0 ? e->opt->timeout_s / 2 : 1;
  int status = conf_collect_child(pid, out_fd, rec_fd, limit, "  | ");
  if (status < 0) {
    conf_check(rule, 0, __FILE__, __LINE__,
               "child %s did not finish within %d s", name, limit);
  } else if (WIFSIGNALED(status)) {
    conf_check(rule, 0, __FILE__, __LINE__, "child %s killed by signal %d",
               name, WTERMSIG(status));
  } else {
    conf_check(rule, WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "child %s exited with status %d", name, WEXITSTATUS(status));
  }
}
