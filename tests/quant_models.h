// The tiny files of every other block type the tests make, by the names of
// their presets ("tiny-q4_k", ...: models/gpt-oss-NAME.gguf): those
// tps-mkmodel writes (TPS_QUANT_MIXES in tests/CMakeLists.txt, the
// TPS_QUANT_MODELS definition) and, where a test has TPS_LLAMA_QUANTIZED,
// those llama.cpp's own quantizer makes ("tiny-llama-q4_k_m", ...).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace tps::testing {

inline std::vector<std::string> model_list(const std::string& list) {
  std::vector<std::string> out;
  for (size_t at = 0; at < list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    out.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

inline std::vector<std::string> quant_models() { return model_list(TPS_QUANT_MODELS); }

#ifdef TPS_LLAMA_QUANTIZED
inline std::vector<std::string> llama_quantized_models() { return model_list(TPS_LLAMA_QUANTIZED); }
#endif

// A test name's part for one of them: "q4_k" for "tiny-q4_k", "llama_q2_k"
// for "tiny-llama-q2_k".
inline std::string quant_model_test_name(const std::string& model) {
  std::string name = model.substr(model.find('-') + 1);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace tps::testing
