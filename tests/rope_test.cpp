// YaRN RoPE (spec §2.4, §7.4) against the spec's table and hand-computed
// rotations.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/model/synthetic_model.h"
#include "engine/step/rope.h"

namespace tps {
namespace {

ModelConfig gpt_oss_20b() { return synthetic_preset("20b").config; }

TEST(Rope, YarnFrequenciesMatchTheSpecTable) {
  RopeTable openai = make_yarn_rope(gpt_oss_20b(), false);
  RopeTable ggml = make_yarn_rope(gpt_oss_20b(), true);
  EXPECT_NEAR(openai.corr_low, 8.0927791155, 1e-9);
  EXPECT_NEAR(openai.corr_high, 17.3980245016, 1e-9);
  EXPECT_EQ(ggml.corr_low, 8);
  EXPECT_EQ(ggml.corr_high, 18);
  EXPECT_NEAR(openai.mscale, 1.3465735903, 1e-9);
  // Spec §7.4: identical outside the ramp, different inside it.
  EXPECT_DOUBLE_EQ(openai.inv_freq[0], 1.0);
  EXPECT_NEAR(openai.inv_freq[1], 0.6890443059, 1e-9);
  EXPECT_NEAR(openai.inv_freq[8], 0.05081327482, 1e-11);
  EXPECT_NEAR(openai.inv_freq[18], 3.830881237e-05, 1e-14);
  EXPECT_NEAR(openai.inv_freq[31], 3.023511428e-07, 1e-16);
  const std::map<int, std::pair<double, double>> ramp = {{9, {3.170569618e-02, 3.162075228e-02}},
                                                         {12, {6.794959490e-03, 7.015713911e-03}},
                                                         {15, {1.052602101e-03, 1.206130969e-03}},
                                                         {17, {1.293187012e-04, 2.279477958e-04}}};
  for (auto [i, want] : ramp) {
    EXPECT_NEAR(openai.inv_freq[i], want.first, want.first * 1e-8) << i;
    EXPECT_NEAR(ggml.inv_freq[i], want.second, want.second * 1e-8) << i;
  }
}

TEST(Rope, RotatesHalvesByPositionAndScales) {
  RopeTable t = make_yarn_rope(gpt_oss_20b(), false);
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;   // pairs with x[32]
  x[33] = 1.0f;  // pairs with x[1]
  apply_rope(t, x.data(), 1, 3);
  const double m = t.mscale;
  EXPECT_NEAR(x[0], m * std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[32], m * std::sin(3.0), 1e-6);
  const double th = 3 * t.inv_freq[1];
  EXPECT_NEAR(x[1], -m * std::sin(th), 1e-6);
  EXPECT_NEAR(x[33], m * std::cos(th), 1e-6);
  // Position 0: only the magnitude factor.
  std::vector<float> y(64, 2.0f);
  apply_rope(t, y.data(), 1, 0);
  for (float v : y) EXPECT_NEAR(v, 2 * m, 1e-6);
}

}  // namespace
}  // namespace tps
