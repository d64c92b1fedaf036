#include "launch/run_options.h"

#include <cctype>

#include "runtime/error.h"

namespace tps {

void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes) {
  positions = 0, bytes = 0;
  if (text.empty()) return;
  size_t used = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const int shift = unit.empty()                   ? 0
                    : unit == "K" || unit == "KiB" ? 10
                    : unit == "M" || unit == "MiB" ? 20
                    : unit == "G" || unit == "GiB" ? 30
                                                   : -1;
  if (used == 0 || !std::isdigit(static_cast<unsigned char>(text[0])) || n == 0 || shift < 0 || n > (1ull << 40))
    throw InputError(cat("--kv-size '", text, "': expected positions (16384) or bytes per rank (2G, 512M)"));
  if (shift == 0) {
    if (n > (1ull << 30)) throw InputError(cat("--kv-size ", text, ": more positions than a pool can hold"));
    positions = static_cast<int>(n);
  } else {
    bytes = n << shift;
  }
}

}  // namespace tps
