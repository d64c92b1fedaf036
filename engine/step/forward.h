// The gpt-oss forward pass on one rank (spec §2): embeddings, then per
// layer attention (q/k/v/o with biases, YaRN RoPE, grouped-query attention
// with per-head sinks, a sliding window on the layers the config says) and
// the MoE block (engine/step/moe.h), residuals, final norm, unembedding.
//
// A step runs a Batch (engine/step/batch.h): runs of consecutive positions
// of any number of sequences, their keys and values in a KvPool. Every
// matrix product runs once over all the step's tokens (each weight row read
// once per step, whoever the tokens belong to); the MoE block groups them by
// expert; attention runs per token over its own sequence's blocks. A
// sequence's results do not depend on who shares its step: each output
// element is computed by one thread from the same inputs in the same order,
// whatever the batch, the thread count or the split of work.
//
// The pass holds the activation buffers, sized once for the most tokens a
// step may carry: run() allocates nothing. It runs the rank's shard of the
// model (engine/model/weights.h). Split inside layers (experts, tensor),
// every rank runs every layer on its heads, experts or features, and the
// partial outputs of attention and of the MoE block are summed across ranks
// (the two exchange points of a layer), the biases of the summed outputs
// added once after the sum. Those two outputs are split-invariant sums
// (kernels/matmul.h, matmul_rows_fixed) on one rank too, so any split gives
// one rank's bits. Split by layers, a rank receives the hidden
// state from the rank before, runs its layers and sends it on. Logits are of
// the rank's vocabulary rows.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cache/kv_pool.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model.h"
#include "engine/step/batch.h"
#include "engine/step/moe.h"
#include "engine/step/rope.h"
#include "engine/step/step_timings.h"
#include "runtime/exchange.h"
#include "runtime/mapped_file.h"
#include "runtime/thread_pool.h"

namespace tps {

struct ForwardOptions {
  int step_tokens = 512;               // tokens per step, at most (llama.cpp's default micro-batch)
  int context = 4096;                  // positions a sequence may reach
  bool yarn_truncate = false;          // llama.cpp's rounded YaRN range (see rope.h)
  const KernelSet* kernels = nullptr;  // nullptr: the CPU's best
};

// Throws InputError naming --ctx unless 1 <= context <= the model's context
// length: the one check of a context, made before anything is sized by it.
void check_context(const ModelConfig& config, int context);

class ForwardPass {
 public:
  // exchange connects the ranks that share the model (a solo one for one rank).
  ForwardPass(const Model& model, const ForwardOptions& options, ThreadPool& pool, Exchange& exchange);

  // The bytes of the activation buffers a pass with these options holds on
  // a rank with this shard (the MoE block's included; none is per thread),
  // from the shapes alone: what a launcher checks before allocating.
  static uint64_t buffer_bytes(const ModelConfig& config, const Shard& shard, const ForwardOptions& options);

  // Runs one step; every rank calls it with the same batch (at most
  // step_tokens tokens, positions below context, block tables that cover
  // every position a token sees). Stores the step's keys and values in kv.
  // logits: [batch.logit_rows()][the rank's vocabulary rows], entry by entry
  // (nothing on a rank without output rows). Throws InputError for a token
  // outside the vocabulary.
  void run(const Batch& batch, KvPool& kv, float* logits);

  // Seconds spent in each part of the forward pass since the last reset.
  const StepTimings& timings() const { return timings_; }
  // Bytes of weight matrices the steps so far have read from memory: every
  // matrix of the shard's layers once a step, the experts the step's tokens
  // chose once each, the output head when logits were wanted.
  uint64_t weight_bytes_read() const { return weight_bytes_read_; }
  const ForwardOptions& options() const { return opt_; }
  const ModelConfig& config() const { return c_; }
  int64_t vocab_rows() const { return w_.output.rows; }

 private:
  void attention(int layer, const Batch& batch, KvPool& kv);
  // attn_ = the attention of every token's query heads over its visible
  // positions (the q, k and v of the step stored).
  void attend(int layer, const Batch& batch, const KvPool& kv);
  // One round's (tile or token, kv head, chunk) items: each chunk's states
  // into partials_, then each (token, kv head)'s merged into its running
  // state in the order they were added.
  void attend_round(int layer, const Batch& batch, const KvPool& kv);
  // Adds an item to the round, running the round first when it is full.
  void add_item(int layer, const Batch& batch, const KvPool& kv, int t, int tokens, int g, int first, int last);
  AttentionState running_state(int t, int g);
  // The int8 form of x's n rows when q8, and the view the products take.
  Activations prepare(const float* x, int n, int64_t cols, bool q8);

  const ModelConfig& c_;
  const ModelWeights& w_;
  const MappedFile& embd_file_;  // the embeddings are read from the mapping
  const Shard& shard_;
  ForwardOptions opt_;
  ThreadPool& pool_;
  Exchange& exchange_;
  const KernelSet& kernels_;
  // The shard's attention: query heads, their width, the KV width.
  int n_head_, q_w_, kv_w_;
  RopeTable rope_;
  StepTimings timings_;
  uint64_t weight_bytes_read_ = 0;
  uint64_t dense_bytes_ = 0;  // the shard's attention and router matrices, all layers

  // The step's tokens: each one's entry and position.
  std::vector<int> token_entry_, token_pos_;
  // Attention's tiles: runs of up to kPrefillTile consecutive tokens of one
  // entry (consecutive positions), in the order attention takes them (most
  // positions seen first). The chunks every token of a tile sees whole are
  // read once for all of them (KvPool::attend_tile_chunk); the rest (the
  // diagonal, a sliding window's edges) a token at a time. 16: of 4, 8 and
  // 16 the fastest in bench_kernels' attention/prefill cases at 16k and 32k
  // positions, every KV type, 1 and 2 threads (PERFORMANCE.md).
  static constexpr int kPrefillTile = 16;
  struct Tile {
    int t, tokens;
  };
  std::vector<Tile> tiles_;
  // Activations, [step_tokens][width] f32; the attention output's fixed-point sums.
  std::vector<float> x_, xn_, q_, k_, v_, attn_;
  std::vector<int64_t> proj_;
  QuantizedActivations xq_;  // quantized input of the current product
  MoeBlock moe_;
  // Attention's work in rounds of at most kAttentionRound chunk states:
  // the round's items (tokens [t, t + tokens) of a tile, or one token; kv
  // head; first and last position; their first state in partials_), their
  // chunks' states; each (token, kv head)'s states in the order they merge;
  // each (token, query head)'s running max and sum (its weighted values in
  // attn_).
  struct AttentionItem {
    int t, tokens, g, first, last, state;
  };
  struct Merge {
    int key, state;  // key: token x kv heads + kv head
  };
  static constexpr int kAttentionRound = 1024;
  std::vector<AttentionItem> items_;
  std::vector<Merge> merges_;
  int round_items_ = 0, round_states_ = 0;
  std::vector<float> partials_, running_max_, running_sum_;
};

}  // namespace tps
