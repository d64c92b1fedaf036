// The scheduler and its block bookkeeping, alone (no model): admission in
// arrival order, the token budget and prompt chunks, waiting when the pool
// is full (never a crash), sliding blocks given back past the window, the
// prefix cache's reuse and its eviction order, and its RAM tier's copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "engine/cache/block_manager.h"
#include "engine/cache/tier_index.h"
#include "engine/sched/scheduler.h"
#include "runtime/error.h"

namespace tps {
namespace {

std::vector<int32_t> tokens(int n, int first = 1000) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

SchedulerOptions options(int sequences, int budget, int full_blocks) {
  SchedulerOptions o;
  o.max_sequences = sequences, o.step_tokens = budget, o.context = 512, o.window = 32;
  o.full_blocks = full_blocks;
  o.sliding_blocks = sliding_blocks_needed(o);
  return o;
}

// Runs a step as if the model had: each entry's positions computed, and a
// token (seq id + 1) chosen where it wants logits. Returns the entries.
std::vector<BatchEntry> step(Scheduler& s, Batch& batch) {
  if (!s.next_step(batch)) return {};
  for (const BatchEntry& e : batch.entries) {
    s.ran(e, e.count);
    if (e.logits) s.append(e.seq, e.seq + 1);
  }
  return batch.entries;
}

// Every block id in a batch's tables is a distinct one per kind, within the
// pool, and each entry's tables cover its positions.
void expect_tables_sane(const Batch& b, const SchedulerOptions& o) {
  std::set<int> full, sliding;
  for (const BatchEntry& e : b.entries) {
    const int end = e.pos + e.count;
    EXPECT_GE(e.full_count, blocks_for(end));
    EXPECT_LE(e.sliding_block0 * kKvBlock, std::max(0, e.pos - o.window + 1));
    EXPECT_GE((e.sliding_block0 + e.sliding_count) * kKvBlock, end);
    for (int32_t id : b.full_table(e)) {
      EXPECT_TRUE(id >= 0 && id < o.full_blocks);
      EXPECT_TRUE(full.insert(id).second) << "full block " << id << " in two tables";
    }
    for (int32_t id : b.sliding_table(e)) {
      EXPECT_TRUE(id >= 0 && id < o.sliding_blocks);
      EXPECT_TRUE(sliding.insert(id).second) << "sliding block " << id << " in two tables";
    }
  }
}

TEST(Scheduler, DecodesFirstThenPromptsInChunksWithinTheBudget) {
  const SchedulerOptions o = options(4, 24, 64);
  Scheduler s(o);
  const int a = s.add(tokens(10), 4), b = s.add(tokens(40, 5000), 4);
  Batch batch;
  // Two prompts: each chunk at most half the budget (12). a's prompt whole
  // (10), b's first chunk (12).
  auto entries = step(s, batch);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, a);
  EXPECT_EQ(entries[0].count, 10);
  EXPECT_EQ(entries[0].logits, 1);
  EXPECT_EQ(entries[1].seq, b);
  EXPECT_EQ(entries[1].count, 12);
  EXPECT_EQ(entries[1].logits, 0);
  expect_tables_sane(batch, o);
  entries = step(s, batch);  // a's next token first, then b's (the only prompt now) next 23
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, a);
  EXPECT_EQ(entries[0].count, 1);
  EXPECT_EQ(entries[0].pos, 10);
  EXPECT_EQ(entries[1].seq, b);
  EXPECT_EQ(entries[1].count, 23);
  EXPECT_EQ(entries[1].pos, 12);
  entries = step(s, batch);  // a, then the rest of b's prompt (5) with its logits
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].count, 5);
  EXPECT_EQ(entries[1].logits, 1);
  EXPECT_EQ(s.sequence(b).computed, 40);
  expect_tables_sane(batch, o);
}

