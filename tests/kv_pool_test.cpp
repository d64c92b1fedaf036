// The KV cache's attention against plain loops, and the sliding window's
// boundary.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"
#include "engine/step/kv_cache.h"

namespace tps {
namespace {

// The blocked cache with the scalar kernels gives the plain loops' bits:
// scores summed over the dimensions in order, values over the positions in
// order; every other instruction set the same within rounding. For each of
// the query heads of a kv head (5: the vector kernels' 4 at once and one
// more), head sizes with and without partial vectors, windows across the
// ring's wrap, runs that start and end inside key blocks, and more
// positions than one pass of values.
TEST(KvCache, AttentionIsThePlainLoopIsThePlainLoop) {
  for (int hd : {64, 24, 12}) {
    const int kv_heads = 3, heads = 5, width = kv_heads * hd, window = 21;
    LayerCache cache(window, kv_heads, hd);  // 21 rounds up to 32 slots
    ASSERT_EQ(cache.slots(), 32);
    std::mt19937 rng(hd);
    std::normal_distribution<float> normal;
    std::vector<std::vector<float>> keys, values;
    std::vector<float> q(heads * hd), scores(heads * window), out(heads * hd), sinks(heads);
    for (int pos = 0; pos < 80; ++pos) {
      keys.emplace_back(width), values.emplace_back(width);
      for (float& x : keys.back()) x = normal(rng);
      for (float& x : values.back()) x = normal(rng);
      cache.store(pos, keys.back().data(), values.back().data());
      for (float& x : q) x = normal(rng);
      for (float& x : sinks) x = normal(rng);
      const int g = pos % kv_heads, first = first_visible(pos, window, true);
      const float scale = 0.125f;
      std::vector<float> want(heads * hd);
      for (int h = 0; h < heads; ++h) {
        std::vector<float> z;
        for (int s = first; s <= pos; ++s) {
          float dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[h * hd + i] * keys[s][g * hd + i];
          z.push_back(dot * scale);
        }
        softmax_with_sink(z, sinks[h]);
        for (int i = 0; i < hd; ++i)
          for (int s = first; s <= pos; ++s) want[h * hd + i] += z[s - first] * values[s][g * hd + i];
      }
      for (Isa isa : supported_isas()) {
        cache.attend(kernel_set(isa), q.data(), heads, g, first, pos, scale, sinks.data(), scores.data(), out.data());
        for (int i = 0; i < heads * hd; ++i) {
          if (isa == Isa::scalar)
            ASSERT_EQ(out[i], want[i]) << "head_dim " << hd << " position " << pos << " head " << i / hd << " dim "
                                       << i % hd;
          else
            ASSERT_NEAR(out[i], want[i], 2e-6f) << isa_name(isa) << " head_dim " << hd << " position " << pos
                                                << " head " << i / hd << " dim " << i % hd;
        }
      }
    }
  }
}

TEST(KvCache, SlidingWindowBoundary) {
  // Window 128: position 127 still sees position 0; position 128 does not.
  EXPECT_EQ(first_visible(127, 128, true), 0);
  EXPECT_EQ(first_visible(128, 128, true), 1);
  EXPECT_EQ(first_visible(300, 128, true), 173);  // 128 keys: 173..300
  EXPECT_EQ(first_visible(300, 128, false), 0);
  EXPECT_EQ(first_visible(0, 1, true), 0);
}

}  // namespace
}  // namespace tps
