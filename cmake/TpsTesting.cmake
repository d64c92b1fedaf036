# Test registration helpers. Every test is a GoogleTest binary or a program
# run through CTest.
#
#   tps_add_gtest(NAME name SOURCES a.cpp ... LIBS lib ... [LABELS l ...] [FIXTURES f ...]
#                 [PROCESSORS n] [SLOW] SANITIZERS)
#       one process; each TEST() becomes its own CTest entry. FIXTURES names
#       CTest fixtures its tests need (test_models: the synthetic models).
#       PROCESSORS: the cores one of its tests keeps busy (a test that starts
#       tpsrun under mpirun -np 4: 4), so that ctest -j never runs more
#       ranks than cores (waiting ranks spin: oversubscribed, they starve
#       the rank they wait for).
#   tps_add_mpi_gtest(NAME name SOURCES ... LIBS ... RANKS 2 3 4 [LABELS ...] [FIXTURES f ...] [SLOW] SANITIZERS)
#       the same binary run under `mpirun -np K --oversubscribe` for each K;
#       the binary links tests/mpi_gtest_main.cpp, which owns MPI init.
#   tps_add_mpi_command_test(NAME name RANKS K COMMAND exe args... [PASS_REGEX r] [FAIL_REGEX r]
#                            [TIMEOUT s] SANITIZERS)
#       an arbitrary program under mpirun, judged by exit code and output.
#   tps_sanitizers(TESTS name ... SANITIZERS)
#       the same declaration for tests registered with add_test.
#
# Cost, as labels: `slow` (a test of the binary takes over ~10 s alone) or
# `fast`, beside how it runs (unit, mpi, reference, numa): ctest -L fast is
# the quick loop.
#
# SANITIZERS -- which sanitizer stages run a test (scripts/sanitize), declared
# where it is registered; one of the two forms is required, and
# tps_check_sanitizer_declarations() fails the configure step when a test
# has neither, so a new test cannot be silently left out:
#   SANITIZE address thread ... [SANITIZE_SKIP regex "why"] [RUNS target ...]
#       the stages whose build runs it (label sanitize:address, ...); a
#       gtest binary may leave the tests whose names match regex to the
#       release build, saying why; RUNS names the programs a plain test runs
#       (built by the stage's target, sanitize_address or sanitize_thread).
#   NOT_SANITIZED "why"
#       none, and why.

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

# The keywords of a sanitizer declaration, for each helper's
# cmake_parse_arguments (prefix T).
set(TPS_SANITIZER_ONE_VALUE NOT_SANITIZED)
set(TPS_SANITIZER_MULTI_VALUE SANITIZE SANITIZE_SKIP RUNS)

# Reads the caller's parsed declaration (T_SANITIZE, ...): sets SAN_LABELS
# to the labels of its tests that run under a sanitizer and SAN_SKIP to the
# regex of those left out, and records the targets each stage builds.
macro(tps_parse_sanitizers owner target)
  set(S_SANITIZE ${T_SANITIZE})
  set(S_NOT_SANITIZED ${T_NOT_SANITIZED})
  set(S_SANITIZE_SKIP ${T_SANITIZE_SKIP})
  set(S_RUNS ${T_RUNS})
  if(NOT S_SANITIZE AND NOT S_NOT_SANITIZED)
    message(FATAL_ERROR "${owner}: declare SANITIZE <address|thread ...> or NOT_SANITIZED \"why\" "
                        "(cmake/TpsTesting.cmake)")
  endif()
  set(SAN_LABELS "")
  set(SAN_SKIP "")
  foreach(san IN LISTS S_SANITIZE)
    if(NOT san MATCHES "^(address|thread)$")
      message(FATAL_ERROR "${owner}: SANITIZE ${san}: expected address or thread")
    endif()
    list(APPEND SAN_LABELS sanitize:${san})
    set_property(GLOBAL APPEND PROPERTY TPS_SANITIZE_TARGETS_${san} ${target} ${S_RUNS})
  endforeach()
  if(S_SANITIZE_SKIP)
    list(LENGTH S_SANITIZE_SKIP n)
    if(NOT n EQUAL 2)
      message(FATAL_ERROR "${owner}: SANITIZE_SKIP takes a regex and the reason it is skipped (no ';' in either)")
    endif()
    list(GET S_SANITIZE_SKIP 0 SAN_SKIP)
  endif()
