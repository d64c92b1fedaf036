// Writes a few small, valid GGUF files as the fuzzer's seed corpus:
// metadata of every type, string arrays, and tensors of several types.
//   gguf_fuzz_seeds DIR
#include <cstdio>
#include <string>
#include <vector>

#include "engine/gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using tps::GgmlType;
  for (int seed = 0; seed < 4; ++seed) {
    tps::GgufWriter w(dir + "/seed" + std::to_string(seed) + ".gguf", seed == 3 ? 64 : 32);
    w.add_string("general.architecture", "gpt-oss");
    w.add_u32("gpt-oss.block_count", 1 + seed);
    w.add_f32("gpt-oss.rope.freq_base", 150000.0f);
    w.add_bool("flag", seed % 2);
    w.add_i64("big", -1ll << 40);
    w.add_f64("pi", 3.14159);
    w.add_string_array("tokenizer.ggml.tokens", {"!", "\xC4\xA0", "<|start|>", "ab"});
    w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 3, 1});
    std::vector<std::pair<std::string, size_t>> sizes = {{"a", 16}, {"b", 34 * 2}, {"c", 17 * 2}};
    w.add_tensor("a", GgmlType::F32, {4});
    w.add_tensor("b", GgmlType::Q8_0, {32, 2});
    w.add_tensor("c", GgmlType::MXFP4, {64, 1, 1});
    w.begin_data();
    for (auto& [name, bytes] : sizes) {
      std::vector<uint8_t> data(bytes, static_cast<uint8_t>(seed * 17 + bytes));
      w.write_tensor_data(name, data.data(), data.size());
    }
    w.finish();
  }
  return 0;
}
