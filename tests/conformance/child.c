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
 * A child writes its results as record lines (report.h); the parent feeds
 * them to the report and prints everything else the child printed (the
 * plugin's own output) with a prefix. A child that is killed by a signal,
 * outlives its timeout, or exits non-zero without a failed check (e.g.
 * valgrind's --error-exitcode under --trace-children=yes) is reported by
 * the caller.
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

int conf_spawn_self(char* const* args, char* const* envp, int* fd) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  char* argv[64];
  int n = 0;
  argv[n++] = self;
  for (int i = 0; args[i] != NULL && n < 63; i++) argv[n++] = args[i];
  argv[n] = NULL;

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  char* const* env = envp != NULL ? envp : environ;
  /* fork + execve rather than posix_spawn: under valgrind posix_spawn's
   * CLONE_VFORK becomes a plain fork whose exec failure the parent never
   * learns (only an exit status 127); here the child says why. Between
   * fork and exec only async-signal-safe calls (this process has threads). */
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    errno = err;
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execve(self, argv, env);
    char msg[96] = "simdev_conformance: execve failed, errno ";
    size_t used = strlen(msg);
    int err = errno;
    char digits[12];
    int k = 0;
    do {
      digits[k++] = (char)('0' + err % 10);
      err /= 10;
    } while (err > 0 && k < 11);
    while (k > 0 && used + 2 < sizeof(msg)) msg[used++] = digits[--k];
    msg[used++] = '\n';
    ssize_t w = write(STDERR_FILENO, msg, used);
    (void)w;
    _exit(127);
  }
  close(fds[1]);
  *fd = fds[0];
  return pid;
}

/* One line of child output: a record, or text printed with the prefix. */
static void child_line(const char* line, const char* prefix) {
  if (!conf_report_ingest(line)) printf("%s%s\n", prefix, line);
}

int conf_collect_child(int pid, int fd, int timeout_s, const char* prefix) {
  const uint64_t deadline = conf_now_ns() + (uint64_t)timeout_s * 1000000000u;
  char buf[8192];
  size_t have = 0;
  int timed_out = 0;
  for (;;) {
    uint64_t now = conf_now_ns();
    if (now >= deadline) {
      timed_out = 1;
      break;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)((deadline - now) / 1000000u) + 1;
    int r = poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue; /* the deadline check ends the loop */
    ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break; /* EOF: the child (and its children) closed it */
    have += (size_t)got;
    buf[have] = '\0';
    char* start = buf;
    char* nl;
    while ((nl = strchr(start, '\n')) != NULL) {
      *nl = '\0';
      child_line(start, prefix);
      start = nl + 1;
    }
    have = strlen(start);
    memmove(buf, start, have + 1);
    if (have == sizeof(buf) - 1) { /* a line longer than the buffer */
      child_line(buf, prefix);
      have = 0;
    }
  }
  if (have > 0) child_line(buf, prefix);
  close(fd);
  int status = 0;
  if (timed_out) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return -1;
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  fflush(stdout);
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

int conf_spawn_test(const conf_env* e, const char* test, int* fd) {
  char* args[48];
  int n = forward_args(e, args, 40);
  args[n++] = "--run-test";
  args[n++] = (char*)test;
  if (e->opt->simdev) args[n++] = "--simdev";
  args[n++] = (char*)e->plugin_path;
  args[n] = NULL;
  return conf_spawn_self(args, NULL, fd);
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
  int fd;
  int pid = conf_spawn_self(args, envp, &fd);
  free(envp);
  if (!conf_check(rule, pid > 0, __FILE__, __LINE__, "posix_spawn: %s",
                  strerror(errno))) {
    return;
  }
  int status = conf_collect_child(pid, fd, e->opt->timeout_s, "  | ");
  if (status < 0) {
    conf_check(rule, 0, __FILE__, __LINE__,
               "child %s did not finish within %d s", name, e->opt->timeout_s);
  } else if (WIFSIGNALED(status)) {
    conf_check(rule, 0, __FILE__, __LINE__, "child %s killed by signal %d",
               name, WTERMSIG(status));
  } else {
    conf_check(rule, WEXITSTATUS(status) == 0, __FILE__, __LINE__,
               "child %s exited with status %d", name, WEXITSTATUS(status));
  }
}
