// Progress of a long job on stderr, as one line rewritten in place:
// "tool: what: 45% of 12.1 GB (1.9 GB/s)" (MB below a GB), redrawn when the whole percent
// changes, ended with a newline when done. When stderr is not a terminal (a
// log file, a pipe), where a redrawn line piles up as one long line, a line
// of its own every 10%. Silent below log level info.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/clock.h"

namespace tps {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what);
  ~ProgressLine();  // ends the line if it was drawn and not finished
  void update(uint64_t done, uint64_t total);

 private:
  std::string what_;
  Clock::time_point t0_ = Clock::now();
  int percent_ = -1;
  bool open_ = false;
  bool terminal_;
};

}  // namespace tps
