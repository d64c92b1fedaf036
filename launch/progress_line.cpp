#include "launch/progress_line.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "runtime/log.h"

namespace tps {

ProgressLine::ProgressLine(std::string what) : what_(std::move(what)), terminal_(isatty(STDERR_FILENO) == 1) {}

void ProgressLine::update(uint64_t done, uint64_t total) {
  if (log_level() < LogLevel::info || total == 0) return;
  const int step = terminal_ ? 1 : 10;
  const int percent = static_cast<int>(100 * done / total) / step * step;
  if (percent == percent_) return;
  percent_ = percent;
  const bool gb = total >= 1e9;
  const double unit = gb ? 1e9 : 1e6, rate = done / unit / std::max(seconds_since(t0_), 1e-9);
  std::fprintf(stderr, "%s%s: %s: %3d%% of %.1f %s (%.1f %s/s)", terminal_ ? "\r" : "", log_tool().c_str(),
               what_.c_str(), percent, total / unit, gb ? "GB" : "MB", rate, gb ? "GB" : "MB");
  open_ = terminal_ && done < total;
  if (!open_) std::fputc('\n', stderr);
}

ProgressLine::~ProgressLine() {
  if (open_) std::fputc('\n', stderr);
}

}  // namespace tps