TEST(Scheduler, AShortPromptArrivingDuringALongOneStartsAtTheNextStep) {
  SchedulerOptions o = options(4, 512, 256);
  o.context = 4096;
  Scheduler s(o);
  const int long_one = s.add(tokens(2000), 4);
  Batch batch;
  auto entries = step(s, batch);  // alone: the whole budget
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].count, 512);
  const int short_one = s.add(tokens(10, 9000), 4);
  entries = step(s, batch);  // two prompts: the long one's chunk takes half
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, long_one);
  EXPECT_EQ(entries[0].count, 256);
  EXPECT_EQ(entries[1].seq, short_one);
  EXPECT_EQ(entries[1].count, 10);
  EXPECT_EQ(entries[1].logits, 1);  // its first token comes out of this step
  entries = step(s, batch);         // the short one decodes; the long one alone again takes the rest
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, short_one);
  EXPECT_EQ(entries[1].count, 511);
}

TEST(Scheduler, AdmitsInArrivalOrderUpToTheSequenceLimit) {
  Scheduler s(options(2, 64, 64));
  const int a = s.add(tokens(4), 8), b = s.add(tokens(4), 8), c = s.add(tokens(4), 8);
  Batch batch;
  auto entries = step(s, batch);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, a);
  EXPECT_EQ(entries[1].seq, b);
  EXPECT_EQ(s.waiting(), 1);
  EXPECT_NE(s.sequence(c).waiting_for.find("all 2 sequences are running"), std::string::npos);
  s.finish(a);
  entries = step(s, batch);  // b decodes, c joins
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].seq, b);
  EXPECT_EQ(entries[1].seq, c);
  EXPECT_EQ(s.admitted(), std::vector<int>{c});
}

TEST(Scheduler, AFullPoolMakesNewSequencesWaitNeverCrash) {
  // 8 full blocks: room for one sequence of up to 128 positions at a time.
  const SchedulerOptions o = options(4, 256, 8);
  Scheduler s(o);
  const int a = s.add(tokens(100), 28), b = s.add(tokens(20, 7000), 100);
  Batch batch;
  auto entries = step(s, batch);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].seq, a);
  EXPECT_NE(s.sequence(b).waiting_for.find("KV pool is full"), std::string::npos) << s.sequence(b).waiting_for;
  for (int i = 0; i < 27; ++i) step(s, batch);  // a generates its 28 tokens
  s.finish(a);
  entries = step(s, batch);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].seq, b);
  EXPECT_TRUE(s.sequence(b).waiting_for.empty());
  // One that could never fit is refused when added.
  EXPECT_THROW(s.add(tokens(200), 100), InputError);
  EXPECT_THROW(s.add(tokens(600), 1), InputError);  // longer than the context
  EXPECT_THROW(s.add({}, 1), InputError);
}

// A sequence run past its length (the generator ends it there) would take
// blocks promised to others: the scheduler refuses, and says so.
TEST(Scheduler, NeverGivesASequenceMoreBlocksThanItWasPromised) {
  Scheduler s(options(2, 64, 8));
  const int a = s.add(tokens(16), 1);  // up to 17 positions: 2 blocks promised
  Batch batch;
  // Its prompt, then decode steps up to position 31, within its 2 blocks.
  for (int i = 0; i < 17; ++i) ASSERT_FALSE(step(s, batch).empty()) << "step " << i;
  EXPECT_EQ(s.sequence(a).full.size(), 2u);
  EXPECT_THROW(step(s, batch), Error);  // position 32 would need a third
  EXPECT_EQ(s.sequence(a).full.size(), 2u);
}

TEST(Scheduler, SlidingBlocksPastTheWindowGoBack) {
  const SchedulerOptions o = options(1, 16, 64);  // window 32: 2 blocks, 3 held with the current one
  Scheduler s(o);
  const int a = s.add(tokens(16), 200);
  Batch batch;
  for (int i = 0; i < 150; ++i) {
    step(s, batch);
    expect_tables_sane(batch, o);
    const Scheduler::Sequence& q = s.sequence(a);
    EXPECT_LE(static_cast<int>(q.sliding.size()), blocks_for(o.window) + 1) << "at " << q.computed;
    EXPECT_EQ(q.sliding_block0, std::max(0, q.computed - o.window + 1) / kKvBlock);
    // Decoding holds a window's blocks and the current one from its own
    // promise; the shared headroom is for prompt chunks.
    EXPECT_EQ(q.headroom, 0) << "at " << q.computed;
  }
  EXPECT_EQ(static_cast<int>(s.sequence(a).full.size()), blocks_for(s.sequence(a).computed));
  s.finish(a);
  EXPECT_EQ(s.blocks().held(BlockKind::full), 0);
  EXPECT_EQ(s.blocks().held(BlockKind::sliding), 0);
}

