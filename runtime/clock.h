// Wall time as tps measures it: a monotonic clock, seconds as doubles.
#pragma once

#include <chrono>

namespace tps {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Adds the seconds since the last lap (or since construction) to one of
// several running totals: where a sequence of steps spends its time.
class Stopwatch {
 public:
  void lap(double& into) {
    const Clock::time_point now = Clock::now();
    into += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  Clock::time_point last_ = Clock::now();
};

}  // namespace tps
