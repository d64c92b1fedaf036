// main() for GoogleTest binaries run under mpirun: one MPI session for all
// tests; only rank 0 prints the report, and the exit code is the worst rank's.
#include <gtest/gtest.h>

#include "tests/mpi_test_env.h"

namespace tps::testing {
namespace {
const MpiSession* session = nullptr;
}
const MpiSession& mpi() { return *session; }
}  // namespace tps::testing

int main(int argc, char** argv) {
  tps::MpiSession mpi(&argc, &argv);
  tps::testing::session = &mpi;
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MAX, mpi.world());
  if (mpi.rank() == 0 && worst != local) std::fprintf(stderr, "a test failed on another rank (rank 0 passed)\n");
  return worst;
}