TEST(Scheduler, ReusesTheLongestCachedPrefixOfWholeBlocks) {
  const SchedulerOptions o = options(4, 512, 64);
  Scheduler s(o);
  std::vector<int32_t> system = tokens(40);  // 2 whole blocks and 8 tokens
  std::vector<int32_t> p1 = system, p2 = system, p3 = tokens(33, 9000);
  p1.push_back(1), p2.push_back(2), p3.push_back(3);
  const int a = s.add(p1, 4);
  Batch batch;
  step(s, batch);
  const std::vector<int32_t> a_full = s.sequence(a).full;
  const int b = s.add(p2, 4), c = s.add(p3, 4);
  auto entries = step(s, batch);  // a decodes; b reuses 32 tokens; c (another prefix) none
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(s.sequence(b).reused, 32);
  EXPECT_EQ(entries[1].seq, b);
  EXPECT_EQ(entries[1].pos, 32);
  EXPECT_EQ(entries[1].count, 9);
  EXPECT_EQ(s.sequence(b).full[0], a_full[0]);  // the same blocks, shared
  EXPECT_EQ(s.sequence(b).full[1], a_full[1]);
  EXPECT_EQ(s.sequence(c).reused, 0);
  // A prompt that is exactly the cached blocks keeps its last token to compute.
  const int d = s.add(tokens(32), 4);
  step(s, batch);
  EXPECT_EQ(s.sequence(d).reused, 16);
  // Without reuse nothing is shared.
  SchedulerOptions off = o;
  off.prefix_reuse = false;
  Scheduler t(off);
  t.add(p1, 4);
  step(t, batch);
  const int e = t.add(p2, 4);
  step(t, batch);
  EXPECT_EQ(t.sequence(e).reused, 0);
}

TEST(Scheduler, CachedBlocksStayUntilNeededLeastRecentlyReleasedFirst) {
  // 6 full blocks; prompts of 33 tokens take 3.
  const SchedulerOptions o = options(1, 512, 6);
  Scheduler s(o);
  Batch batch;
  auto run_alone = [&](std::vector<int32_t> prompt) {
    const int id = s.add(std::move(prompt), 1);
    step(s, batch);
    const int reused = s.sequence(id).reused;
    s.finish(id);
    return reused;
  };
  EXPECT_EQ(run_alone(tokens(33, 0)), 0);    // caches prefix A (2 whole blocks)
  EXPECT_EQ(run_alone(tokens(33, 100)), 0);  // caches B
  EXPECT_EQ(s.blocks().cached_idle(BlockKind::full), 4);
  EXPECT_EQ(run_alone(tokens(33, 0)), 32);   // A again: from the cache, and now the most recent
  EXPECT_EQ(run_alone(tokens(33, 200)), 0);  // C needs 3: evicts B's (the least recently released) first
  EXPECT_EQ(run_alone(tokens(33, 0)), 32);   // A is still there
  EXPECT_EQ(run_alone(tokens(33, 100)), 0);  // B is gone
}

// A conversation's next turn repeats its prompt. On sliding layers the
// reuse needs the blocks of the prompt's last window, which a long answer
// would have cycled out of a pool that cached its own blocks too.
TEST(Scheduler, ANextTurnReusesItsPromptAfterALongAnswer) {
  const SchedulerOptions o = options(1, 16, 64);  // window 32
  Scheduler s(o);
  Batch batch;
  const std::vector<int32_t> turn1 = tokens(40);
  const int a = s.add(turn1, 300);
  while (s.sequence(a).computed < 340) step(s, batch);
  s.finish(a);
  std::vector<int32_t> turn2 = turn1;
  for (int32_t t : tokens(30, 5000)) turn2.push_back(t);
  const int b = s.add(turn2, 4);
  step(s, batch);
  EXPECT_EQ(s.sequence(b).reused, 32);
}

