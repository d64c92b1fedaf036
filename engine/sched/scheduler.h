// Continuous batching (rank 0): which sequences run in the next step and
// where their keys and values go. Each step takes the next token of every
// running sequence, then prompts in arrival order, in chunks, up to a token
// budget -- so a long prompt never holds the others back for more than one
// chunk, and while other prompts wait a chunk takes at most half the budget,
// so one that arrives during a long prompt starts at the next step -- and
// sequences join and leave at any step.
//
// A sequence is admitted (arrival order, passing over those held, up to
// max_sequences at once) when
// the KV blocks it may need can be promised to it: its full-attention
// blocks for min(prompt + max_new_tokens, context) positions, less those it reuses,
// and a sliding window's worth of sliding blocks (a shared headroom covers
// what a prompt chunk needs beyond the window). Until then it waits, and
// says why. Its prompt first reuses the longest prefix of whole blocks the
// prefix cache holds (engine/cache/block_manager.h), keeping at least one
// token to compute; sliding blocks older than the window go back as it
// moves on, and when it ends its last window's stay cached beside its full
// blocks, so that a next turn that repeats its answer (an agent's, sent back
// whole) reuses that too. The windows before the prompt's message
// boundaries (boundary_token) are kept longer than other cached blocks
// (BlockManager::keep): a next request that parts from this prompt at a
// message -- an agent's drops the turn before's reasoning -- reuses up to
// there.
//
// With speculation (draft_tokens > 0), a decoding sequence's next token
// comes with a draft of the tokens that may follow it (engine/sched/
// drafter.h), logits wanted for each; the generator keeps the drafted
// tokens the model would have chosen itself, and ran() rolls the sequence
// back past the first it did not: those positions' keys and values are
// written again by the steps that compute them for real, and the sliding
// blocks only they reached go back.
//
// With a RAM tier (engine/cache/tier_index.h), a cached block the pool is
// about to reuse is saved to it first, and a prefix block the pool lacks
// but the tier has is allocated and copied back: the step carries those
// copies (Batch::copies), and the prompt computes only the rest.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "engine/cache/block_manager.h"
#include "engine/cache/tier_index.h"
#include "engine/sched/drafter.h"
#include "engine/step/batch.h"

namespace tps {

struct SchedulerOptions {
  int max_sequences = 1;  // running at once (--parallel)
  int step_tokens = 512;  // per step (--batch)
  int context = 4096;     // positions per sequence (--ctx)
  int full_blocks = 0;    // the KV pool (engine/cache/kv_pool.h)
  int sliding_blocks = 0;
  int window = 128;  // the model's sliding window
  int stages = 1;    // steps in flight at once (pipeline stages)
  bool prefix_reuse = true;
  int tier_full_slots = 0;  // the RAM tier of the prompt cache (0: none)
  int tier_sliding_slots = 0;
  int32_t boundary_token = -1;      // the token a message begins with (harmony's <|start|>; -1: none)
  int draft_tokens = 0;             // the most drafted tokens a decoding sequence brings to a step (0: none)
  int64_t draft_corpus_tokens = 0;  // the texts of ended sequences drafts may come from (DraftCorpus)
  bool draft_by_cost = false;       // draft what pays (draft_length), else every proposal whole
};

// The sliding blocks a pool needs for the options' sequences: a window's
// worth for each running sequence and the headroom prompt chunks take beyond
// it, for every step in flight; with prefix reuse, a window more per
// sequence, so the end of a finished prompt stays cached for the next turn
// of its conversation (sliding layers need it to reuse the prefix), and a
// few windows more per sequence kept at message boundaries (below).
// In 64 bits: a --batch or --parallel near 2^31 needs more than an int counts.
int64_t sliding_blocks_needed(const SchedulerOptions& options);

class Scheduler {
 public:
  struct Sequence {
    int id = 0;
    std::vector<int32_t> tokens;  // the prompt, then what was generated
    int prompt = 0;               // its prompt's tokens
    int max_new_tokens = 0;       // tokens it may generate
    int computed = 0;             // positions whose keys and values are in the pool
    int reused = 0;               // prompt tokens taken from the prefix cache
    int restored = 0;             // of those, tokens whose blocks came back from the RAM tier
    bool admitted = false, in_flight = false;
    bool held = false;             // waiting, and passed over until let go (hold)
    std::string waiting_for;       // why it waits ("" when it does not)
    std::vector<int32_t> full;     // block table, full-attention layers
    std::vector<int32_t> sliding;  // block table, sliding layers, from block number sliding_block0
    int sliding_block0 = 0;
    std::vector<uint64_t> keys;                   // prefix key of each computed whole block
    int full_promised = 0, sliding_promised = 0;  // promised and not yet drawn
    int headroom = 0;                             // sliding blocks drawn from the shared headroom
    Drafter drafter;
    int drafted = 0, taken = 0;  // drafted tokens checked, and those taken (its own DraftStats)
  };

