/*
 * child.c - run one child case in a fresh process.
 *
 * A plugin reads its configuration and is initialized once per process (TF
 * aborts on a second registration), so checks that need another environment
 * re-execute this program as `simdev_conformance PLUGIN --child CASE` with the
 * case's variables set and every other SIMDEV_* variable removed. A fork()
 * without exec would inherit the already-initialized plugin and its worker
 * threads, so it is not an option.
 *
 * The child's output is relayed with a "  | " prefix; its final
 * "N passed, N failed" line is added to this process's counts. A child that
 * crashes, hangs (its own watchdog) or exits non-zero without failed checks
 * (e.g. valgrind's --error-exitcode under --trace-children=yes) is one more
 * failure.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"

extern char** environ;

/* environ without SIMDEV_*, plus the case's assignments. Caller frees the
 * array (not the strings). */
static char** child_environ(const conf_child_case* c) {
  size_t n = 0;
  while (environ[n] != NULL) n++;
  char** envp = calloc(n + 6, sizeof(char*));
  if (envp == NULL) abort();
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(environ[i], "SIMDEV_", 7) != 0) envp[k++] = environ[i];
  }
  /* Only silences TF's oneDNN banner, logged while libtensorflow_framework
   * loads; the harness runs no TF ops. */
  if (getenv("TF_ENABLE_ONEDNN_OPTS") == NULL) {
    envp[k++] = "TF_ENABLE_ONEDNN_OPTS=0";
  }
  for (int i = 0; i < 4 && c->env[i] != NULL; i++) {
    envp[k++] = (char*)c->env[i];
  }
  envp[k] = NULL;
  return envp;
}

void conf_run_child(conf_env* e, const char* name) {
  const conf_child_case* c = conf_child_cases;
  while (c->name != NULL && strcmp(c->name, name) != 0) c++;
  if (!CHECKF(c->name != NULL, "unknown child case '%s'", name)) return;

  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (!CHECK(len > 0)) return;
  self[len] = '\0';

  printf("  child %s:", name);
  for (int i = 0; i < 4 && c->env[i] != NULL; i++) printf(" %s", c->env[i]);
  printf("\n");
  fflush(stdout);

  int fds[2];
  if (!CHECK(pipe(fds) == 0)) return;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  char* argv[] = {self, (char*)e->plugin_path, "--child", (char*)name, NULL};
  char** envp = child_environ(c);
  pid_t pid;
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  close(fds[1]);
  if (!CHECKF(rc == 0, "posix_spawn: %s", strerror(rc))) {
    close(fds[0]);
    return;
  }

  FILE* in = fdopen(fds[0], "r");
  if (in == NULL) abort();
  char* line = NULL;
  size_t cap = 0;
  int passed = -1, failed = -1;
  while (getline(&line, &cap, in) > 0) {
    int p, f;
    char tail;
    if (sscanf(line, "%d passed, %d failed%c", &p, &f, &tail) == 3 &&
        tail == '\n') {
      passed = p;
      failed = f;
      continue;
    }
    printf("  | %s", line);
  }
  free(line);
  fclose(in);

  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
  }
  if (passed >= 0) {
    harness_passes += passed;
    harness_fails += failed;
  }
  if (WIFSIGNALED(wstatus)) {
    CHECKF(!WIFSIGNALED(wstatus), "child %s killed by signal %d", name,
           WTERMSIG(wstatus));
  } else if (passed < 0) {
    CHECKF(passed >= 0, "child %s printed no summary (exit %d)", name,
           WEXITSTATUS(wstatus));
  } else if (failed == 0) {
    CHECKF(WEXITSTATUS(wstatus) == 0, "child %s exited %d with no failed check",
           name, WEXITSTATUS(wstatus));
  }
  fflush(stdout);
}
