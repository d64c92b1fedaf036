// A failing rank ends every rank within seconds, with its message: for an
// exception, a bad-input error, a non-zero return and a rank killed outright;
// a job of one process prints its message alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using testing::run_tool;

testing::ToolResult run_probe(int ranks, int fail_rank, const std::string& mode) {
  return run_tool(std::string(TPS_MPIEXEC) + " -np " + std::to_string(ranks) + " " +
                  tps::test_paths::mpi_failure_probe + " " + std::to_string(fail_rank) + " " + mode);
}

constexpr double kPromptly = 15.0;     // seconds; a hang would hit the CTest timeout
constexpr double kAgreeSeconds = 2.0;  // MpiSession::kAgreeSeconds: how long end_job may wait for the others

TEST(MpiFailure, ExceptionOnOneRankEndsAllWithItsMessage) {
  auto r = run_probe(3, 1, "throw");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("tps: rank 1 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("internal error: probe: deliberate failure"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(MpiFailure, LoneFailureEndsTheJobPromptly) {
  // A failure the other ranks do not share ends the job without waiting
  // kAgreeSeconds for them to fail too, for each kind of failure and either
  // rank. It takes kQuietSeconds and mpirun's teardown: ~0.2 s more on a
  // quiet machine, over a second seen in CI, so the bound is the wait itself.
  const std::string stamp = ::testing::TempDir() + "tps-failure-" + std::to_string(getpid()) + ".stamp";
  for (const auto& [rank, mode] : {std::pair{1, "throw"}, std::pair{0, "input"}, std::pair{1, "return"}}) {
    std::remove(stamp.c_str());
    auto r = run_tool(std::string(TPS_MPIEXEC) + " -q -np 2 " + tps::test_paths::mpi_failure_probe + " " +
                      std::to_string(rank) + " " + mode + " " + stamp);
    const double ended = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    double failed = 0;
    ASSERT_TRUE(std::ifstream(stamp) >> failed) << r.err;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("tps: rank " + std::to_string(rank) + " on "), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_LT(ended - failed, kAgreeSeconds) << mode << " on rank " << rank << ": " << r.err;
  }
  std::remove(stamp.c_str());
}

TEST(MpiFailure, InputErrorKeepsExitCode2) {
  auto r = run_probe(2, 0, "input");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tps: rank 0 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("probe: bad input on purpose"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(MpiFailure, InputErrorOnEveryRankIsSaidOnce) {
  // Bad input every rank sees: one line, no abort notice (mpirun -q keeps
  // mpirun's own remark on the exit code out), the input error's code.
  auto r = run_tool(std::string(TPS_MPIEXEC) + " -q -np 3 " + tps::test_paths::mpi_failure_probe + " -1 input");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "tps: probe: bad input on purpose\n");
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(MpiFailure, NonZeroReturnEndsAll) {
  auto r = run_probe(4, 3, "return");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("tps: rank 3 on "), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(MpiFailure, OneProcessPrintsOneLine) {
  // Started without mpiexec (a singleton): the message is all of stderr.
  auto r = run_tool(std::string(tps::test_paths::mpi_failure_probe) + " 0 input");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, "tps: probe: bad input on purpose\n");
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(MpiFailure, KilledRankEndsAll) {
  auto r = run_probe(2, 1, "kill");
  EXPECT_NE(r.exit_code, 0);
  // mpirun names the rank that died and the signal.
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

}  // namespace
}  // namespace tps
