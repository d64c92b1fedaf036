// Seconds spent in each part of the forward pass: where a step's time goes,
// for --json and the benchmarks.
#pragma once

namespace tps {

struct StepTimings {
  double qkv = 0, attention = 0, output_proj = 0, router = 0, experts = 0, logits = 0;
  double exchange = 0;  // sums across ranks and the pipeline's hand-offs

  StepTimings& operator+=(const StepTimings& o) {
    qkv += o.qkv, attention += o.attention, output_proj += o.output_proj, router += o.router;
    experts += o.experts, logits += o.logits, exchange += o.exchange;
    return *this;
  }
  StepTimings operator-(const StepTimings& o) const {
    StepTimings d = *this;
    d.qkv -= o.qkv, d.attention -= o.attention, d.output_proj -= o.output_proj, d.router -= o.router;
    d.experts -= o.experts, d.logits -= o.logits, d.exchange -= o.exchange;
    return d;
  }
};

}  // namespace tps
