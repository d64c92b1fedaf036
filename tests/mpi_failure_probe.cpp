// A program that fails on purpose on one rank while the others wait in a
// collective, to test that a failing rank ends the whole job promptly.
//   mpi_failure_probe RANK throw|input|return|kill [STAMP]   (RANK -1: every rank)
// STAMP: a file the failing rank writes the time it fails to (seconds of
// CLOCK_MONOTONIC, the clock of std::chrono::steady_clock).
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "runtime/error.h"
#include "runtime/mpi_session.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 64;
  int fail_rank = std::atoi(argv[1]);
  std::string mode = argv[2];
  const std::string stamp = argc == 4 ? argv[3] : "";
  return tps::run_on_all_ranks(argc, argv, [&](tps::MpiSession& mpi) {
    if (mpi.rank() == fail_rank || fail_rank == -1) {
      if (!stamp.empty()) {
        timespec now{};
        clock_gettime(CLOCK_MONOTONIC, &now);
        std::ofstream(stamp) << now.tv_sec << "." << std::to_string(now.tv_nsec + 1000000000).substr(1);
      }
      if (mode == "throw") throw std::runtime_error("probe: deliberate failure");
      if (mode == "input") throw tps::InputError("probe: bad input on purpose");
      if (mode == "return") return 3;
      if (mode == "kill") raise(SIGKILL);
    }
    // The others wait for the failed rank, which never arrives.
    MPI_Barrier(mpi.world());
    return 0;
  });
}
