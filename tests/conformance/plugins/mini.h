/*
 * mini.h - the seam between mini.c and its mutants (test builds only).
 *
 * A mutant plugin is mini.c linked with one mutant_<name>.c that defines
 * mini_mutate. Nothing here is part of the plugin's ABI: both symbols are
 * hidden, only SE_InitPlugin leaves the library.
 */
#ifndef SIMDEV_TESTS_CONFORMANCE_PLUGINS_MINI_H_
#define SIMDEV_TESTS_CONFORMANCE_PLUGINS_MINI_H_

#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

/* Called last in SE_InitPlugin when a mutant defines it (a weak reference
 * in mini.c, so a plain build has none). It may replace entries of
 * params->platform and params->platform_fns, and set mini_mutate_se. */
void mini_mutate(SE_PlatformRegistrationParams* params);

/* When set, called last in create_stream_executor with the filled table:
 * the stream executor is created after SE_InitPlugin returned, so this is
 * where a mutant replaces its callbacks. Written only by mini_mutate (on
 * TF's loading thread, before any stream executor exists). */
extern void (*mini_mutate_se)(SP_StreamExecutor* se);

#endif /* SIMDEV_TESTS_CONFORMANCE_PLUGINS_MINI_H_ */
