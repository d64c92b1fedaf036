// The MoE block's routing: top-k by raw logit, ties to the lower index,
// softmax over the chosen.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/step/moe.h"

namespace tps {
namespace {

TEST(Moe, ExpertSelectionAndTies) {
  const std::vector<float> r = {0.5f, 2.0f, 1.0f, 2.0f, -1.0f};
  int experts[2];
  float weights[2];
  select_experts(r, 2, experts, weights);
  EXPECT_EQ(experts[0], 1);  // tie between 1 and 3: the lower index first
  EXPECT_EQ(experts[1], 3);
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
  int e3[3];
  float w3[3];
  select_experts(r, 3, e3, w3);
  EXPECT_EQ(e3[2], 2);
  // Softmax over the chosen logits only: 2, 2, 1.
  const float denom = 2 * std::exp(0.0f) + std::exp(-1.0f);
  EXPECT_NEAR(w3[2], std::exp(-1.0f) / denom, 1e-6);
}

}  // namespace
}  // namespace tps
