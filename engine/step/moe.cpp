#include "engine/step/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "engine/kernels/layer_math.h"
#include "engine/step/parallel_products.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace tps {

void select_experts(std::span<const float> r, int k, int* experts, float* weights) {
  int order[256];
  const int n = static_cast<int>(r.size());
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int a, int b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += weights[j] = std::exp(r[order[j]] - r[order[0]]);
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] /= sum;
  }
}

MoeBlock::MoeBlock(const ModelConfig& c, const Shard& shard, int step_tokens, ThreadPool& pool, Exchange& exchange,
                   const KernelSet& kernels)
    : c_(c),
      shard_(shard),
      pool_(pool),
      exchange_(exchange),
      kernels_(kernels),
      d_(c.n_embd),
      ff_(shard.share.ff.size()),
      n_expert_(static_cast<int>(c.n_expert)),
      k_(static_cast<int>(c.n_expert_used)) {
  const int64_t B = step_tokens, entries = B * k_;
  xn_.resize(B * d_);
  xq_.resize(static_cast<int>(entries), d_);
  router_.resize(B * n_expert_);
  topk_.resize(entries), topk_w_.resize(entries), entry_of_.resize(entries);
  groups_.reserve(n_expert_);
  entry_token_.reserve(entries), entry_choice_.reserve(entries), entry_weight_.reserve(entries);
  gathered_.resize(entries * d_), gate_up_.resize(2 * entries * ff_), swiglu_.resize(entries * ff_);
  act_q_.resize(static_cast<int>(entries), ff_);
  down_.resize(entries * d_), out_.resize(B * d_);
}

uint64_t MoeBlock::buffer_bytes(const ModelConfig& c, const Shard& shard, int step_tokens) {
  // The constructor's buffers, one term each, in its order.
  const uint64_t B = step_tokens, entries = B * c.n_expert_used, d = c.n_embd, ff = shard.share.ff.size();
  const uint64_t floats = B * d + B * c.n_expert + entries /* topk_w_ */ + entries /* entry_weight_ */ + entries * d +
                          2 * entries * ff + entries * ff;
  const uint64_t ints = entries * 4 /* topk_, entry_of_, entry_token_, entry_choice_ */ + 3 * c.n_expert /* groups_ */;
  const uint64_t fixed = entries * d + B * d; /* down_, out_ */
  return 4 * (floats + ints) + 8 * fixed + QuantizedActivations::bytes_for(entries, d) +
         QuantizedActivations::bytes_for(entries, ff);
}

uint64_t MoeBlock::run(const LayerWeights& w, float* x, int n, StepTimings& timings) {
  Stopwatch clock;
  route(w, x, n);
  clock.lap(timings.router);
  group_by_expert(n);
  run_experts(w);
  weigh(n);
  clock.lap(timings.experts);
  if (shard_.sums_per_layer()) exchange_.sum(out_.data(), n * d_);
  clock.lap(timings.exchange);
  add_to_residual(w, x, n);
  clock.lap(timings.experts);
  const uint64_t expert = (2 * ff_ * w.gate.row_bytes + d_ * w.down.row_bytes) * groups_.size();
  return ff_ > 0 ? expert : 0;
}

// The normalized input, the router's logits, and each token's top k.
void MoeBlock::route(const LayerWeights& w, const float* x, int n) {
  for (int t = 0; t < n; ++t) rmsnorm(x + t * d_, w.post_norm, c_.rms_eps, d_, xn_.data() + t * d_);
  const bool q8 = w.router.wants_q8();
  if (q8) quantize_on(pool_, xq_, xn_.data(), n, d_);
  run_products(pool_, kernels_, token_rows(xn_.data(), d_, 0, n, q8 ? &xq_ : nullptr),
               {{w.router, w.router_b, router_.data()}});
  for (int t = 0; t < n; ++t)
    select_experts({router_.data() + t * n_expert_, static_cast<size_t>(n_expert_)}, k_, topk_.data() + t * k_,
                   topk_w_.data() + t * k_);
}

// (token, choice) entries by this rank's experts: the entries of one expert
// are contiguous, so each expert's rows are read once for all its tokens.
void MoeBlock::group_by_expert(int n) {
  groups_.clear(), entry_token_.clear(), entry_choice_.clear(), entry_weight_.clear();
  const Range mine = shard_.share.experts;
  for (int e = static_cast<int>(mine.begin); e < mine.end && ff_ > 0; ++e) {
    const int first = static_cast<int>(entry_token_.size());
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < k_; ++j)
        if (topk_[t * k_ + j] == e) {
          entry_token_.push_back(t);
          entry_choice_.push_back(t * k_ + j);
          entry_weight_.push_back(topk_w_[t * k_ + j]);
        }
    const int count = static_cast<int>(entry_token_.size()) - first;
    if (count > 0) groups_.push_back({e - static_cast<int>(mine.begin), first, count});
  }
}

