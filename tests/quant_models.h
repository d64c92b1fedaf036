// The tiny files of every other block type the tests make (TPS_QUANT_MIXES
// in tests/CMakeLists.txt), by the names of their presets ("tiny-q4_k", ...:
// models/gpt-oss-NAME.gguf), from the TPS_QUANT_MODELS definition.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace tps::testing {

inline std::vector<std::string> quant_models() {
  std::vector<std::string> out;
  const std::string list = TPS_QUANT_MODELS;
  for (size_t at = 0; at < list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    out.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// A test name's part for one of them: "q4_k" for "tiny-q4_k".
inline std::string quant_model_test_name(const std::string& model) { return model.substr(model.find('-') + 1); }

}  // namespace tps::testing
