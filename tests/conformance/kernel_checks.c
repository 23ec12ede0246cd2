/*
 * kernel_checks.c - checks of a plugin's kernel registrations (TF_InitKernel)
 * through TF's C API. Being written (issue 12); until then there are no
 * kernel tests and no kernel rules.
 */
#include "conformance.h"

#define KERNEL_RULES(X)
CONF_RULES(conf_kernel_rules, KERNEL_RULES)

const harness_test conf_kernel_tests[] = {
    {NULL, NULL, 0},
};
