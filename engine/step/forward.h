// The gpt-oss forward pass on one rank (spec §2): embeddings, then per
// layer attention (q/k/v/o with biases, YaRN RoPE, grouped-query attention
// with per-head sinks, a sliding window on the layers the config says) and
// the MoE block (router with bias, top-k, softmax over the chosen, clamped
// SwiGLU experts, weighted sum), residuals, final norm, unembedding.
//
// A Session is one conversation: its KV cache and every activation buffer,
// sized once; forward() allocates nothing. Prompt tokens go through in
// batches (each weight row read once per batch); a decode step is a batch
// of one. Work is split by rows across the thread pool, each output element
// computed by one thread, so results do not depend on the thread count.
//
// A session runs the rank's shard of the model (engine/model/weights.h). Split
// inside layers (experts, tensor), every rank runs every layer on its heads,
// experts or features, and the partial outputs of attention and of the MoE
// block are summed across ranks (the two exchange points of a layer), the
// biases of the summed outputs added once after the sum. Split by layers,
// a rank receives the hidden state from the rank before, runs its layers
// and sends it on. Logits are of the rank's vocabulary rows only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kernels/matmul.h"
#include "engine/model/model.h"
#include "engine/step/kv_cache.h"
#include "engine/step/moe.h"
#include "engine/step/rope.h"
#include "engine/step/step_timings.h"
#include "runtime/exchange.h"
#include "runtime/thread_pool.h"

namespace tps {

struct SessionOptions {
  int n_ctx = 4096;                    // positions the KV cache holds
  int max_batch = 512;                 // prompt tokens per forward step (llama.cpp's default micro-batch)
  bool yarn_truncate = false;          // llama.cpp's rounded YaRN range (see rope.h)
  const KernelSet* kernels = nullptr;  // nullptr: the CPU's best
};

class Session {
 public:
  // exchange connects the ranks that share the model (a solo one for one rank).
  Session(const Model& model, const SessionOptions& options, ThreadPool& pool, Exchange& exchange);

  // Runs tokens at the next positions; every rank calls it with the same
  // tokens. Logits of the rank's vocabulary rows: of the last token into
  // `logits` ([rows]), or of every token ([n][rows]) when all_logits; empty
  // on a rank without output rows. Throws InputError if the tokens do not
  // fit in the context.
  void forward(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits);

  // Seconds spent in each part of the forward pass since the last reset of
  // the timings: where a step's time goes, for --json and benchmarks.
  using Timings = StepTimings;
  const Timings& timings() const { return timings_; }
  void reset_timings() { timings_ = Timings{}; }

  int position() const { return pos_; }
  int context() const { return opt_.n_ctx; }
  void reset() { pos_ = 0; }

 private:
  void step(const int32_t* tokens, int n, bool all_logits, float* logits);
  void attention(int layer, int n);
  // The int8 form of x's n rows when q8, and the view the products take.
  Activations prepare(const float* x, int n, int64_t cols, bool q8);

  const ModelConfig& c_;
  const ModelWeights& w_;
  const Shard& shard_;
  SessionOptions opt_;
  ThreadPool& pool_;
  Exchange& exchange_;
  const KernelSet& kernels_;
  // The shard's attention: query heads, their width, the KV width.
  int n_head_, q_w_, kv_w_;
  RopeTable rope_;
  int pos_ = 0;
  Timings timings_;

  std::vector<LayerCache> cache_;  // by global layer; only the shard's are sized

  // Activations, [max_batch][width] f32.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_;
  QuantizedActivations xq_;  // quantized input of the current product
  MoeBlock moe_;
  std::vector<std::vector<float>> scores_;  // per thread: attention scores [heads per kv head][n_ctx + 1]
};

}  // namespace tps