  explicit Scheduler(const SchedulerOptions& options);

  // A new sequence; it waits for a place. Throws InputError when it could
  // never run: an empty prompt, a prompt longer than the context, more KV
  // blocks than the pool has.
  int add(std::vector<int32_t> prompt, int max_new_tokens);

  // Builds the next step from the sequences not in flight (see above), marks
  // them in flight, and takes their blocks. False when nothing can run.
  // Entry i of the batch is sequence batch.entries[i].seq.
  bool next_step(Batch& batch);
  // The step's entry ran: the keys and values of its first `positions`
  // positions are the sequence's (all of them, but for a draft: its next
  // token's and those of the drafted tokens taken, whose tokens append()
  // has added first).
  void ran(const BatchEntry& entry, int positions);
  // The token chosen after an entry with logits.
  void append(int seq, int32_t token);
  // A text the sequence's drafts may copy besides its own (Drafter::add_source).
  void add_draft_source(int seq, std::span<const int32_t> text) { seqs_.at(seq).drafter.add_source(text); }
  // A waiting sequence is held out of the steps, or let go: the generator
  // holds a constrained one while the other ranks compile its constraint.
  void hold(int seq, bool held);
  // Ends a sequence (running or waiting) and lets its blocks go.
  void finish(int seq);

  const Sequence& sequence(int seq) const { return seqs_.at(seq); }
  // No position left for the sequence's next token.
  bool context_full(int seq) const { return seqs_.at(seq).computed >= opt_.context; }
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int next_waiting() const { return waiting_.empty() ? -1 : waiting_.front(); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Sequences admitted by the last next_step, in order.
  const std::vector<int>& admitted() const { return admitted_; }
  const BlockManager& blocks() const { return blocks_; }
  const TierIndex& tier() const { return tier_; }
  // Before the first step: a RAM tier slot holds this key's block (loaded
  // from the disk tier), most recently used. False when the slot is taken.
  bool adopt(BlockKind k, int slot, uint64_t key) { return tier_.adopt(k, slot, key); }
  // The RAM tier's traffic: blocks saved to it and restored from it, and
  // admitted prompts whose prefix lookup ended on a block in neither the
  // pool nor the tier (counted with a tier only).
  struct TierStats {
    int64_t saved = 0, restored = 0, misses = 0, hits = 0;  // hits: admitted prompts with a restored block
  };
  const TierStats& tier_stats() const { return tier_stats_; }
  // Speculation: steps of a sequence that brought a draft, the tokens
  // drafted and those taken.
  struct DraftStats {
    int64_t verifies = 0, drafted = 0, taken = 0;
  };
  const DraftStats& draft_stats() const { return draft_stats_; }
  // A step's time as fixed + per_token x its tokens (any unit): what a
  // drafted token costs against the tokens a step gives (draft_length).
  // Until the generator has measured it: a drafted token costs half a decode
  // step alone (20b-4l, 2 threads, AVX-512 Zen 5).
  void set_step_cost(double fixed, double per_token) { step_fixed_ = fixed, step_per_token_ = per_token; }
  const DraftCorpus& draft_corpus() const { return corpus_; }
  const SchedulerOptions& options() const { return opt_; }

 private:
  // A prefix block to copy back from the RAM tier: the index in its table.
  struct Restore {
    BlockKind kind;
    int index, slot;
    uint64_t key;
  };
  struct Reuse {
    std::vector<Restore> restores;
    bool missed = false;  // the lookup ended on a block neither the pool nor the tier has
  };
  bool admit(Sequence& s);
  Reuse reuse_prefix(Sequence& s);
  void restore(Sequence& s, const std::vector<Restore>& restores);
  int allocate(BlockKind k);
  void schedule(Sequence& s, int count, Batch& batch, int most_drafted = 0, double token_cost = 0);
  void take_full(Sequence& s, int positions);
  void take_sliding(Sequence& s, int first_position, int positions);
  void drop_sliding_before(Sequence& s, int block);
  void give_back_sliding(Sequence& s);
  void let_go(Sequence& s);

  SchedulerOptions opt_;
  BlockManager blocks_;
  TierIndex tier_;
  TierStats tier_stats_;
  DraftStats draft_stats_;
  DraftCorpus corpus_;
  double step_fixed_ = 1, step_per_token_ = 1;
  std::vector<int32_t> step_tokens_;  // an entry's tokens with its draft
  std::vector<BlockCopy> copies_;     // of the step being built
  int window_blocks_;                 // sliding blocks a sequence holds between steps, at most
  std::map<int, Sequence> seqs_;
  std::vector<int> running_;  // admission order
  std::deque<int> waiting_;   // arrival order
  std::vector<int> admitted_;
  int next_id_ = 0;
};

}  // namespace tps
