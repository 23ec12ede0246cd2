# simdev_c_test: one C test executable registered in its variants (plain,
# ASan + UBSan, memcheck, helgrind), the same way in tests/unit, tests/xla,
# tests/profiler and tests/conformance. Included by sanitize.cmake, before
# it returns in the sanitized tree, so both trees have the function.
#
#   simdev_c_test(<name> <target> [ARGS <arg>...]
#     [LABELS <label>...] [TIMEOUT <s>]         the plain test <name>
#     [NO_ASAN] [ASAN_ARGS <arg>...]            <name>.asan
#     [NO_VALGRIND] [VALGRIND_NAME <n>]         <n>.memcheck, <n>.helgrind
#     [MEMCHECK_ARGS <arg>...] [HELGRIND_ARGS <arg>...]
#     [VALGRIND_OPTIONS <opt>...] [MEMCHECK_OPTIONS <opt>...]
#     [VALGRIND_ENVIRONMENT <var=value>...] [VALGRIND_TIMEOUT <s>])
#
# plain     <target> ARGS; LABELS (default none), TIMEOUT (default 300).
# .asan     in the normal tree, with the sanitized tree configured
#           (SIMDEV_SANITIZE_DIR): the sanitized build of <target>, at the
#           same place below that tree, through SIMDEV_SANITIZE_RUN, with
#           ASAN_ARGS (default ARGS); labels sanitize, after the fixture
#           sanitize (sanitize.build), timeout 600. In the sanitized tree
#           the target joins sanitize_tests (what sanitize.build builds).
# valgrind  with valgrind found and not in the sanitized tree (valgrind
#           cannot run ASan binaries): memcheck (full leak check; definite
#           and indirect leaks fail) and helgrind, either error fails,
#           python/simdev/valgrind.supp always, VALGRIND_OPTIONS for both
#           and MEMCHECK_OPTIONS for memcheck before the executable, then
#           MEMCHECK_ARGS / HELGRIND_ARGS (default ARGS); labels valgrind,
#           VALGRIND_TIMEOUT (default 900), VALGRIND_ENVIRONMENT.
# Properties set afterwards with set_tests_properties replace these (as
# unit.discrete's labels do).

find_program(SIMDEV_VALGRIND valgrind)

function(simdev_c_test name target)
  cmake_parse_arguments(PARSE_ARGV 2 T "NO_ASAN;NO_VALGRIND"
    "TIMEOUT;VALGRIND_NAME;VALGRIND_TIMEOUT"
    "ARGS;LABELS;ASAN_ARGS;MEMCHECK_ARGS;HELGRIND_ARGS;VALGRIND_OPTIONS;MEMCHECK_OPTIONS;VALGRIND_ENVIRONMENT")
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "simdev_c_test(${name}): unknown ${T_UNPARSED_ARGUMENTS}")
  endif()
  foreach(v ASAN_ARGS MEMCHECK_ARGS HELGRIND_ARGS)
    if(NOT DEFINED T_${v})
      set(T_${v} ${T_ARGS})
    endif()
  endforeach()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_VALGRIND_NAME)
    set(T_VALGRIND_NAME ${name})
  endif()
  if(NOT T_VALGRIND_TIMEOUT)
    set(T_VALGRIND_TIMEOUT 900)
  endif()

  add_test(NAME ${name} COMMAND ${target} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()

  if(NOT T_NO_ASAN)
    if(SIMDEV_SANITIZE) # the sanitized tree: build, the normal tree runs it
      add_dependencies(sanitize_tests ${target})
    elseif(SIMDEV_SANITIZE_DIR)
      get_target_property(dir ${target} BINARY_DIR)
      file(RELATIVE_PATH dir ${CMAKE_BINARY_DIR} ${dir})
      add_test(NAME ${name}.asan
        COMMAND ${SIMDEV_SANITIZE_RUN} ${SIMDEV_SANITIZE_DIR}/${dir}/${target}
                ${T_ASAN_ARGS})
      set_tests_properties(${name}.asan PROPERTIES
        LABELS sanitize FIXTURES_REQUIRED sanitize TIMEOUT 600)
    endif()
  endif()

  if(NOT T_NO_VALGRIND AND SIMDEV_VALGRIND AND NOT SIMDEV_SANITIZE)
    set(supp --suppressions=${CMAKE_SOURCE_DIR}/python/simdev/valgrind.supp)
    set(vg ${T_VALGRIND_NAME})
    add_test(NAME ${vg}.memcheck
      COMMAND ${SIMDEV_VALGRIND} --tool=memcheck --error-exitcode=1
        --leak-check=full --errors-for-leak-kinds=definite,indirect
        --track-origins=no ${T_MEMCHECK_OPTIONS} ${T_VALGRIND_OPTIONS} ${supp}
        $<TARGET_FILE:${target}> ${T_MEMCHECK_ARGS})
    add_test(NAME ${vg}.helgrind
      COMMAND ${SIMDEV_VALGRIND} --tool=helgrind --error-exitcode=1
        ${T_VALGRIND_OPTIONS} ${supp}
        $<TARGET_FILE:${target}> ${T_HELGRIND_ARGS})
    set_tests_properties(${vg}.memcheck ${vg}.helgrind PROPERTIES
      LABELS valgrind TIMEOUT ${T_VALGRIND_TIMEOUT})
    if(T_VALGRIND_ENVIRONMENT)
      set_tests_properties(${vg}.memcheck ${vg}.helgrind PROPERTIES
        ENVIRONMENT "${T_VALGRIND_ENVIRONMENT}")
    endif()
  endif()
endfunction()
