// The mixture-of-experts block of a gpt-oss layer (spec §2.5) on a rank's
// shard: the router (with bias) picks the top-k experts of every token by
// raw logit, the chosen logits' softmax weighs them; each expert is a
// clamped SwiGLU feed-forward (gate and up with biases, down with bias); the
// block's output is the weighted sum, added to the residual stream.
//
// Every rank routes every token the same way (the same inputs on every
// rank). A rank computes its experts (experts split) or its features of
// every expert (tensor split); the partial outputs are summed across ranks,
// and the chosen experts' weighted down biases added once, after the sum.
// The down projections are split-invariant sums (kernels/matmul.h,
// matmul_rows_fixed), each entry's weighted by its choice's weight inside
// the sum, and the entries of a token are added exactly: the output has one
// rank's bits whichever rank holds which experts or features.
// The tokens of a step are grouped by expert, so an expert's weights are read
// once for all the tokens that chose it, whichever sequence they belong to.
//
// Buffers are sized once, for the most tokens a step may carry: run()
// allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/step/step_timings.h"
#include "runtime/exchange.h"
#include "runtime/thread_pool.h"

namespace tps {

// Top-k experts by raw router logit (ties: the lower index first) and the
// softmax of the chosen logits. experts/weights have k entries.
void select_experts(std::span<const float> logits, int k, int* experts, float* weights);

class MoeBlock {
 public:
  // The bytes of the buffers the constructor sizes, from the shapes alone.
  static uint64_t buffer_bytes(const ModelConfig& config, const Shard& shard, int step_tokens);
  MoeBlock(const ModelConfig& config, const Shard& shard, int step_tokens, ThreadPool& pool, Exchange& exchange,
           const KernelSet& kernels);

  // x [n][d], the residual stream of n tokens: x += the block's output.
  // Returns the bytes of expert weights it read (those of the experts the
  // tokens chose, once each).
  uint64_t run(const LayerWeights& w, float* x, int n, StepTimings& timings);

 private:
  void route(const LayerWeights& w, const float* x, int n);
  void group_by_expert(int n);
  void run_experts(const LayerWeights& w);
  void weigh(int n);
  void add_to_residual(const LayerWeights& w, float* x, int n) const;

  const ModelConfig& c_;
  const Shard& shard_;
  ThreadPool& pool_;
  Exchange& exchange_;
  const KernelSet& kernels_;
  const int64_t d_, ff_;  // residual width; the shard's features of each expert
  const int n_expert_, k_;

  // A run of (token, choice) entries that chose one of the rank's experts.
  struct Group {
    int expert, first, count;  // local expert index; entries [first, first + count)
  };
  std::vector<float> xn_;                        // [step_tokens][d] the normalized input
  QuantizedActivations xq_;                      // its int8 form (router), then the gathered inputs' (gate, up)
  std::vector<float> router_;                    // [step_tokens][n_expert] router logits
  std::vector<int> topk_;                        // [step_tokens][k] chosen experts
  std::vector<float> topk_w_;                    // [step_tokens][k] their weights
  std::vector<Group> groups_;                    // by local expert, those chosen
  std::vector<int> entry_token_, entry_choice_;  // [entries]: the token, its t * k + j
  std::vector<float> entry_weight_;              // [entries]: its choice's weight
  std::vector<int> entry_of_;                    // [step_tokens][k] entry of each choice, -1 if not this rank's
  std::vector<float> gathered_;                  // [entries][d] the entries' inputs
  std::vector<float> gate_up_;                   // [entries][ff] gate outputs, then [entries][ff] up outputs
  std::vector<float> swiglu_;                    // [entries][ff]
  QuantizedActivations act_q_;                   // the SwiGLU outputs, int8
  std::vector<int64_t> down_;                    // [entries][d] weighted, fixed point
  std::vector<int64_t> out_;                     // [step_tokens][d] this rank's part of the output, fixed point
};

}  // namespace tps
