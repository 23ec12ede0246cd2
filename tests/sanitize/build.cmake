# cmake -P script behind the test sanitize.build (see sanitize.cmake):
# configures the sanitized tree BIN from SRC if needed, then builds its
# sanitize_tests target. Fails (non-zero exit) on any configure or compile
# error, with the compiler's output in the test log.
foreach(v SRC BIN GENERATOR CC CXX JEMALLOC)
  if("${${v}}" STREQUAL "")
    message(FATAL_ERROR "build.cmake: -D${v}=... is required")
  endif()
endforeach()

set(args -S ${SRC} -B ${BIN} -G ${GENERATOR}
  -DSIMDEV_SANITIZE=ON -DSIMDEV_BUILD_TESTS=ON
  # -O1 with debug info: the optimisation ASan's documentation suggests
  # (readable stacks, quick to compile); set in CMakeLists for SIMDEV_SANITIZE.
  -DCMAKE_BUILD_TYPE=Debug
  -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX}
  -DSIMDEV_JEMALLOC_DIR=${JEMALLOC})
if(TF_DIR)
  list(APPEND args -DSIMDEV_TF_DIR=${TF_DIR})
endif()
if(PYTHON)
  list(APPEND args -DPython3_EXECUTABLE=${PYTHON})
endif()

# Configure once; later builds re-run CMake on their own when a
# CMakeLists.txt changes. A changed option (another TF) needs `make clean`.
# The Makefile, not CMakeCache.txt: CMake writes the cache even when the
# configure fails, and a failed configure must be retried next time.
if(NOT EXISTS ${BIN}/Makefile)
  execute_process(COMMAND ${CMAKE_COMMAND} ${args} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configuring the sanitized tree ${BIN} failed")
  endif()
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} --build ${BIN} --target sanitize_tests -j 2
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the sanitized tests in ${BIN} failed")
endif()