// An agent's next turn sends the whole conversation back, the answer
// included: it reuses every whole block of the first turn, the answer's
// too (on sliding layers that needs the answer's last window, kept when
// the sequence ends).
TEST(Scheduler, ANextTurnReusesThePreviousAnswerToo) {
  const SchedulerOptions o = options(1, 16, 64);  // window 32
  Scheduler s(o);
  Batch batch;
  const int a = s.add(tokens(40), 100);
  while (s.sequence(a).computed < 100) step(s, batch);
  std::vector<int32_t> turn2 = s.sequence(a).tokens;  // the prompt and the answer
  s.finish(a);
  for (int32_t t : tokens(20, 5000)) turn2.push_back(t);
  const int b = s.add(turn2, 4);
  step(s, batch);
  EXPECT_EQ(s.sequence(b).reused, 96);  // the 6 whole blocks of its 100 computed positions
}

// An agent's request that parts from the one before at a message (it drops
// that turn's reasoning) reuses everything up to the message's block, even
// after a long prompt cycled the sliding-window blocks in between out of
// the cache: the window before each message boundary is kept.
TEST(Scheduler, APromptThatPartsAtAMessageReusesUpToIt) {
  SchedulerOptions o = options(1, 64, 128);  // window 32
  o.boundary_token = 7;
  Scheduler s(o);
  Batch batch;
  std::vector<int32_t> first = tokens(200);
  first[100] = 7;  // a message begins at 100: 6 whole blocks before it
  first[150] = 7;
  const int a = s.add(first, 1);
  while (s.sequence(a).computed < 200) step(s, batch);
  s.finish(a);
  // Another long prompt takes every sliding block the cache had.
  const int b = s.add(tokens(400, 50000), 1);
  while (s.sequence(b).computed < 400) step(s, batch);
  s.finish(b);
  std::vector<int32_t> parted(first.begin(), first.begin() + 100);
  for (int32_t t : tokens(40, 90000)) parted.push_back(t);
  const int c = s.add(parted, 1);
  step(s, batch);
  EXPECT_EQ(s.sequence(c).reused, 96);
}

// The RAM tier: the blocks the pool takes for C are saved in C's step
// (before it writes them), and A's next turn gets them back in its own step,
// each restore reading the slot its block was saved to; a 2-slot tier
// keeps the most recent keys and never gives a pinned slot to a save.
TEST(Scheduler, TheRamTierSavesWhatThePoolReusesAndRestoresItInTheStep) {
  SchedulerOptions o = options(1, 512, 3);  // 3 full blocks: a 33-token prompt takes them all
  o.tier_full_slots = 8, o.tier_sliding_slots = 1;
  Scheduler s(o);
  Batch batch;
  const int a = s.add(tokens(33, 0), 1);
  step(s, batch);
  const std::vector<int32_t> a_full = s.sequence(a).full;
  s.finish(a);
  EXPECT_TRUE(batch.copies.empty());  // the pool had free blocks
  s.add(tokens(33, 100), 1);
  step(s, batch);
  std::map<int, int> saved;  // block -> slot
  for (const BlockCopy& c : batch.copies)
    if (c.kind == BlockKind::full) {
      EXPECT_EQ(c.to_tier, 1);
      saved[c.block] = c.slot;
    }
  ASSERT_EQ(saved.size(), 2u);  // A's 2 cached blocks
  s.finish(s.sequence(a + 1).id);
  const int a2 = s.add(tokens(33, 0), 1);
  step(s, batch);
  EXPECT_EQ(s.sequence(a2).reused, 32);
  EXPECT_EQ(s.sequence(a2).restored, 32);
  int loads = 0;
  for (size_t i = 0; i < batch.copies.size(); ++i) {
    const BlockCopy& c = batch.copies[i];
    if (c.kind == BlockKind::sliding || c.to_tier) continue;
    ++loads;
    EXPECT_TRUE(std::count(s.sequence(a2).full.begin(), s.sequence(a2).full.end(), c.block));
    bool was_a_slot = false;
    for (auto [block, slot] : saved) was_a_slot |= slot == c.slot;
    EXPECT_TRUE(was_a_slot) << c.slot;
    for (size_t j = 0; j < i; ++j)  // no save into it before it is read
      EXPECT_FALSE(batch.copies[j].to_tier && batch.copies[j].kind == BlockKind::full &&
                   batch.copies[j].slot == c.slot);
  }
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(s.tier_stats().restored, 2);  // (the window's sliding block stayed: that pool has room)
}

