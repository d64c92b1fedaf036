// Where the tests find this build tree's programs, models and data, and the
// source tree's test data and reference scripts. The values are compiled in
// one source cmake writes (test_paths.cpp.in), not passed as -D on every
// test's compile line: compile lines that hold no absolute path of the tree
// are the same in every clone, so ccache shares their objects between a
// developer's checkout and CI's fresh clone of it (CMakeLists.txt,
// TPS_CCACHE).
#pragma once

namespace tps::test_paths {

// Plain constants, so that other sources' static initializers may use them.
extern const char* const data;       // tests/data
extern const char* const models;     // the synthetic models (the test_models fixture)
extern const char* const reference;  // tests/reference: the Node scripts and their packages
extern const char* const tpsrun;
extern const char* const tpstopo;
extern const char* const tps_mkmodel;
extern const char* const mpi_failure_probe;
extern const char* const slow_fdopen;  // a preload that holds every fdopen 200 ms (output_file_test)

}  // namespace tps::test_paths
