// The math the kernels and the forward pass share, against hand-computed
// values: RMSNorm, the sink softmax, the SwiGLU clamp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/kernels/layer_math.h"

namespace tps {
namespace {

TEST(LayerMath, RmsNorm) {
  const float x[4] = {1, 2, 3, 4}, g[4] = {1, 1, 2, 0.5f};
  float out[4];
  rmsnorm(x, g, 0.0f, 4, out);
  const float inv = 1.0f / std::sqrt(7.5f);  // mean of squares = 30 / 4
  EXPECT_NEAR(out[0], inv, 1e-6);
  EXPECT_NEAR(out[2], 6 * inv, 1e-6);
  EXPECT_NEAR(out[3], 2 * inv, 1e-6);
}

TEST(LayerMath, SinkTakesItsShareOfTheSoftmax) {
  std::vector<float> z = {0.0f, 0.0f};
  softmax_with_sink(z, 0.0f);  // three equal logits, one of them the sink
  EXPECT_NEAR(z[0], 1.0f / 3, 1e-7);
  EXPECT_NEAR(z[1], 1.0f / 3, 1e-7);
  std::vector<float> w = {1.0f, 2.0f};
  softmax_with_sink(w, -1e9f);  // a hopeless sink leaves a plain softmax
  EXPECT_NEAR(w[0] + w[1], 1.0f, 1e-6);
  EXPECT_NEAR(w[1] / w[0], std::exp(1.0f), 1e-5);
  std::vector<float> big = {1000.0f};
  softmax_with_sink(big, 1000.0f);  // no overflow: half to the sink
  EXPECT_NEAR(big[0], 0.5f, 1e-7);
}

TEST(LayerMath, SwigluClamp) {
  const float a = 1.702f, limit = 7.0f;
  auto plain = [&](float g, float u) { return g / (1 + std::exp(-a * g)) * (u + 1); };
  EXPECT_NEAR(swiglu_oai(1.0f, 0.5f, a, limit), plain(1.0f, 0.5f), 1e-6);
  // The gate is clamped above only; the up branch both ways.
  EXPECT_NEAR(swiglu_oai(9.0f, 0.0f, a, limit), plain(7.0f, 0.0f), 1e-5);
  EXPECT_NEAR(swiglu_oai(-9.0f, 0.0f, a, limit), plain(-9.0f, 0.0f), 1e-6);
  EXPECT_NEAR(swiglu_oai(1.0f, 20.0f, a, limit), plain(1.0f, 7.0f), 1e-5);
  EXPECT_NEAR(swiglu_oai(1.0f, -20.0f, a, limit), plain(1.0f, -7.0f), 1e-5);
}

}  // namespace
}  // namespace tps
