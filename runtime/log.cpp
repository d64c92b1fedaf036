#include "runtime/log.h"

#include <cstdio>

namespace tps {
namespace {
// Process-wide by nature (there is one stderr): how loud to be and who we are.
struct LogState {
  std::string tool = "tps";
  LogLevel level = LogLevel::info;
  int rank = 0;
};
LogState log_state;
}  // namespace

void log_configure(const std::string& tool, LogLevel level) {
  log_state.tool = tool;
  log_state.level = level;
}

void log_set_rank(int rank, int) { log_state.rank = rank; }

LogLevel log_level() { return log_state.level; }
const std::string& log_tool() { return log_state.tool; }

void log_line(const std::string& line) {
  // One fwrite per line so that lines from different ranks do not interleave.
  std::string out = log_state.rank > 0 ? cat(log_state.tool, "[", log_state.rank, "]: ", line, "\n")
                                       : cat(log_state.tool, ": ", line, "\n");
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace tps