TEST(TierIndex, LeastRecentlyUsedOutButNeverAPinnedSlot) {
  TierIndex t(2, 0);
  const int s1 = t.place(BlockKind::full, 1), s2 = t.place(BlockKind::full, 2);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(t.place(BlockKind::full, 1), -1);  // there already: touched, now the most recent
  EXPECT_EQ(t.place(BlockKind::full, 3), s2);  // 2 was the least recent
  EXPECT_EQ(t.find(BlockKind::full, 2), -1);
  t.pin(BlockKind::full, s1);
  EXPECT_EQ(t.place(BlockKind::full, 4), s2);  // 1 is older than 3 but pinned
  t.pin(BlockKind::full, s2);
  EXPECT_EQ(t.place(BlockKind::full, 5), -1);  // every slot pinned: nothing saved
  t.unpin_all();
  EXPECT_EQ(t.place(BlockKind::full, 5), s1);
  EXPECT_EQ(t.evictions(), 3);
  EXPECT_EQ(TierIndex(0, 0).place(BlockKind::full, 1), -1);  // no tier
}

TEST(BlockManager, PromisesNeverExceedWhatIsAvailable) {
  BlockManager m(4, 2);
  EXPECT_TRUE(m.promise(BlockKind::full, 3));
  EXPECT_FALSE(m.promise(BlockKind::full, 2));
  EXPECT_EQ(m.unpromised(BlockKind::full), 1);
  const int x = m.allocate(BlockKind::full), y = m.allocate(BlockKind::full);
  EXPECT_NE(x, y);
  EXPECT_EQ(m.available(BlockKind::full), 2);
  m.cache(BlockKind::full, x, 42);
  EXPECT_EQ(m.find(BlockKind::full, 42), x);
  m.release(BlockKind::full, x);  // cached: idle, still available
  EXPECT_EQ(m.cached_idle(BlockKind::full), 1);
  EXPECT_EQ(m.available(BlockKind::full), 3);
  m.hold(BlockKind::full, x);  // reused
  EXPECT_EQ(m.cached_idle(BlockKind::full), 0);
  m.release(BlockKind::full, x), m.release(BlockKind::full, y);
  m.unpromise(BlockKind::full, 1);
  EXPECT_TRUE(m.promise(BlockKind::full, 4));
  for (int i = 0; i < 4; ++i) m.allocate(BlockKind::full);  // the cached one is evicted last
  EXPECT_EQ(m.find(BlockKind::full, 42), -1);
  EXPECT_THROW(m.allocate(BlockKind::full), Error);
}

// A pool of 3 blocks, so that a freed block is what the next allocate
// gets: a block two sequences hold (the second found it by its prefix key)
// stays held when the first lets go -- no allocate may hand it out while
// the second holds it -- and is idle in the cache, then evicted, only once
// the second lets go too.
TEST(BlockManager, ASharedBlockOutlivesItsFirstHolderInAPoolThatReusesFreedBlocks) {
  const BlockKind k = BlockKind::full;
  BlockManager m(3, 1);
  ASSERT_TRUE(m.promise(k, 3));
  const int freed = m.allocate(k);
  m.release(k, freed);  // never cached: free again, and the next one out
  const int shared = m.allocate(k);
  EXPECT_EQ(shared, freed);
  m.cache(k, shared, 42);
  ASSERT_EQ(m.find(k, 42), shared);
  m.hold(k, shared);     // the second sequence, through the prefix cache
  m.release(k, shared);  // the first lets go
  EXPECT_EQ(m.held(k), 1);
  EXPECT_EQ(m.cached_idle(k), 0);
  EXPECT_EQ(m.available(k), 2);
  ASSERT_TRUE(m.promise(k, 1));
  const int a = m.allocate(k), b = m.allocate(k);
  EXPECT_NE(a, shared);
  EXPECT_NE(b, shared);
  EXPECT_NE(a, b);
  EXPECT_EQ(m.available(k), 0);
  EXPECT_EQ(m.find(k, 42), shared);
  m.release(k, shared);  // the second lets go: idle in the cache
  EXPECT_EQ(m.cached_idle(k), 1);
  ASSERT_TRUE(m.promise(k, 1));
  uint64_t key = 0;
  EXPECT_EQ(m.allocate(k), shared);  // evicted now, and only now
  EXPECT_TRUE(m.last_evicted(key));
  EXPECT_EQ(key, 42u);
  EXPECT_EQ(m.find(k, 42), -1);
}

