#include "serve/api/stop_strings.h"

#include <algorithm>

namespace tps {

std::string StopStrings::push(const std::string& text) {
  if (stopped() || text.empty()) return "";
  std::string buffer = held_ + text;
  size_t cut = std::string::npos;
  for (const std::string& s : stop_)
    if (const size_t at = buffer.find(s); at < cut) cut = at, found_ = s;
  if (cut != std::string::npos) {
    held_.clear();
    return buffer.substr(0, cut);
  }
  // Hold back the longest end of the text that could start a stop string.
  size_t keep = 0;
  for (const std::string& s : stop_)
    for (size_t n = std::min(s.size() - 1, buffer.size()); n > keep; --n)
      if (buffer.compare(buffer.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  held_ = buffer.substr(buffer.size() - keep);
  return buffer.substr(0, buffer.size() - keep);
}

std::string StopStrings::flush() {
  std::string out;
  if (!stopped()) out.swap(held_);
  return out;
}

}  // namespace tps
