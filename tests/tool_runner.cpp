#include "tests/tool_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tps::testing {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

ToolResult run_tool(const std::string& command) {
  char dir_template[] = "/tmp/tps-tool-XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::string out = dir + "/out", err = dir + "/err";
  auto t0 = std::chrono::steady_clock::now();
  int status = std::system(("(" + command + ") > " + out + " 2> " + err + " < /dev/null").c_str());
  ToolResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir.c_str());
  return r;
}

}  // namespace tps::testing
