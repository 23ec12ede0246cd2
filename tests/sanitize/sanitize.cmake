# ASan + UBSan runs of the C tests (the device_sim unit tests, the DLPack
# unit test, the conformance harness), part of ctest and so of `make test`.
# Included by the top-level CMakeLists.txt.
#
# Design: a second build tree, build/sanitize, configured with
# -DSIMDEV_SANITIZE=ON (every target compiled and linked with
# -fsanitize=address,undefined -fno-sanitize-recover=all). Only the target
# sanitize_tests is built there: the unit test binaries, the conformance
# harness and the plugin it dlopens. The harness and libsimdev.so must both
# be sanitized builds (ASan's runtime must come first in the executable, and
# the plugin's own code is what we want checked); jemalloc (linked into the
# plugin), OpenBLAS, hwloc and libtensorflow_framework.so.2 stay
# uninstrumented, and ASan still checks their malloc/free.
#
# In the normal tree, the test sanitize.build configures and builds that
# tree (incrementally: after the first time only changed files compile), and
# the tests named *.asan, registered next to the normal ones by
# simdev_c_test (c_test.cmake) in tests/unit, tests/xla and
# tests/conformance, run its binaries through SIMDEV_SANITIZE_RUN (`cmake -E
# env` with the sanitizer options, so `ctest -V` shows a command line to
# paste, then run.sh, which turns address-space randomisation off: see
# there). Any ASan, UBSan or LeakSanitizer report ends the process with a
# non-zero status and fails the test. Run them alone with
# `ctest --test-dir build -L sanitize`.
#
# Needs gcc's libasan and libubsan, which Debian's build-essential brings
# (gcc-12 -> libgcc-12-dev -> libasan8, libubsan1).

# simdev_c_test, which registers a C test's .asan variant (and its plain
# and valgrind ones), in both trees.
include(${CMAKE_CURRENT_LIST_DIR}/c_test.cmake)

if(SIMDEV_SANITIZE)
  # Inside the sanitized tree: what the driver builds.
  add_custom_target(sanitize_tests)
  return()
endif()

set(SIMDEV_SANITIZE_DIR "${CMAKE_BINARY_DIR}/sanitize")
set(SIMDEV_SANITIZE_RUN ${CMAKE_COMMAND} -E env
  # halt_on_error: the first report ends the run (the default for ASan;
  # stated so a local ASAN_OPTIONS cannot turn it off unnoticed).
  "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_string_checks=1:detect_stack_use_after_return=1"
  "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
  "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0"
  sh ${CMAKE_CURRENT_LIST_DIR}/run.sh)

add_test(NAME sanitize.build
  COMMAND ${CMAKE_COMMAND}
    -DSRC=${CMAKE_SOURCE_DIR} -DBIN=${SIMDEV_SANITIZE_DIR}
    -DGENERATOR=${CMAKE_GENERATOR}
    -DCC=${CMAKE_C_COMPILER} -DCXX=${CMAKE_CXX_COMPILER}
    -DJEMALLOC=${SIMDEV_JEMALLOC_DIR} -DTF_DIR=${SIMDEV_TF_DIR}
    -DPYTHON=${Python3_EXECUTABLE}
    -P ${CMAKE_CURRENT_LIST_DIR}/build.cmake)
set_tests_properties(sanitize.build PROPERTIES
  FIXTURES_SETUP sanitize LABELS sanitize TIMEOUT 1800
  # It compiles with -j2: keep ctest -j2 from running a test beside it.
  PROCESSORS 2)
