#include "launch/progress_line.h"

#include <algorithm>
#include <cstdio>

#include "runtime/log.h"

namespace tps {

void ProgressLine::update(uint64_t done, uint64_t total) {
  if (log_level() < LogLevel::info || total == 0) return;
  const int percent = static_cast<int>(100 * done / total);
  if (percent == percent_) return;
  percent_ = percent;
  const bool gb = total >= 1e9;
  const double unit = gb ? 1e9 : 1e6, rate = done / unit / std::max(seconds_since(t0_), 1e-9);
  std::fprintf(stderr, "\r%s: %s: %3d%% of %.1f %s (%.1f %s/s)", log_tool().c_str(), what_.c_str(), percent,
               total / unit, gb ? "GB" : "MB", rate, gb ? "GB" : "MB");
  open_ = done < total;
  if (!open_) std::fputc('\n', stderr);
}

ProgressLine::~ProgressLine() {
  if (open_) std::fputc('\n', stderr);
}

}  // namespace tps
