// Writes a few small, valid GGUF files (a few hundred bytes each) as the
// fuzzer's seed corpus: metadata of every scalar type and every array type
// the writer has, and tensors of the types tps decodes plus a K-quant, at two
// alignments.
//   gguf_fuzz_seeds DIR
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "engine/gguf/gguf_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  using tps::GgmlType;
  // Per seed: the tensors (type, ne[0], rows).
  const std::vector<std::vector<std::pair<GgmlType, uint64_t>>> seeds = {
      {{GgmlType::F32, 4}, {GgmlType::Q8_0, 32}, {GgmlType::MXFP4, 64}},
      {{GgmlType::F16, 8}, {GgmlType::BF16, 8}, {GgmlType::Q4_0, 32}},
      {{GgmlType::Q6_K, 256}, {GgmlType::I32, 3}},
      {{GgmlType::MXFP4, 32}, {GgmlType::F32, 1}},
      {},
  };
  for (size_t s = 0; s < seeds.size(); ++s) {
    tps::GgufWriter w(dir + "/seed" + std::to_string(s) + ".gguf", s == 3 ? 64 : 32);
    w.add_string("general.architecture", "gpt-oss");
    w.add_u8("u8", 200);
    w.add_i8("i8", -3);
    w.add_u16("u16", 65535);
    w.add_i16("i16", -2);
    w.add_u32("gpt-oss.block_count", static_cast<uint32_t>(1 + s));
    w.add_i32("i32", -7);
    w.add_u64("u64", 1ull << 40);
    w.add_i64("i64", -1ll << 40);
    w.add_f32("gpt-oss.rope.freq_base", 150000.0f);
    w.add_f64("f64", 3.14159);
    w.add_bool("flag", s % 2);
    w.add_string_array("tokenizer.ggml.tokens", {"!", "\xC4\xA0", "<|start|>", "ab", ""});
    w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 3, 1, 1});
    w.add_f32_array("scores", {0.5f, -1.0f});
    std::vector<std::pair<std::string, uint64_t>> sizes;
    for (size_t t = 0; t < seeds[s].size(); ++t) {
      const auto [type, ne0] = seeds[s][t];
      const std::string name = "t" + std::to_string(t);
      w.add_tensor(name, type, {ne0, 2});
      sizes.emplace_back(name, tps::row_bytes(type, ne0) * 2);
    }
    w.begin_data();
    for (const auto& [name, bytes] : sizes) {
      std::vector<uint8_t> data(bytes);
      for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(s * 17 + i * 29);
      w.write_tensor_data(name, data.data(), data.size());
    }
    w.finish();
  }
  return 0;
}
