/*
 * report.h - collecting check results, printing them for people and writing
 * them as JSON (report.c). Used by the runner only; checks go through
 * harness.h.
 *
 * Two modes. In the process that runs the whole conformance run, results are
 * collected here: failures print when they first happen, repeats of one rule
 * at one place collapse into a count, and the summary and --json come at the
 * end. In a child process that runs one test (--run-test), every result is
 * written as a record line to a pipe of its own (record_fd) instead, and
 * the parent feeds those lines back in with conf_report_ingest. Records are
 * lines that start with "@@conf\t"; what a child prints on stdout and
 * stderr is the plugin's own output and never parsed.
 *
 * Thread contract: main thread only, except conf_report_crash_summary, which
 * is async-signal-safe.
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_REPORT_H_
#define SIMDEV_TESTS_CONFORMANCE_REPORT_H_

#include <stddef.h>

#include "harness.h"

typedef struct conf_report_config {
  int child;                    /* write records instead of collecting */
  int record_fd;                /* where a child writes them */
  int simdev;                   /* simdev failures fail the run */
  int strict;                   /* recommended failures fail the run */
  const conf_rule* const* const* tables; /* NULL-ended list of rule tables */
} conf_report_config;

/* What the JSON and the summary say about the plugin. */
typedef struct conf_report_meta {
  const char* plugin;        /* as given */
  const char* platform_name; /* NULL if registration failed */
  const char* platform_type;
  int device_count; /* -1: get_device_count was never called */
  int devices_tested;
} conf_report_meta;

void conf_report_init(const conf_report_config* config);
/* Finds a rule by id in the configured tables; NULL if unknown. */
const conf_rule* conf_report_find_rule(const char* id);

/* While quiet, results are dropped: a test's process registers the plugin
 * again, and those checks were already counted once, in the run's process
 * (the test's process then checks only that registration worked again). */
void conf_report_quiet(int quiet);

void conf_report_test_begin(const char* name);
/* Ends the running test and prints its verdict line. */
void conf_report_test_end(void);
/* Ends the running test as crashed ("crash") or hung ("timeout"): one
 * required failure of rule "<test>.finishes" with `observed`. */
void conf_report_test_abort(const char* status, const char* observed);
/* Feeds one line of a child's output; returns 1 if it was a record. */
int conf_report_ingest(const char* line);

/* 1 if the run failed (a failure of a grade that fails runs). */
int conf_report_run_failed(void);
void conf_report_print_summary(const conf_report_meta* meta);
/* Writes the JSON document (schema 1, docs/conformance.md). 0 on success. */
int conf_report_write_json(const char* path, const conf_report_meta* meta);
/* Writes v in decimal into buf at `at` (at most up to cap) and returns the
 * new end: async-signal-safe, for crash handlers and between fork and exec. */
size_t conf_put_num(char* buf, size_t at, size_t cap, long v);
/* The counts so far, to fd: for a crash handler. */
void conf_report_crash_summary(int fd);

#endif /* SIMDEV_TESTS_CONFORMANCE_REPORT_H_ */
