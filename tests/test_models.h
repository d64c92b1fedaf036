// The synthetic models the tests run (the test_models fixture makes them)
// and prompts of token ids spread over their vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/test_paths.h"

namespace tps::testing {

// build/models/gpt-oss-PRESET.gguf.
inline std::string model_path(const std::string& preset) {
  return std::string(tps::test_paths::models) + "/gpt-oss-" + preset + ".gguf";
}

// A prompt of n ids spread over the ordinary vocabulary, starting from `seed`.
inline std::vector<int32_t> spread_prompt(int n, int seed) {
  std::vector<int32_t> ids;
  for (int i = 0; static_cast<int>(ids.size()) < n; ++i) ids.push_back((i * 7919 + seed * 104729 + 13) % 199998);
  return ids;
}

}  // namespace tps::testing
