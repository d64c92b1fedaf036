// A rank of a split run that fails ends every rank promptly with its
// message, whatever it failed at: a bad model file on one rank (as on one
// host of several), memory it cannot get, a rank killed while the others wait
// for it in an exchange. Each rank here is started by mpirun's MPMD form
// (`A : B`), so one rank can be given different input from the other.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/test_models.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

using testing::run_tool;

constexpr double kPromptly = 15.0;  // seconds; a hang would hit the CTest timeout

using testing::model_path;

// Two ranks: rank 0 runs `good`, rank 1 runs `bad` (both tpsrun argument
// lists, or a shell command for rank 1 when bad starts with "sh ").
testing::ToolResult run_pair(const std::string& good, const std::string& bad) {
  return run_tool(std::string(TPS_MPIEXEC) + " -np 1 " + tps::test_paths::tpsrun + " " + good + " : -np 1 " +
                  (bad.starts_with("sh ") ? bad : std::string(tps::test_paths::tpsrun) + " " + bad));
}

TEST(SplitFailure, BadFileOnOneRank) {
  const std::string args = " -p 'Hello' -n 8 --temp 0";
  auto r = run_pair("-m " + model_path("small") + args, "-m /no/such/model.gguf" + args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tpsrun: rank 1 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/no/such/model.gguf: cannot open"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // nothing that looks like a result
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(SplitFailure, TruncatedFileOnOneRank) {
  const std::string cut = ::testing::TempDir() + "tps-truncated.gguf";
  {
    std::ifstream in(model_path("small"), std::ios::binary);
    std::string head(1 << 20, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(cut, std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
  }
  const std::string args = " -p 'Hello' -n 8 --temp 0";
  auto r = run_pair("-m " + model_path("small") + args, "-m " + cut + args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tpsrun: rank 1 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(SplitFailure, OutOfMemoryOnOneRank) {
  // Rank 1 may map little more than the program and MPI themselves (300 MB
  // of address space): its model cannot be loaded.
  const std::string args = " -m " + model_path("small") + " -p 'Hello' -n 8 --temp 0";
  auto r = run_pair(args, "sh -c 'ulimit -v 300000; exec " + std::string(tps::test_paths::tpsrun) + args + "'");
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tpsrun: rank 1 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("memory"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, kPromptly);
}

TEST(SplitFailure, KilledRankDuringGeneration) {
  // Rank 1 writes its pid and generates for long; once rank 0 has printed
  // some text, rank 1 is killed. Rank 0 waits in an exchange with it and
  // must end too.
  const std::string pid_file = ::testing::TempDir() + "tps-rank1.pid";
  std::remove(pid_file.c_str());
  const std::string args =
      " -m " + model_path("small") + " -p 'Once upon a time' -n 100000 --ctx 100100 --temp 1 --seed 1";
  auto killer = std::thread([&] {
    for (int i = 0; i < 200; ++i) {  // up to 20 s for the job to start
      std::ifstream in(pid_file);
      int pid = 0;
      if (in >> pid && pid > 0) {
        std::this_thread::sleep_for(std::chrono::seconds(2));  // well into generation
        kill(pid, SIGKILL);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto r =
      run_pair(args, "sh -c 'echo $$ > " + pid_file + "; exec " + std::string(tps::test_paths::tpsrun) + args + "'");
  killer.join();
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("generated"), std::string::npos) << r.err;  // no stats line
  EXPECT_LT(r.seconds, 2 + kPromptly);
}

}  // namespace
}  // namespace tps
