#include "launch/run_options.h"

#include "launch/cli.h"
#include "runtime/error.h"

namespace tps {

void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes) {
  positions = 0, bytes = 0;
  if (text.empty()) return;
  const std::optional<SizeText> size = parse_size(text);
  if (!size) throw InputError(cat("--kv-size '", text, "': expected positions (16384) or bytes per rank (2G, 512M)"));
  if (size->has_unit) {
    bytes = size->value;
  } else {
    if (size->value > (1ull << 30)) throw InputError(cat("--kv-size ", text, ": more positions than a pool can hold"));
    positions = static_cast<int>(size->value);
  }
}

}  // namespace tps
