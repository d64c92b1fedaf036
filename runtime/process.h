// What the kernel says about this process.
#pragma once

#include <sys/resource.h>

namespace tps {

// The most resident memory this process has had, in MiB (getrusage).
inline double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

}  // namespace tps