endmacro()

function(tps_add_gtest)
  cmake_parse_arguments(T "SLOW" "NAME;PROCESSORS;${TPS_SANITIZER_ONE_VALUE}"
                        "SOURCES;LIBS;LABELS;FIXTURES;${TPS_SANITIZER_MULTI_VALUE}" ${ARGN})
  tps_parse_sanitizers(${T_NAME} ${T_NAME})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} tps_test_support GTest::gtest_main)
  # For tests that start mpirun themselves, with the MPI tests' environment.
  target_compile_definitions(${T_NAME} PRIVATE
    TPS_MPIEXEC="env ${TPS_MPI_TEST_ENV_WORDS} ${MPIEXEC_EXECUTABLE} --oversubscribe")
  # NO_PRETTY_VALUES: a parametrized case is named by its name generator
  # alone ("Modes/Split.SameTokensAsOneRank/tiny_tensor"), without gtest's
  # "  # GetParam() = ..." -- a name with spaces that ctest's cost data
  # cannot keep, so those cases (the longest, some) started last every run.
  gtest_discover_tests(${T_NAME} NO_PRETTY_VALUES PROPERTIES TIMEOUT ${TPS_GTEST_TIMEOUT} DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests (CMake 3.25) flattens list-valued PROPERTIES, so a
  # second label would be read as a property name and swallow the ones after
  # it; labels, fixtures and costs are set by a script CTest runs after the
  # discovered tests are added (it includes the files in this order).
  if(T_SLOW)
    set(labels unit ${T_LABELS} slow)
  else()
    set(labels unit ${T_LABELS} fast)
  endif()
  if(NOT T_PROCESSORS)
    set(T_PROCESSORS 1)
  endif()
  string(REPLACE "\\" "\\\\" skip "${SAN_SKIP}")  # as a quoted argument of the script below
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_properties.cmake)
  file(WRITE ${script}
    "foreach(t IN LISTS ${T_NAME}_TESTS)\n"
    "  set(labels \"${labels}\")\n"
    "  if(\"${skip}\" STREQUAL \"\" OR NOT t MATCHES \"${skip}\")\n"
    "    list(APPEND labels ${SAN_LABELS})\n"
    "  endif()\n"
    "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"\${labels}\" FIXTURES_REQUIRED \"${T_FIXTURES}\"\n"
    "                      PROCESSORS ${T_PROCESSORS})\n"
    "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()

function(tps_add_mpi_gtest)
  cmake_parse_arguments(T "SLOW" "NAME;${TPS_SANITIZER_ONE_VALUE}"
                        "SOURCES;LIBS;RANKS;LABELS;FIXTURES;${TPS_SANITIZER_MULTI_VALUE}" ${ARGN})
  tps_parse_sanitizers(${T_NAME} ${T_NAME})
  add_executable(${T_NAME} ${T_SOURCES} ${PROJECT_SOURCE_DIR}/tests/mpi_gtest_main.cpp)
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} tps_runtime tps_test_support GTest::gtest)
  set(cost fast)
  if(T_SLOW)
    set(cost slow)
  endif()
  foreach(k IN LISTS T_RANKS)
    add_test(NAME ${T_NAME}.np${k}
             COMMAND ${TPS_MPIEXEC} -np ${k} $<TARGET_FILE:${T_NAME}>)
    set_tests_properties(${T_NAME}.np${k} PROPERTIES
      ENVIRONMENT "${TPS_MPI_TEST_ENV}" LABELS "mpi;${T_LABELS};${cost};${SAN_LABELS}"
      TIMEOUT ${TPS_GTEST_TIMEOUT} PROCESSORS ${k})
    if(T_FIXTURES)
      set_tests_properties(${T_NAME}.np${k} PROPERTIES FIXTURES_REQUIRED "${T_FIXTURES}")
    endif()
    set_property(TEST ${T_NAME}.np${k} PROPERTY TPS_SANITIZERS_DECLARED TRUE)
  endforeach()
endfunction()

