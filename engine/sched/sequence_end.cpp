#include "engine/sched/sequence_end.h"

#include <algorithm>

namespace tps {

const char* sequence_end_name(SequenceEnd end) {
  switch (end) {
    case SequenceEnd::none: return "none";
    case SequenceEnd::stop: return "stop token";
    case SequenceEnd::length: return "length";
    case SequenceEnd::context: return "context full";
    case SequenceEnd::constraint: return "constraint too costly";
  }
  return "";
}

SequenceEnd sequence_end(int32_t token, std::span<const int32_t> stop_tokens, int generated, int max_new_tokens,
                         bool context_full) {
  if (std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end()) return SequenceEnd::stop;
  if (generated >= max_new_tokens) return SequenceEnd::length;
  if (context_full) return SequenceEnd::context;
  return SequenceEnd::none;
}

}  // namespace tps
