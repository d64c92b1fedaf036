#include "runtime/log.h"

#include <cstdio>

namespace tps {
namespace {
// Process-wide by nature (there is one stderr): how loud to be and who we are.
struct LogState {
  LogLevel level = LogLevel::info;
  int rank = 0;
  int world_size = 1;
};
LogState log_state;
}  // namespace

void log_configure(LogLevel level, int rank, int world_size) {
  log_state = LogState{level, rank, world_size};
}

LogLevel log_level() { return log_state.level; }

void log_line(const std::string& line) {
  // One fwrite per line so that lines from different ranks do not interleave.
  std::string out = log_state.world_size > 1
                        ? cat("[rank ", log_state.rank, "] ", line, "\n")
                        : cat(line, "\n");
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace tps
