// Generation on every rank: rank 0 schedules (engine/sched/scheduler.h),
// every rank runs each step on its shard and takes part in choosing its
// tokens, and rank 0 hands the tokens to the caller. The one generation loop
// of tps: `tpsrun` with one prompt or many, and the server.
//
// Split inside layers (or on one rank), rank 0 broadcasts each step's plan
// -- the batch, the sequences that join (with their sampling parameters) and
// leave -- and every rank runs it and samples with it, together. Split by
// layers, the ranks form a pipeline: rank 0 sends each step's plan down the
// line and runs its layers, then starts the next step with other sequences
// while the first moves on; the last rank samples and sends the tokens back.
// So with as many sequences as stages every stage is busy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/cache/prompt_cache.h"
#include "engine/model/model.h"
#include "engine/sched/constraint.h"
#include "engine/sched/drafter.h"
#include "engine/sched/generator_options.h"
#include "engine/sched/pick.h"
#include "engine/sched/scheduler.h"
#include "engine/sched/sequence_end.h"
#include "engine/sched/step_plan.h"
#include "engine/step/forward.h"
#include "engine/text/harmony.h"
#include "runtime/clock.h"
#include "runtime/exchange.h"
#include "runtime/thread_pool.h"

namespace tps {

// What a sequence asks for besides its prompt. The generator ends it at its
// stop tokens, at max_new_tokens, or when the context is full.
struct SequenceParams {
  SamplerParams sampler;
  int max_new_tokens = 256;                  // tokens to generate at most
  int top_logprobs = 0;                      // alternatives each Pick reports
  std::optional<ConstraintSpec> constraint;  // what its output is held to (constraint.h)
  std::vector<int32_t> stop_tokens{kStopTokens.begin(), kStopTokens.end()};  // the model's end of turn
  // Teacher forcing (tpsrun replay): these are the tokens chosen, in order,
  // whatever the logits say -- decoded step by step, or drafted and checked,
  // as generation would. Empty: none.
  std::vector<int32_t> forced;
  // Texts a draft may come from besides the sequence's own (drafter.h's
  // escaped_messages of the prompt, which add() computes when not given: a
  // server gives them, computed on its request thread, off the engine loop).
  std::optional<std::vector<std::vector<int32_t>>> draft_sources;
};

class Generator {
 public:
  // Collective: every rank with the same options (generator_options.h).
  // Sizes the KV pool; with a disk tier (cache_dir), loads its saved blocks
  // into the RAM tier.
  Generator(const Model& model, ThreadPool& pool, Exchange& exchange, const GeneratorOptions& options);

  // Rank 0: a new sequence, which waits for a place; returns its id. Throws
  // InputError when it could never run (Scheduler::add).
  int add(std::vector<int32_t> prompt, const SequenceParams& params);

  // Rank 0, between steps: ends a sequence that waits or runs (a client
  // went away). False, and nothing done, while it is in a step in flight
  // (a pipeline's): try again after it.
  bool cancel(int seq);

  // What run() tells rank 0's caller.
  struct Events {
    // A sequence's next token, and whether the generator ends the sequence
    // with it and why (SequenceEnd::none: it goes on). Return false to end
    // it for the caller's own reasons (a stop string, a client gone, a
    // deadline); once it has ended the answer is not read.
    std::function<bool(int seq, const Pick& pick, SequenceEnd end)> token;
    // A sequence waits for a place, and why (said once per reason).
    std::function<void(int seq, const std::string& why)> waiting;
    // Before each step: the caller may add sequences (when idle -- nothing
    // running or waiting -- it may wait for some); false ends the run.
    std::function<bool(bool idle)> between_steps;
  };
  // Collective: runs steps until rank 0's between_steps says to stop; with
  // a disk tier, then writes the pool's cached blocks to it too.
  void run(const Events& events);

