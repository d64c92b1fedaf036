#include "engine/sched/scheduler.h"

#include <algorithm>
#include <climits>

#include "engine/cache/kv_pool.h"
#include "engine/cache/prefix_key.h"
#include "runtime/error.h"

namespace tps {

namespace {
// Sliding blocks a sequence holds to decode: those of a window of positions
// and the one its next token starts.
int window_blocks(int window) { return blocks_for(window) + 1; }
// What prompt chunks may take beyond that, in one step: a chunk of c tokens
// spans at most blocks_for(c) + 1 more.
int64_t headroom_blocks(const SchedulerOptions& o) {
  return int64_t{o.stages} * (blocks_for(o.step_tokens) + 2 * int64_t{o.max_sequences});
}
// The sliding blocks kept for reuse up to message boundaries (with prefix
// reuse): kKeptWindows windows per running sequence.
constexpr int kKeptWindows = 4;
int64_t kept_blocks(const SchedulerOptions& o) {
  return o.prefix_reuse ? int64_t{kKeptWindows} * o.max_sequences * window_blocks(o.window) : 0;
}
}  // namespace

int64_t sliding_blocks_needed(const SchedulerOptions& o) {
  const int64_t window = int64_t{o.max_sequences} * window_blocks(o.window);
  return window + headroom_blocks(o) + (o.prefix_reuse ? window : 0) + kept_blocks(o);
}

Scheduler::Scheduler(const SchedulerOptions& o)
    : opt_(o),
      blocks_(o.full_blocks, o.sliding_blocks, 0, static_cast<int>(std::min<int64_t>(kept_blocks(o), INT_MAX))),
      tier_(o.tier_full_slots, o.tier_sliding_slots),
      corpus_(o.draft_tokens > 0 ? o.draft_corpus_tokens : 0),
      window_blocks_(window_blocks(o.window)) {
  if (!blocks_.promise(BlockKind::sliding, headroom_blocks(o)))
    throw InputError(cat("the KV pool's ", o.sliding_blocks, " sliding-window blocks are fewer than the ",
                         sliding_blocks_needed(o), " that ", o.max_sequences, " sequences need"));
}

int Scheduler::add(std::vector<int32_t> prompt, int max_new_tokens) {
  if (prompt.empty()) throw InputError("the prompt is empty");
  if (static_cast<int>(prompt.size()) > opt_.context)
    throw InputError(
        cat("the prompt is ", prompt.size(), " tokens, longer than the context of ", opt_.context, " (use --ctx)"));
  const int need = blocks_for(std::min<int>(static_cast<int>(prompt.size()) + max_new_tokens, opt_.context));
  if (need > blocks_.total(BlockKind::full))
    throw InputError(cat("a sequence of up to ",
                         std::min<int>(static_cast<int>(prompt.size()) + max_new_tokens, opt_.context),
                         " positions needs ", need, " KV blocks; the pool has ", blocks_.total(BlockKind::full),
                         " (use a larger --kv-size)"));
  Sequence s;
  s.id = next_id_++;
  s.prompt = static_cast<int>(prompt.size());
  s.tokens = std::move(prompt);
  s.max_new_tokens = max_new_tokens;
  seqs_.emplace(s.id, std::move(s));
  waiting_.push_back(next_id_ - 1);
  return next_id_ - 1;
}

bool Scheduler::next_step(Batch& batch) {
  batch.clear();
  admitted_.clear();
  copies_.clear();
  int budget = opt_.step_tokens, taken = 0;
  // A pipeline's step takes its share of the running sequences, so the next
  // step has others to keep the first stage busy while this one moves on.
  const int active = std::min(opt_.max_sequences, running() + waiting());
  const int cap = opt_.stages > 1 ? std::max(1, (active + opt_.stages - 1) / opt_.stages) : INT_MAX;
  auto remaining = [](const Sequence& s) { return static_cast<int>(s.tokens.size()) - s.computed; };
  // A prompt chunk takes at most half the budget while another prompt
  // waits for its turn, so a short request that arrives during a long
  // prompt starts within the next step instead of after the long one.
  int prompts = static_cast<int>(waiting_.size());
  for (int id : running_) prompts += remaining(seqs_.at(id)) > 1;
  const int chunk = prompts > 1 ? std::max(1, opt_.step_tokens / 2) : opt_.step_tokens;
  // Every running sequence's next token (with its draft, from what the
  // budget has left beyond the others' next tokens), then prompts in chunks.
  int decoding = 0;
  for (int id : running_) decoding += !seqs_.at(id).in_flight && remaining(seqs_.at(id)) == 1;
  // A drafted token's cost against the tokens a step of the decoding
  // sequences gives: per token / (the step's time / its tokens).
  const double token_cost =
      step_per_token_ * std::max(decoding, 1) / std::max(step_fixed_ + step_per_token_ * std::max(decoding, 1), 1e-12);
  for (int pass = 0; pass < 2; ++pass)
    for (int id : running_) {
      Sequence& s = seqs_.at(id);
      const int r = remaining(s);
      if (s.in_flight || r == 0 || (pass == 0) != (r == 1) || budget == 0 || taken == cap) continue;
      const int count = std::min({r, budget, pass == 0 ? 1 : chunk});
      const int most_drafted = pass == 0 ? std::min(opt_.draft_tokens, budget - decoding) : 0;
      decoding -= pass == 0;
      schedule(s, count, batch, most_drafted, token_cost);
      budget -= batch.entries.back().count, ++taken;
    }
  for (auto it = waiting_.begin();
       it != waiting_.end() && running() < opt_.max_sequences && budget > 0 && taken < cap;) {
    Sequence& s = seqs_.at(*it);
    if (s.held) {  // later ones may pass it
      ++it;
      continue;
    }
    if (!admit(s)) break;
    it = waiting_.erase(it);
    running_.push_back(s.id);
    admitted_.push_back(s.id);
    const int count = std::min({remaining(s), budget, chunk});
    schedule(s, count, batch);
    budget -= count, ++taken;
  }
  if (!waiting_.empty() && running() >= opt_.max_sequences)
    seqs_.at(waiting_.front()).waiting_for = cat("all ", opt_.max_sequences, " sequences are running");
  batch.copies.swap(copies_);
  return !batch.entries.empty();
}

void Scheduler::hold(int seq, bool held) {
  Sequence& s = seqs_.at(seq);
  s.held = held;
  s.waiting_for = held ? "its output constraint is compiling on every rank" : "";
}

bool Scheduler::admit(Sequence& s) {
  const Reuse reuse = opt_.prefix_reuse ? reuse_prefix(s) : Reuse{};
  const int positions = std::min(static_cast<int>(s.tokens.size()) + s.max_new_tokens, opt_.context);
  // Blocks to come back from the tier are drawn from the promise like new ones.
  auto held = [](const std::vector<int32_t>& table) {
    return static_cast<int>(std::count_if(table.begin(), table.end(), [](int32_t id) { return id >= 0; }));
  };
  const int full = blocks_for(positions) - held(s.full);
  const int sliding = std::min(window_blocks_, blocks_for(positions)) - held(s.sliding);
  if (blocks_.unpromised(BlockKind::full) >= full && blocks_.unpromised(BlockKind::sliding) >= sliding) {
    blocks_.promise(BlockKind::full, full), blocks_.promise(BlockKind::sliding, sliding);
    s.full_promised = full, s.sliding_promised = sliding;
    s.admitted = true, s.waiting_for.clear();
    restore(s, reuse.restores);
    tier_stats_.misses += reuse.missed;
    tier_stats_.hits += !reuse.restores.empty();
    return true;
  }
  s.waiting_for =
      cat("the KV pool is full (", full, " blocks needed, ", std::max(0, blocks_.unpromised(BlockKind::full)), " of ",
          blocks_.total(BlockKind::full), " free)");
  let_go(s);  // the reused blocks go back to the cache
  s.full.clear(), s.sliding.clear(), s.keys.clear();
  s.computed = s.reused = s.restored = s.sliding_block0 = 0;
  return false;
}

// The longest run of the prompt's whole blocks the cache has (in the pool,
// else in the RAM tier), keeping one token to compute; on sliding layers its
// last window's blocks must be cached too. Blocks in the pool are held;
// those in the tier are left as -1 in the tables, to restore once admitted.
Scheduler::Reuse Scheduler::reuse_prefix(Sequence& s) {
  Reuse reuse;
  auto look = [&](BlockKind k, uint64_t key, int& slot) {
    const int id = blocks_.find(k, key);
    slot = id < 0 ? tier_.find(k, key) : -1;
    return id;
  };
  std::vector<int32_t> full;
  std::vector<int> full_slots;
  std::vector<uint64_t> keys;
  uint64_t key = 0;
  for (int b = 0; b < (s.prompt - 1) / kKvBlock; ++b) {
    key = prefix_key(key, std::span<const int32_t>(s.tokens).subspan(b * kKvBlock, kKvBlock));
    int slot = -1;
    const int id = look(BlockKind::full, key, slot);
    if (id < 0 && slot < 0) {
      reuse.missed = tier_.slots(BlockKind::full) > 0;
      break;
    }
    full.push_back(id), full_slots.push_back(slot), keys.push_back(key);
  }
  for (int n = static_cast<int>(full.size()); n > 0; --n) {
    const int b0 = first_visible(n * kKvBlock, opt_.window, true) / kKvBlock;
    std::vector<int32_t> sliding;
    std::vector<int> sliding_slots;
    for (int b = b0; b < n; ++b) {
      int slot = -1;
      const int id = look(BlockKind::sliding, keys[b], slot);
      if (id < 0 && slot < 0) break;
      sliding.push_back(id), sliding_slots.push_back(slot);
    }
    if (static_cast<int>(sliding.size()) != n - b0) continue;
    s.full.assign(full.begin(), full.begin() + n), s.keys.assign(keys.begin(), keys.begin() + n);
    s.sliding = sliding, s.sliding_block0 = b0;
    for (int i = 0; i < n; ++i)
      if (s.full[i] >= 0)
        blocks_.hold(BlockKind::full, s.full[i]);
      else
        reuse.restores.push_back(Restore{BlockKind::full, i, full_slots[i], keys[i]});
    for (int i = 0; i < n - b0; ++i)
      if (s.sliding[i] >= 0)
        blocks_.hold(BlockKind::sliding, s.sliding[i]);
      else
        reuse.restores.push_back(Restore{BlockKind::sliding, i, sliding_slots[i], keys[b0 + i]});
    s.computed = s.reused = n * kKvBlock;
    return reuse;
  }
  return reuse;
}

// Allocates each block of an admitted sequence's prefix that is in the tier
// only (from its promise) and copies it back; the slots stay pinned until
// every copy is planned, so no block saved meanwhile takes one first.
void Scheduler::restore(Sequence& s, const std::vector<Restore>& restores) {
  for (const Restore& r : restores) tier_.pin(r.kind, r.slot), tier_.touch(r.kind, r.slot);
  for (const Restore& r : restores) {
    const bool full = r.kind == BlockKind::full;
    const int id = allocate(r.kind);
    (full ? s.full : s.sliding)[r.index] = id;
    --(full ? s.full_promised : s.sliding_promised);
    copies_.push_back(BlockCopy{
        .kind = full ? BlockKind::full : BlockKind::sliding, .block = id, .slot = r.slot, .to_tier = 0, .key = r.key});
    blocks_.cache(r.kind, id, r.key);
    s.restored += full ? kKvBlock : 0;
    ++tier_stats_.restored;
  }
  tier_.unpin_all();
}

// A block from the pool; a cached block it takes is saved to the tier first.
int Scheduler::allocate(BlockKind k) {
  const int id = blocks_.allocate(k);
  uint64_t key = 0;
  if (tier_.slots(k) > 0 && blocks_.last_evicted(key)) {
    const int slot = tier_.place(k, key);
    if (slot >= 0) {
      copies_.push_back(BlockCopy{.kind = k, .block = id, .slot = slot, .to_tier = 1, .key = key});
      ++tier_stats_.saved;
    }
  }
  return id;
}

void Scheduler::schedule(Sequence& s, int count, Batch& batch, int most_drafted, double token_cost) {
  step_tokens_.assign(s.tokens.begin() + s.computed, s.tokens.begin() + s.computed + count);
  if (most_drafted > 0) {
    // Within the positions promised to it: those its length may reach.
    const int room = std::min(s.prompt + s.max_new_tokens, opt_.context) - static_cast<int>(s.tokens.size());
    const Proposal p = s.drafter.propose(s.tokens, std::min(most_drafted, room), &corpus_);
    const int proposed = static_cast<int>(p.tokens.size());
    const int k = opt_.draft_by_cost ? draft_length(s.drafter.chance(p.matched), token_cost, proposed) : proposed;
    step_tokens_.insert(step_tokens_.end(), p.tokens.begin(), p.tokens.begin() + k);
  }
  const int n = static_cast<int>(step_tokens_.size());
  take_full(s, s.computed + n);
  take_sliding(s, s.computed, n);
  const bool last = s.computed + count == static_cast<int>(s.tokens.size());
  batch.add(s.id, s.computed, step_tokens_, n > count ? n : last ? 1 : 0, s.full, s.sliding, s.sliding_block0);
  s.in_flight = true;
}

// Only from the sequence's promise: past it, it would take blocks promised
// to others (the generator ends a sequence before that; this says so if not).
void Scheduler::take_full(Sequence& s, int positions) {
  while (static_cast<int>(s.full.size()) < blocks_for(positions)) {
    if (s.full_promised == 0)
      throw Error(cat("sequence ", s.id, " reached position ", positions, ", past the ", s.full.size(),
                      " KV blocks it was promised (a sequence that was not ended at its length)"));
    s.full.push_back(allocate(BlockKind::full));
    --s.full_promised;
  }
}

void Scheduler::take_sliding(Sequence& s, int first_position, int count) {
  const int first = first_visible(first_position, opt_.window, true) / kKvBlock;
  drop_sliding_before(s, first);
  if (s.sliding.empty()) s.sliding_block0 = first;
  while (s.sliding_block0 + static_cast<int>(s.sliding.size()) < blocks_for(first_position + count)) {
    // Within its window's worth from its own promise, beyond from the headroom.
    if (static_cast<int>(s.sliding.size()) < window_blocks_)
      --s.sliding_promised;
    else
      ++s.headroom;
    s.sliding.push_back(allocate(BlockKind::sliding));
  }
}

void Scheduler::drop_sliding_before(Sequence& s, int block) {
  while (!s.sliding.empty() && s.sliding_block0 < block) {
    blocks_.release(BlockKind::sliding, s.sliding.front());
    s.sliding.erase(s.sliding.begin());
    ++s.sliding_block0;
    give_back_sliding(s);
  }
}

// A sliding block the sequence released goes back to the headroom or to its
// own promise.
void Scheduler::give_back_sliding(Sequence& s) {
  blocks_.promise(BlockKind::sliding, 1);
  if (s.headroom > 0)
    --s.headroom;
  else
    ++s.sliding_promised;
}

void Scheduler::ran(const BatchEntry& e, int positions) {
  Sequence& s = seqs_.at(e.seq);
  s.computed = e.pos + positions;
  s.in_flight = false;
  if (e.logits > 1) {  // a draft: its tokens after the first
    s.drafter.verified(e.count - 1, positions - 1);
    ++draft_stats_.verifies, draft_stats_.drafted += e.count - 1, draft_stats_.taken += positions - 1;
    s.drafted += e.count - 1, s.taken += positions - 1;
  }
  // Whole blocks just computed join the prefix cache.
  while (opt_.prefix_reuse && static_cast<int>(s.keys.size() + 1) * kKvBlock <= s.computed) {
    const int b = static_cast<int>(s.keys.size());
    const uint64_t key =
        prefix_key(b ? s.keys.back() : 0, std::span<const int32_t>(s.tokens).subspan(b * kKvBlock, kKvBlock));
    s.keys.push_back(key);
    blocks_.cache(BlockKind::full, s.full[b], key);
    // Sliding blocks only of the prompt: what a next turn shares. Generated
    // ones go back free as the window moves on, so the prompt's last window
    // outlives the answer; the answer's last window is cached when the
    // sequence ends (let_go).
    if ((b + 1) * kKvBlock <= s.prompt && b >= s.sliding_block0 &&
        b < s.sliding_block0 + static_cast<int>(s.sliding.size()))
      blocks_.cache(BlockKind::sliding, s.sliding[b - s.sliding_block0], key);
  }
  // A message that begins in the prompt is where a later prompt may part
  // from this one (an agent's next request drops the reasoning of the turn
  // before): the window before its block boundary is kept, so that such a
  // prompt reuses everything up to it, however long this one goes on.
  for (int p = std::max(e.pos, kKvBlock); opt_.prefix_reuse && p < std::min(s.computed, s.prompt); ++p) {
    if (s.tokens[p] != opt_.boundary_token) continue;
    const int n = p / kKvBlock;
    for (int b = first_visible(n * kKvBlock, opt_.window, true) / kKvBlock; b < n; ++b)
      if (const int id = blocks_.find(BlockKind::sliding, s.keys[b]); id >= 0) blocks_.keep(BlockKind::sliding, id);
  }
  drop_sliding_before(s, first_visible(s.computed, opt_.window, true) / kKvBlock);
  // Sliding blocks only a draft's untaken tokens reached go back (they hold
  // nothing of the sequence's yet); full ones stay, promised to it anyway.
  while (!s.sliding.empty() && s.sliding_block0 + static_cast<int>(s.sliding.size()) > blocks_for(s.computed + 1)) {
    blocks_.release(BlockKind::sliding, s.sliding.back());
    s.sliding.pop_back();
    give_back_sliding(s);
  }
}

void Scheduler::append(int seq, int32_t token) { seqs_.at(seq).tokens.push_back(token); }

void Scheduler::let_go(Sequence& s) {
  // The sliding blocks still held are the last window of what it computed:
  // cached, so that a next turn that sends this answer back (as agents do)
  // reuses all of it, not only its prompt.
  for (size_t i = 0; opt_.prefix_reuse && i < s.sliding.size(); ++i) {
    const size_t b = static_cast<size_t>(s.sliding_block0) + i;
    if (s.sliding[i] >= 0 && b < s.keys.size()) blocks_.cache(BlockKind::sliding, s.sliding[i], s.keys[b]);
  }
  for (int id : s.full)
    if (id >= 0) blocks_.release(BlockKind::full, id);  // (-1: a block to restore, not yet allocated)
  for (int id : s.sliding)
    if (id >= 0) blocks_.release(BlockKind::sliding, id);
  blocks_.unpromise(BlockKind::full, s.full_promised);
  // Sliding blocks drawn from the headroom go back to it.
  blocks_.unpromise(BlockKind::sliding, s.sliding_promised);
  blocks_.promise(BlockKind::sliding, s.headroom);
  s.full_promised = s.sliding_promised = s.headroom = 0;
}

void Scheduler::finish(int seq) {
  Sequence& s = seqs_.at(seq);
  if (s.admitted) {
    corpus_.add(s.tokens);
    let_go(s);
    running_.erase(std::find(running_.begin(), running_.end(), seq));
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  }
  seqs_.erase(seq);
}

}  // namespace tps
