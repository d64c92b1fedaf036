# Test registration helpers. Every test is a GoogleTest binary run through CTest.
#
#   tps_add_gtest(NAME name SOURCES a.cpp ... LIBS lib ... [LABELS l ...] [FIXTURES f ...])
#       one process; each TEST() becomes its own CTest entry. FIXTURES names
#       CTest fixtures its tests need (test_models: the synthetic models).
#   tps_add_mpi_gtest(NAME name SOURCES ... LIBS ... RANKS 2 3 4 [LABELS ...])
#       the same binary run under `mpirun -np K --oversubscribe` for each K;
#       the binary links tests/mpi_gtest_main.cpp, which owns MPI init.
#   tps_add_mpi_command_test(NAME name RANKS K COMMAND exe args... [PASS_REGEX r] [FAIL_REGEX r] [TIMEOUT s])
#       an arbitrary program under mpirun, judged by exit code and output.

include(GoogleTest)
find_package(GTest REQUIRED)

# OpenMPI refuses to start as root unless told; CI machines run as root.
set(TPS_MPI_TEST_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Shared-memory runs on one node need no network probing.
    OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo)
list(JOIN TPS_MPI_TEST_ENV " " TPS_MPI_TEST_ENV_WORDS)
set(TPS_MPIEXEC ${MPIEXEC_EXECUTABLE} --oversubscribe)

# A sanitized build runs its tests 2-10x slower (ASan's checks, TSan's
# shadow state), on a CI machine that may be slower than ours: its time
# limits are this many times the release build's, so that a limit still
# catches a hang there and not a slow machine.
if(TPS_SANITIZE)
  set(TPS_TEST_TIMEOUT_SCALE 4)
else()
  set(TPS_TEST_TIMEOUT_SCALE 1)
endif()
math(EXPR TPS_GTEST_TIMEOUT "120 * ${TPS_TEST_TIMEOUT_SCALE}")

function(tps_add_gtest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS;FIXTURES" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} tps_test_support GTest::gtest_main)
  target_compile_definitions(${T_NAME} PRIVATE
    TPS_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data"
    # For tests that start mpirun themselves, with the MPI tests' environment.
    TPS_MPIEXEC="env ${TPS_MPI_TEST_ENV_WORDS} ${MPIEXEC_EXECUTABLE} --oversubscribe")
  gtest_discover_tests(${T_NAME} PROPERTIES TIMEOUT ${TPS_GTEST_TIMEOUT} DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests (CMake 3.25) flattens list-valued PROPERTIES, so a
  # second label would be read as a property name and swallow the ones after
  # it; labels and fixtures are set by a script CTest runs after the
  # discovered tests are added (it includes the files in this order).
  set(labels unit ${T_LABELS})
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_properties.cmake)
  file(WRITE ${script}
    "foreach(t IN LISTS ${T_NAME}_TESTS)\n"
    "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${labels}\" FIXTURES_REQUIRED \"${T_FIXTURES}\")\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

function(tps_add_mpi_gtest)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;RANKS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/mpi_gtest_main.cpp)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} tps_runtime tps_test_support GTest::gtest)
  target_compile_definitions(${T_NAME} PRIVATE TPS_TEST_DATA="${PROJECT_SOURCE_DIR}/tests/data")
  foreach(k IN LISTS T_RANKS)
    add_test(NAME ${T_NAME}.np${k}
             COMMAND ${TPS_MPIEXEC} -np ${k} $<TARGET_FILE:${T_NAME}>)
    set_tests_properties(${T_NAME}.np${k} PROPERTIES
      ENVIRONMENT "${TPS_MPI_TEST_ENV}" LABELS "mpi;${T_LABELS}" TIMEOUT ${TPS_GTEST_TIMEOUT})
  endforeach()
endfunction()

function(tps_add_mpi_command_test)
  cmake_parse_arguments(T "" "NAME;RANKS;PASS_REGEX;FAIL_REGEX;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${TPS_TEST_TIMEOUT_SCALE}")
  add_test(NAME ${T_NAME} COMMAND ${TPS_MPIEXEC} -np ${T_RANKS} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "${TPS_MPI_TEST_ENV}" LABELS "mpi;${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_PASS_REGEX)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGEX}")
  endif()
  if(T_FAIL_REGEX)
    set_tests_properties(${T_NAME} PROPERTIES FAIL_REGULAR_EXPRESSION "${T_FAIL_REGEX}")
  endif()
endfunction()
