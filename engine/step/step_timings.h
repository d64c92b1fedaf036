// Seconds spent in each part of the forward pass: where a step's time goes,
// for --json and the benchmarks.
#pragma once

namespace tps {

struct StepTimings {
  double qkv = 0, attention = 0, output_proj = 0, router = 0, experts = 0, logits = 0;
  double exchange = 0;  // sums across ranks and the pipeline's hand-offs
};

}  // namespace tps
