// Rotary position embedding with YaRN scaling, as gpt-oss uses it (spec
// §2.4): NeoX pairing (element i with i + head_dim/2), per-pair frequencies
// blended between the original and the interpolated (divided by the factor)
// by a linear ramp over the correction range, and cos/sin both multiplied by
// mscale = 1 + 0.1 ln(factor).
#pragma once

#include <vector>

#include "engine/model/model_config.h"

namespace tps {

struct RopeTable {
  int head_dim = 0;
  std::vector<double> inv_freq;  // [head_dim / 2] radians per position
  double mscale = 1;
  double corr_low = 0, corr_high = 0;  // the ramp's range, in pair indexes
};

// truncate = false follows the OpenAI reference and HF (`truncate: false`):
// fractional correction range (8.0928 .. 17.3980 for gpt-oss). truncate =
// true rounds it outward to whole dimensions (floor/ceil) as llama.cpp does.
RopeTable make_yarn_rope(const ModelConfig& config, bool truncate);

// Rotates n_heads heads of head_dim values each, in place, for position pos.
void apply_rope(const RopeTable& rope, float* heads, int n_heads, int pos);

}  // namespace tps
