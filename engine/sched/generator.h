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
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/sched/constraint.h"
#include "engine/sched/pick.h"
#include "engine/sched/scheduler.h"
#include "engine/sched/sequence_end.h"
#include "engine/step/disk_tier.h"
#include "engine/step/forward.h"
#include "engine/step/kv_pool.h"
#include "engine/step/ram_tier.h"
#include "engine/text/harmony.h"
#include "runtime/clock.h"
#include "runtime/exchange.h"
#include "runtime/thread_pool.h"

namespace tps {

// The most drafted tokens a sequence checks a step with speculation on
// (--speculate auto); the drafter's own length adapts below it.
constexpr int kAutoDraftTokens = 16;
// The ended sequences' tokens rank 0 keeps for drafts to come from
// (DraftCorpus: about 44 bytes a token, so 11 MiB).
constexpr int64_t kDraftCorpusTokens = 1 << 18;

struct GeneratorOptions {
  int max_sequences = 1;  // running at once
  int step_tokens = 512;  // per step
  int context = 4096;     // positions per sequence
  int kv_positions = 0;   // the full-attention pool, in positions (0: context x max_sequences) ...
  uint64_t kv_bytes = 0;  // ... or the whole pool's bytes on each rank
  bool prefix_reuse = true;
  uint64_t cache_ram_bytes = 0;     // the prompt cache's RAM tier on each rank (--cache-ram; 0: none)
  std::string cache_dir;            // its disk tier (--cache-dir; "": none), within cache_ram_bytes per rank
  KvType kv_type = kDefaultKvType;  // the KV pool's keys and values (kernels/kv_format.h)
  int draft_tokens = 0;             // speculation: the most drafted tokens a sequence checks a step (0: none) ...
  bool draft_by_cost = false;       // ... as many as pay by the measured step cost (else every proposal)
  bool yarn_truncate = false;
  const KernelSet* kernels = nullptr;
};

// The scheduler's options and so the KV pool for these options on a rank
// with this shard (what the Generator uses; tpstopo --model shows it), and
// the bytes of that pool. Throws InputError for options that cannot work.
SchedulerOptions scheduler_options(const GeneratorOptions& options, const ModelConfig& config, const Shard& shard);
uint64_t kv_pool_bytes(const SchedulerOptions& options, KvType type, const ModelConfig& config, const Shard& shard);
// All a Generator with these options allocates on such a rank, whatever its
// threads: the KV pool, the forward pass's buffers, the logits and the RAM
// tier at its cap (the block tables' bookkeeping, under 1% of the pool,
// aside). From the shapes alone, so a launcher can check it against the
// rank's memory first.
uint64_t generator_bytes(const GeneratorOptions& options, const ModelConfig& config, const Shard& shard);
// The RAM tier's size on such a rank, in units of kTierFullPerSliding full
// blocks and one sliding block (a cached prefix keeps all its full blocks
// but only its last window's sliding ones), so that units x a unit's bytes
// stay within cache_ram_bytes. The Generator takes the least of every rank's.
constexpr int kTierFullPerSliding = 8;
uint64_t tier_unit_bytes(KvType type, const ModelConfig& config, const Shard& shard);
int tier_units(const GeneratorOptions& options, const ModelConfig& config, const Shard& shard);

// What a sequence asks for besides its prompt. The generator ends it at its
// stop tokens, at max_new_tokens, or when the context is full.
struct SequenceParams {
  SamplerParams sampler;
  int max_new_tokens = 256;  // tokens to generate at most
  int top_logprobs = 0;      // alternatives each Pick reports
  std::string constraint;    // a grammar its output is held to (constraint.h); empty: none
  std::vector<int32_t> stop_tokens{kStopTokens.begin(), kStopTokens.end()};  // the model's end of turn
  // Teacher forcing (tpsrun replay): these are the tokens chosen, in order,
  // whatever the logits say -- decoded step by step, or drafted and checked,
  // as generation would. Empty: none.
  std::vector<int32_t> forced;
};

class Generator {
 public:
  // Collective: every rank with the same options. Sizes the KV pool; with
  // a disk tier (cache_dir), loads its saved blocks into the RAM tier.
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
  const KvPool& kv() const { return kv_; }
  const RamTier& tier() const { return tier_; }
  const DiskTier& disk() const { return disk_; }

 private:
  struct Join {
    int32_t seq, top_logprobs, max_new_tokens;  // max_new_tokens: what its constraint's analysis budget leaves room in
    SamplerParams sampler;
  };
  struct Plan;
  void run_together(const Events& events);
  void run_pipeline_first(const Events& events);
  void run_pipeline_stage();
  void apply(const Plan& plan);
  void load_disk_tier(Clock::time_point started);  // started: before the tier's files were checked
  void save_pool_to_disk();
  void copy_blocks(const std::vector<BlockCopy>& copies);
  Plan make_plan(bool stop);
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
  KvPool kv_;
  RamTier tier_;
  DiskTier disk_;
  bool disk_asked_ = false;               // --cache-dir given, with a RAM tier: the same on every rank
  Scheduler scheduler_;                   // rank 0's
  std::map<int, SequenceParams> params_;  // rank 0: of every sequence added
  std::map<int, Sampler> samplers_;       // by sequence: on every rank that samples
  std::map<int, int> alternatives_;       // top_logprobs by sequence, where samplers are
  ConstraintCache constraint_cache_;
  std::map<int, SequenceConstraint> constraints_;  // by sequence, where samplers are
  std::vector<int> leaving_;                       // rank 0: finished since the last plan
  std::map<int, std::string> told_;                // rank 0: the wait reason last told per sequence
  struct Forced {
    std::vector<int32_t> tokens;
    size_t next = 0;
  };
  std::map<int, Forced> forced_;  // by sequence, where samplers are
  std::vector<float> logits_;     // [max_sequences][the rank's vocabulary rows]
  Batch batch_;
  Stats stats_;
  // A least-squares line through the decode steps' (tokens, seconds), each
  // step's weight decaying: what a step costs per token (rank 0's scheduler
  // sizes drafts by it).
  struct StepCostFit {
    double w = 0, n = 0, t = 0, nn = 0, nt = 0;
    void add(double tokens, double seconds);
    bool line(double& fixed, double& per_token) const;
  };
  StepCostFit step_cost_;
  // At the end of the last step counted: what the next step adds is its own.
  StepTimings counted_;
  double counted_sampling_ = 0, counted_exchange_ = 0;
  uint64_t counted_exchange_bytes_ = 0;
};

}  // namespace tps
