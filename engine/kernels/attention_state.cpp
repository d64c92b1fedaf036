#include "engine/kernels/attention_state.h"

#include <algorithm>
#include <cmath>

namespace tps {

void clear_attention_state(AttentionState s, int heads, int head_dim) {
  std::fill_n(s.max, heads, -INFINITY);
  std::fill_n(s.sum, heads, 0.0f);
  std::fill_n(s.acc, int64_t{heads} * head_dim, 0.0f);
}

void merge_attention_state(AttentionState from, AttentionState into, int heads, int head_dim) {
  for (int h = 0; h < heads; ++h) {
    const float m = std::max(into.max[h], from.max[h]);
    // e^(-inf) is 0: a cleared state's part vanishes, and from's is times 1.
    const float a = std::exp(into.max[h] - m), b = std::exp(from.max[h] - m);
    into.max[h] = m;
    into.sum[h] = into.sum[h] * a + from.sum[h] * b;
    float* acc = into.acc + int64_t{h} * head_dim;
    const float* other = from.acc + int64_t{h} * head_dim;
    for (int i = 0; i < head_dim; ++i) acc[i] = acc[i] * a + other[i] * b;
  }
}

void finish_attention(AttentionState s, const float* sinks, int heads, int head_dim, float* out) {
  for (int h = 0; h < heads; ++h) {
    const float m = std::max(s.max[h], sinks[h]);
    const float a = std::exp(s.max[h] - m);
    const float w = a / (s.sum[h] * a + std::exp(sinks[h] - m));
    for (int i = 0; i < head_dim; ++i) out[int64_t{h} * head_dim + i] = s.acc[int64_t{h} * head_dim + i] * w;
  }
}

}  // namespace tps