// Kept blocks leave the cache after every other idle one; past the bound
// on marks, the oldest mark goes first (its block then next out).
TEST(BlockManager, KeptBlocksAreEvictedLastAndTheOldestMarkGoesFirst) {
  const BlockKind k = BlockKind::sliding;
  BlockManager m(1, 4, 0, 2);
  ASSERT_TRUE(m.promise(k, 4));
  int id[4];
  for (int i = 0; i < 4; ++i) id[i] = m.allocate(k), m.cache(k, id[i], 100 + i);
  m.keep(k, id[0]), m.keep(k, id[1]);
  for (int i = 0; i < 4; ++i) m.release(k, id[i]);  // idle, oldest first: 0 1 2 3; kept: 0 1
  EXPECT_EQ(m.cached_idle(k), 4);
  ASSERT_TRUE(m.promise(k, 2));
  EXPECT_EQ(m.allocate(k), id[2]);  // the unkept ones first
  EXPECT_EQ(m.allocate(k), id[3]);
  m.keep(k, id[1]);  // marked again: now the newest
  EXPECT_TRUE(m.kept(k, id[0]));
  ASSERT_TRUE(m.promise(k, 1));
  EXPECT_EQ(m.allocate(k), id[0]);  // kept ones in release order
  EXPECT_FALSE(m.kept(k, id[0]));
  EXPECT_TRUE(m.kept(k, id[1]));
  EXPECT_EQ(m.find(k, 101), id[1]);
}

TEST(BlockManager, MarksPastTheBoundLeaveOldestFirst) {
  const BlockKind k = BlockKind::full;
  BlockManager m(3, 1, 2, 0);
  ASSERT_TRUE(m.promise(k, 3));
  int id[3];
  for (int i = 0; i < 3; ++i) id[i] = m.allocate(k), m.cache(k, id[i], 200 + i), m.keep(k, id[i]);
  EXPECT_FALSE(m.kept(k, id[0]));  // the third mark took the oldest's place
  EXPECT_TRUE(m.kept(k, id[1]) && m.kept(k, id[2]));
  for (int i = 2; i >= 0; --i) m.release(k, id[i]);  // idle: 2 1 0, id[0] unkept
  ASSERT_TRUE(m.promise(k, 1));
  EXPECT_EQ(m.allocate(k), id[0]);
}

// Three holders of one block: it stays held until the last lets go.
TEST(BlockManager, ABlockIsHeldUntilItsLastHolderLetsGo) {
  const BlockKind k = BlockKind::sliding;
  BlockManager m(1, 2);
  ASSERT_TRUE(m.promise(k, 1));
  const int id = m.allocate(k);
  m.cache(k, id, 7);
  m.hold(k, id), m.hold(k, id);
  for (int holders = 3; holders > 1; --holders) {
    m.release(k, id);
    EXPECT_EQ(m.held(k), 1) << holders - 1 << " holders left";
    EXPECT_EQ(m.available(k), 1);
  }
  m.release(k, id);
  EXPECT_EQ(m.held(k), 0);
  EXPECT_EQ(m.cached_idle(k), 1);
  EXPECT_EQ(m.available(k), 2);
}

}  // namespace
}  // namespace tps
