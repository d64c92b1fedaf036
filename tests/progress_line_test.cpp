// A long job's progress line: redrawn in place on a terminal, and on
// anything else (a log file, a pipe) a line of its own every 10%, never a
// carriage return.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "launch/progress_line.h"
#include "tests/temp_path.h"

namespace tps {
namespace {

TEST(ProgressLine, ALogGetsALineEveryTenPercent) {
  const std::string path = testing::temp_path("progress.log");
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  ASSERT_NE(std::freopen(path.c_str(), "w", stderr), nullptr);
  {
    ProgressLine progress("writing");
    for (int done = 0; done <= 1000; ++done) progress.update(done, 1000);
  }
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  const std::string log = text.str();
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 11) << log;
  EXPECT_NE(log.find("writing:  50% of 0.0 MB"), std::string::npos) << log;
  EXPECT_NE(log.find("writing: 100% of"), std::string::npos) << log;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tps
