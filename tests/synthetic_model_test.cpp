// The synthetic model writer: the release's shapes, weights a pure function
// of (preset, seed), values at their designed scale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/model/synthetic_model.h"
#include "runtime/error.h"
#include "tests/temp_path.h"
#include "tests/test_vocab.h"

namespace tps {
namespace {

using testing::temp_path;
using testing::test_vocab;

TEST(SyntheticModel, PresetShapesMatchTheRelease) {
  ModelConfig c = synthetic_preset("20b").config;
  EXPECT_EQ(c.n_layer, 24u);
  EXPECT_EQ(gpt_oss_tensors(c).size(), 459u);  // spec §4.3: 19 per layer x 24 + 3
  // Spec §7.1: the ggml-org MXFP4 file holds 12,096,558,336 bytes of tensors.
  EXPECT_EQ(synthetic_tensor_bytes(synthetic_preset("20b")), 12096558336ull);
  EXPECT_TRUE(c.is_sliding_layer(0));
  EXPECT_FALSE(c.is_sliding_layer(1));
  EXPECT_TRUE(c.is_sliding_layer(22));
  EXPECT_THROW(synthetic_preset("7b"), InputError);
  // gpt-oss-120b: 36 layers of 128 experts, 63,374,323,968 bytes (spec
  // §7.1), written in 3 parts as the release.
  const SyntheticSpec big = synthetic_preset("120b");
  EXPECT_EQ(gpt_oss_tensors(big.config).size(), 687u);
  EXPECT_EQ(synthetic_tensor_bytes(big), 63374323968ull);
  EXPECT_EQ(synthetic_model_paths(big, "m/gpt-oss-120b.gguf"),
            (std::vector<std::string>{"m/gpt-oss-120b-00001-of-00003.gguf", "m/gpt-oss-120b-00002-of-00003.gguf",
                                      "m/gpt-oss-120b-00003-of-00003.gguf"}));
}

// A split model (llama.cpp's gguf-split layout) opens by its first part as
// the same tensors, byte for byte, as the model in one file; a missing,
// misnumbered or foreign part, or a part opened first, is one clear error.
TEST(SyntheticModel, SplitModelOpensAsOneFile) {
  SyntheticSpec spec = synthetic_preset("tiny");
  const std::string one = temp_path("whole.gguf"), split = temp_path("split.gguf");
  write_synthetic_model(spec, test_vocab(), one, nullptr);
  spec.split_max_bytes = 8 << 20;
  const std::vector<std::string> parts = synthetic_model_paths(spec, split);
  ASSERT_GE(parts.size(), 3u);
  write_synthetic_model(spec, test_vocab(), split, nullptr);
  {
    GgufFile whole = GgufFile::open(one), joined = GgufFile::open(parts[0]);
    EXPECT_EQ(joined.parts(), static_cast<int>(parts.size()));
    ASSERT_EQ(joined.tensors().size(), whole.tensors().size());
    for (const TensorView& t : whole.tensors()) {
      const TensorView& u = joined.tensor(t.name);
      ASSERT_EQ(u.bytes, t.bytes) << t.name;
      EXPECT_EQ(std::memcmp(u.data, t.data, t.bytes), 0) << t.name;
    }
    EXPECT_GT(joined.tensor("output.weight").part, 0);
    EXPECT_EQ(joined.get_u32("gpt-oss.block_count"), spec.config.n_layer);
  }
  auto refused = [](const std::string& path, const std::string& fragment) {
    try {
      GgufFile::open(path);
      ADD_FAILURE() << path << " opened";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refused(parts[1], "open its first part, " + parts[0]);
  // Another model's part 2 (small: more tensors) in place of ours.
  SyntheticSpec other = synthetic_preset("small");
  other.split_max_bytes = spec.split_max_bytes;
  const std::string foreign = temp_path("foreign.gguf");
  write_synthetic_model(other, test_vocab(), foreign, nullptr);
  const std::vector<std::string> foreign_parts = synthetic_model_paths(other, foreign);
  const std::string saved = temp_path("saved.gguf");
  std::filesystem::rename(parts[1], saved);
  std::filesystem::copy_file(foreign_parts[1], parts[1]);
  refused(parts[0], "a part of another model");
  std::filesystem::remove(parts[1]);
  refused(parts[0], "part 2 of " + std::to_string(parts.size()) + " of this split model is missing: " + parts[1]);
  // Part 2 copied over part 3.
  std::filesystem::rename(saved, parts[1]);
  std::filesystem::remove(parts[2]);
  std::filesystem::copy_file(parts[1], parts[2]);
  refused(parts[0], "split.no 1 of split.count " + std::to_string(parts.size()) + ", expected split.no 2");
  for (const std::string& p : parts) std::filesystem::remove(p);
  for (const std::string& p : foreign_parts) std::filesystem::remove(p);
  std::filesystem::remove(one);
}

TEST(SyntheticModel, SameSeedSameBytesOtherSeedOtherBytes) {
  SyntheticSpec spec = synthetic_preset("tiny");
  spec.config.n_layer = 1;
  std::string a = temp_path("a.gguf"), b = temp_path("b.gguf"), c = temp_path("c.gguf");
  write_synthetic_model(spec, test_vocab(), a, nullptr);
  write_synthetic_model(spec, test_vocab(), b, nullptr);
  spec.seed = 2;
  write_synthetic_model(spec, test_vocab(), c, nullptr);
  GgufFile fa = GgufFile::open(a), fb = GgufFile::open(b), fc = GgufFile::open(c);
  const TensorView& ta = fa.tensor("blk.0.ffn_up_exps.weight");
  const TensorView& tb = fb.tensor("blk.0.ffn_up_exps.weight");
  const TensorView& tc = fc.tensor("blk.0.ffn_up_exps.weight");
  EXPECT_EQ(0, std::memcmp(ta.data, tb.data, ta.bytes));
  EXPECT_NE(0, std::memcmp(ta.data, tc.data, ta.bytes));
  for (const std::string& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(SyntheticModel, GeneratedWeightsHaveTheirScale) {
  // MXFP4 expert weights: the mean square of the decoded values is std^2.
  TensorSpec t;
  t.name = "blk.0.ffn_gate_exps.weight";
  t.n_dims = 2;
  t.ne = {2880, 64, 1, 1};
  float stddev = 1.0f / std::sqrt(2880.0f);
  TensorGenerator gen(t, GgmlType::MXFP4, stddev, 0, 7);
  std::vector<uint8_t> bytes(gen.row_bytes() * 64);
  gen.next_rows(bytes.data(), 64);
  std::vector<float> values(2880 * 64);
  dequantize_row(GgmlType::MXFP4, bytes.data(), values.data(), values.size());
  double sum = 0, sum2 = 0;
  for (float v : values) sum += v, sum2 += double(v) * v;
  EXPECT_NEAR(sum / values.size(), 0.0, 0.1 * stddev);
  EXPECT_NEAR(std::sqrt(sum2 / values.size()), stddev, 0.05 * stddev);
}

TEST(SyntheticModel, RoundedTypesRoundTheValuesF32Has) {
  // --rounded: a Q8_0 or MXFP4 tensor is the F32 tensor of the seed, rounded
  // (the same model in every type); by default its codes are drawn instead.
  TensorSpec t;
  t.name = "blk.0.attn_q.weight";
  t.n_dims = 2;
  t.ne = {256, 8, 1, 1};
  const float stddev = 0.05f;
  TensorGenerator f32(t, GgmlType::F32, stddev, 0, 7);
  std::vector<float> values(256 * 8);
  f32.next_rows(reinterpret_cast<uint8_t*>(values.data()), 8);
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::MXFP4}) {
    TensorGenerator rounded(t, type, stddev, 0, 7, true), drawn(t, type, stddev, 0, 7);
    std::vector<uint8_t> a(rounded.row_bytes() * 8), b(a.size()), expected(a.size());
    rounded.next_rows(a.data(), 8);
    drawn.next_rows(b.data(), 8);
    quantize_row(type, values.data(), expected.data(), values.size());
    EXPECT_EQ(a, expected) << type_name(type);
    EXPECT_NE(b, expected) << type_name(type);
  }
}

}  // namespace
}  // namespace tps
