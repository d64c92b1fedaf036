#include "engine/step/rope.h"

#include <algorithm>
#include <cmath>

namespace tps {

RopeTable make_yarn_rope(const ModelConfig& c, bool truncate) {
  RopeTable t;
  t.head_dim = static_cast<int>(c.head_dim);
  const int half = t.head_dim / 2;
  const double base = c.rope_base, factor = c.rope_scaling_factor, dim = t.head_dim;
  // The pair index whose wavelength spans `rotations` turns over the
  // original context: dim * ln(L0 / (2 pi r)) / (2 ln base).
  auto corr = [&](double rotations) {
    return dim * std::log(c.rope_orig_ctx / (2.0 * M_PI * rotations)) / (2.0 * std::log(base));
  };
  double low = corr(c.yarn_beta_fast), high = corr(c.yarn_beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  t.corr_low = low;
  t.corr_high = high;
  for (int i = 0; i < half; ++i) {
    double extrap = std::pow(base, -2.0 * i / dim);
    double interp = extrap / factor;
    double ramp = std::clamp((i - low) / std::max(high - low, 0.001), 0.0, 1.0);
    t.inv_freq.push_back(interp * ramp + extrap * (1.0 - ramp));
  }
  t.mscale = factor > 1 ? 1.0 + 0.1 * std::log(factor) : 1.0;
  return t;
}

void apply_rope(const RopeTable& rope, float* heads, int n_heads, int pos) {
  const int half = rope.head_dim / 2;
  // cos/sin per pair once per position; the angle in double keeps large
  // positions exact to float precision.
  float cs[256], sn[256];
  for (int i = 0; i < half; ++i) {
    double theta = pos * rope.inv_freq[i];
    cs[i] = static_cast<float>(std::cos(theta) * rope.mscale);
    sn[i] = static_cast<float>(std::sin(theta) * rope.mscale);
  }
  for (int h = 0; h < n_heads; ++h) {
    float* x = heads + h * rope.head_dim;
    for (int i = 0; i < half; ++i) {
      float a = x[i], b = x[i + half];
      x[i] = a * cs[i] - b * sn[i];
      x[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

}  // namespace tps
