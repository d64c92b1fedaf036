// One sequence on the forward pass, for callers that run one at a time
// (teacher-forced scoring, the tests, the benchmarks): its own KV pool, a
// block table that is the identity on full-attention layers and a ring on
// sliding ones, and its position. Several sequences share a step through
// the scheduler instead (engine/sched/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/step/forward.h"

namespace tps {

struct SessionOptions {
  int context = 4096;                  // positions the sequence may reach
  int step_tokens = 512;               // prompt tokens per step (llama.cpp's default micro-batch)
  KvType kv_type = kDefaultKvType;     // the KV pool's keys and values (kernels/kv_format.h)
  bool yarn_truncate = false;          // llama.cpp's rounded YaRN range (see rope.h)
  const KernelSet* kernels = nullptr;  // nullptr: the CPU's best
};

class Session {
 public:
  // exchange connects the ranks that share the model (a solo one for one rank).
  Session(const Model& model, const SessionOptions& options, ThreadPool& pool, Exchange& exchange);

  // Runs tokens at the next positions, in steps of step_tokens; every rank
  // calls it with the same tokens. Logits of the rank's vocabulary rows: of
  // the last token into `logits` ([rows]), or of every token ([n][rows])
  // when all_logits; empty on a rank without output rows. Throws InputError
  // if the tokens do not fit in the context.
  void forward(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits);

  // Starts a new sequence at position 0 on the same KV pool (what the old
  // one left is overwritten before any token reads it).
  void restart() { pos_ = 0; }

  const StepTimings& timings() const { return pass_.timings(); }
  int position() const { return pos_; }
  int context() const { return opt_.context; }

 private:
  SessionOptions opt_;
  ForwardPass pass_;
  KvPool kv_;
  int pos_ = 0;
  int ring_ = 0;  // sliding blocks, used as a ring
  std::vector<int32_t> full_table_, sliding_table_;
  Batch batch_;
};

}  // namespace tps
