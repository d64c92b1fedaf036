// Runs a program of ours as a user would, capturing its exit code, stdout
// and stderr, and the wall time it took.
#pragma once

#include <string>

namespace tps::testing {

struct ToolResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// command is run by /bin/sh; stdout and stderr are captured separately.
ToolResult run_tool(const std::string& command);

}  // namespace tps::testing