// Every entry through its expert: gate and up of all active experts in one
// parallel pass, by features (a thread computes both rows of each feature it
// takes and then their clamped SwiGLU with the expert's biases), then down.
void MoeBlock::run_experts(const LayerWeights& w) {
  const int entries = static_cast<int>(entry_token_.size());
  float* xg = gathered_.data();
  for (int i = 0; i < entries; ++i) std::copy_n(xn_.data() + entry_token_[i] * d_, d_, xg + i * d_);
  const bool q8 = w.gate.wants_q8() || w.up.wants_q8();
  if (q8) quantize_on(pool_, xq_, xg, entries, d_);

  const int64_t ff = ff_, d = d_;
  float* gate_out = gate_up_.data();
  float* up_out = gate_up_.data() + static_cast<int64_t>(entries) * ff;
  float* act = swiglu_.data();
  const int64_t n_groups = static_cast<int64_t>(groups_.size());
  ThreadPool::Chunks features(n_groups * ff, row_grain(w.gate), pool_.size());
  pool_.run([&](int, int) {
    take_group_runs(features, ff, [&](size_t gi, int64_t f0, int64_t f1) {
      const Group& g = groups_[gi];
      const Activations a = token_rows(xg, d, g.first, g.count, q8 ? &xq_ : nullptr);
      matmul_rows(kernels_, w.gate.slice(g.expert * ff, ff), f0, f1, a, gate_out + g.first * ff, ff);
      matmul_rows(kernels_, w.up.slice(g.expert * ff, ff), f0, f1, a, up_out + g.first * ff, ff);
      const float* bg = w.gate_b + g.expert * ff;
      const float* bu = w.up_b + g.expert * ff;
      for (int e = g.first; e < g.first + g.count; ++e)
        kernels_.swiglu(gate_out + e * ff + f0, up_out + e * ff + f0, bg + f0, bu + f0, f1 - f0, c_.swiglu_alpha,
                        c_.swiglu_limit, act + e * ff + f0);
    });
  });
  const bool dq8 = w.down.wants_q8();
  if (dq8) quantize_on(pool_, act_q_, act, entries, ff);
  ThreadPool::Chunks down_rows(n_groups * d, row_grain(w.down), pool_.size());
  std::atomic<bool> in_range{true};
  pool_.run([&](int, int) {
    take_group_runs(down_rows, d, [&](size_t gi, int64_t row0, int64_t row1) {
      const Group& g = groups_[gi];
      const Activations a = token_rows(act, ff, g.first, g.count, dq8 ? &act_q_ : nullptr);
      if (!matmul_rows_fixed(kernels_, w.down.slice(g.expert * d, d), row0, row1, a, entry_weight_.data() + g.first,
                             down_.data() + g.first * d, d))
        in_range = false;
    });
  });
  if (!in_range)
    throw Error(cat("an expert's output left the range of exact sums (", kFixedRangeText,
                    "): the model's numbers have diverged"));
}

// This rank's part of the output: the sum over its entries of their
// weighted down outputs (exact, fixed point).
void MoeBlock::weigh(int n) {
  std::fill_n(out_.data(), n * d_, 0);
  std::fill_n(entry_of_.data(), n * k_, -1);
  for (size_t i = 0; i < entry_choice_.size(); ++i) entry_of_[entry_choice_[i]] = static_cast<int>(i);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k_; ++j) {
      const int i = entry_of_[t * k_ + j];
      if (i < 0) continue;
      const int64_t* y = down_.data() + static_cast<int64_t>(i) * d_;
      int64_t* out = out_.data() + t * d_;
      for (int64_t k = 0; k < d_; ++k) out[k] += y[k];
    }
}

// x += the summed output and the chosen experts' weighted down biases.
void MoeBlock::add_to_residual(const LayerWeights& w, float* x, int n) const {
  for (int t = 0; t < n; ++t) {
    float* xt = x + t * d_;
    const int64_t* part = out_.data() + t * d_;
    const int* chosen = topk_.data() + t * k_;
    const float* weight = topk_w_.data() + t * k_;
    for (int64_t k = 0; k < d_; ++k) {
      float bias = 0;
      for (int j = 0; j < k_; ++j) bias += weight[j] * w.down_b[chosen[j] * d_ + k];
      xt[k] += fixed_to_float(part[k]) + bias;
    }
  }
}

}  // namespace tps