function(tps_add_mpi_command_test)
  cmake_parse_arguments(T "" "NAME;RANKS;PASS_REGEX;FAIL_REGEX;TIMEOUT;${TPS_SANITIZER_ONE_VALUE}"
                        "COMMAND;LABELS;${TPS_SANITIZER_MULTI_VALUE}" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${TPS_TEST_TIMEOUT_SCALE}")
  add_test(NAME ${T_NAME} COMMAND ${TPS_MPIEXEC} -np ${T_RANKS} ${T_COMMAND})
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "${TPS_MPI_TEST_ENV}" LABELS "mpi;fast;${T_LABELS}" TIMEOUT ${T_TIMEOUT} PROCESSORS ${T_RANKS})
  if(T_PASS_REGEX)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGEX}")
  endif()
  if(T_FAIL_REGEX)
    set_tests_properties(${T_NAME} PROPERTIES FAIL_REGULAR_EXPRESSION "${T_FAIL_REGEX}")
  endif()
  tps_declare_sanitizers(${T_NAME})
endfunction()

function(tps_sanitizers)
  cmake_parse_arguments(T "" "${TPS_SANITIZER_ONE_VALUE}" "TESTS;${TPS_SANITIZER_MULTI_VALUE}" ${ARGN})
  tps_declare_sanitizers(${T_TESTS})
endfunction()

# The caller's parsed declaration, given to the tests named.
macro(tps_declare_sanitizers)
  tps_parse_sanitizers("${ARGN}" "")
  foreach(t IN ITEMS ${ARGN})
    set_property(TEST ${t} APPEND PROPERTY LABELS ${SAN_LABELS})
    set_property(TEST ${t} PROPERTY TPS_SANITIZERS_DECLARED TRUE)
  endforeach()
endmacro()

# Fails the configure step when a test of this directory has no sanitizer
# declaration; then makes each stage's target (sanitize_address,
# sanitize_thread): every binary its tests run.
# What a sanitizer's report starts with (ASan, LSan, TSan; UBSan's
# "file:line:col: runtime error:").
set(TPS_SANITIZER_REPORT "ERROR: AddressSanitizer" "ERROR: LeakSanitizer" "WARNING: ThreadSanitizer"
    "ThreadSanitizer: " "runtime error: ")

function(tps_check_sanitizer_declarations)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_property(declared TEST ${t} PROPERTY TPS_SANITIZERS_DECLARED)
    if(NOT declared)
      message(FATAL_ERROR "test ${t}: no sanitizer declaration: add tps_sanitizers(TESTS ${t} SANITIZE ... | "
                          "NOT_SANITIZED \"why\") where it is registered (cmake/TpsTesting.cmake)")
    endif()
    # A test that passes on a printed line has its exit code ignored by
    # CTest: a sanitizer's report printed after that line (at teardown, in
    # MPI_Finalize) must fail it all the same.
    get_property(pass TEST ${t} PROPERTY PASS_REGULAR_EXPRESSION)
    if(pass)
      get_property(fail TEST ${t} PROPERTY FAIL_REGULAR_EXPRESSION)
      list(APPEND fail ${TPS_SANITIZER_REPORT})
      set_property(TEST ${t} PROPERTY FAIL_REGULAR_EXPRESSION ${fail})
    endif()
  endforeach()
  foreach(san address thread)
    get_property(targets GLOBAL PROPERTY TPS_SANITIZE_TARGETS_${san})
    list(REMOVE_ITEM targets "")
    list(REMOVE_DUPLICATES targets)
    add_custom_target(sanitize_${san} DEPENDS ${targets})
    # The fixtures only tests outside the stage set up (llama.cpp's
    # quantized files): the stage leaves them out (ctest -FA) instead of
    # pulling their setup in for the tests that require them.
    set(fixtures "")
    foreach(t IN LISTS tests)
      get_property(labels TEST ${t} PROPERTY LABELS)
      get_property(setup TEST ${t} PROPERTY FIXTURES_SETUP)
      if(setup AND NOT "sanitize:${san}" IN_LIST labels)
        list(APPEND fixtures ${setup})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES fixtures)
    list(JOIN fixtures "|" fixtures)
    file(WRITE ${CMAKE_BINARY_DIR}/sanitize_${san}_fixtures_excluded.txt "^(${fixtures})$\n")
  endforeach()
endfunction()