  // What the steps did, on this rank.
  struct Stats {
    int64_t steps = 0, tokens = 0;
    std::map<int, int64_t> step_tokens;  // steps by their token count
    // Constrained sequences that joined on this rank (a sampling one); of
    // those, how many were announced in an earlier plan than their join,
    // and how many found their compile unfinished (a step waited for it).
    int64_t constraint_joins = 0, constraint_joins_announced_before = 0, constraint_join_waits = 0;
    double forward_seconds = 0, sampling_seconds = 0;
    // Decode steps -- those whose every sequence brings its next token (and
    // its draft, if any) -- apart: where a step's time goes once no prompt
    // is being read.
    int64_t decode_steps = 0, decode_tokens = 0;
    StepTimings decode;
    // Decode steps by their token count (a sequence's next token and its
    // draft): how many, and their forward and sampling seconds -- what a
    // verify of k drafted tokens costs against a plain decode step.
    struct StepCost {
      int64_t steps = 0;
      double seconds = 0;
    };
    std::map<int, StepCost> decode_cost;
    double decode_sampling_seconds = 0, decode_exchange_seconds = 0;
    uint64_t decode_exchange_bytes = 0;  // this rank contributed
  };
  const Stats& stats() const { return stats_; }
  const StepTimings& timings() const { return pass_.timings(); }
  uint64_t weight_bytes_read() const { return pass_.weight_bytes_read(); }
  const Scheduler& scheduler() const { return scheduler_; }
  // The compiled constraints (rank 0's validates a request's before it is added).
  ConstraintCache& constraints() { return constraint_cache_; }
  const KvPool& kv() const { return cache_.kv(); }
  const RamTier& tier() const { return cache_.tier(); }
  const DiskTier& disk() const { return cache_.disk(); }

 private:
  void run_together(const Events& events);
  void run_pipeline_first(const Events& events);
  void run_pipeline_stage();
  void apply(const StepPlan& plan);
  StepPlan make_plan(bool stop);
  bool next_step();
  void tell_waiting(const Events& events);
  // A token chosen for a sequence (as a pipeline's last rank sends it back).
  struct Chosen {
    int32_t seq;
    Pick pick;
  };
  void complete(const Batch& batch, const std::vector<Chosen>& chosen, const Events& events);
  SequenceEnd end_of(int seq, int32_t token, int computed) const;
  // The sampling ranks' picks of the next tokens of a batch's entries that
  // have logits, from their rows (masked first where a sequence is
  // constrained), all chosen together: one exchange per round, not per
  // entry. A draft's rows give the tokens it got right and the one after.
  std::vector<Chosen> choose(const Batch& batch);
  void count_step(const Batch& batch, double forward_seconds);

  const Model& model_;
  Exchange& exchange_;
  Exchange alone_;
  ForwardPass pass_;
  PromptCache cache_;
  Scheduler scheduler_;  // rank 0's
  ConstraintCache constraint_cache_;
  // Rank 0's of each sequence added: what it asked, the wait reason last
  // told; a constrained one's spec as the plan carries it, what compiling
  // it took here, and once announced, when it may join.
  struct Added {
    SequenceParams params;
    std::string told;
    std::string constraint;
    double compile_seconds = 0;
    std::optional<Clock::time_point> join_after;
  };
  std::map<int, Added> added_;
  std::vector<int> unannounced_;  // rank 0: constrained sequences added since the last plan
  std::vector<int> held_;         // rank 0: constrained sequences not yet let into the steps
  std::vector<int> leaving_;      // rank 0: finished since the last plan
  // Each rank that samples: the constraints announced, compiled or
  // compiling, of sequences that have not joined yet.
  struct Announced {
    std::shared_future<ConstraintCache::Compiled> compiled;
    int64_t plan = 0;  // the plan that announced it (plans_)
  };
  std::map<int, Announced> announced_;
  int64_t plans_ = 0;  // applied
  // What each rank that samples follows of a running sequence.
  struct Sampled {
    Sampled(const SamplerParams& params, int top_logprobs) : sampler(params), alternatives(top_logprobs) {}
    Sampler sampler;
    int alternatives = 0;  // top_logprobs
    std::optional<SequenceConstraint> constraint;
    std::vector<int32_t> forced;  // a replay's tokens, and the next one's index
    size_t next_forced = 0;
  };
  std::map<int, Sampled> sampled_;
  std::vector<float> logits_;  // [logit rows][the rank's vocabulary rows]
  Batch batch_;
  Stats stats_;
  StepCostFit step_cost_;  // of the decode steps: rank 0's scheduler sizes drafts by it
  // At the end of the last step counted: what the next step adds is its own.
  StepTimings counted_;
  double counted_sampling_ = 0, counted_exchange_ = 0;
  uint64_t counted_exchange_bytes_ = 0;
};

}  // namespace tps
