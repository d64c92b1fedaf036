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

}  // namespace
}  // namespace tps
