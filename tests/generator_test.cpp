// Sequences batched together give what each gives alone: greedy generation
// through the generator -- prompts of several lengths, chunked, joining at
// different steps, next to each other's decode tokens, over the paged KV
// pool -- against each prompt run by itself through a Session. The kernels
// promise that a token's results do not depend on its neighbours (a row's
// result is the same bits in any tile, each output element is computed by
// one thread in one order), so the tokens and the top-5 log-probabilities
// of every step are compared for equality, to the bit. The same with a
// prompt prefix reused from the cache against computing it again.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/sched/constraint.h"
#include "engine/sched/generator.h"
#include "engine/step/session.h"
#include "tests/constraint_specs.h"
#include "tests/temp_path.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace tps {

void PrintTo(SequenceEnd end, std::ostream* os) { *os << sequence_end_name(end); }

namespace {

using testing::model_path;
constexpr auto prompt = testing::spread_prompt;

// A generated token and the top 5 of its step.
struct Step {
  int32_t id;
  std::vector<TokenLogprob> top;
  bool operator==(const Step& o) const {
    if (id != o.id || top.size() != o.top.size()) return false;
    for (size_t i = 0; i < top.size(); ++i)
      if (top[i].id != o.top[i].id || top[i].logprob != o.top[i].logprob) return false;
    return true;
  }
};

std::vector<Step> alone(const Model& m, ThreadPool& pool, const std::vector<int32_t>& ids, int n,
                        const SessionOptions& options = {}) {
  Exchange solo;
  SessionOptions o = options;
  o.step_tokens = 7;  // chunked too, but differently from the batched runs
  Session session(m, o, pool, solo);
  std::vector<float> logits;
  session.forward(ids, false, logits);
  std::vector<Step> out;
  for (int i = 0; i < n; ++i) {
    const int32_t next = argmax(logits);
    out.push_back({next, top_logprobs(logits, 5)});
    session.forward(std::vector<int32_t>{next}, false, logits);
  }
  return out;
}

// Runs prompts through the generator in rounds, each added when the one
// before is done; what each drew, and the prompt tokens each took from the
// cache and, of those, restored from the RAM tier.
struct Rounds {
  std::vector<std::vector<Step>> steps;
  std::vector<int> reused, restored;
};

Rounds in_rounds(Generator& gen, const std::vector<std::vector<std::vector<int32_t>>>& rounds, int n) {
  Rounds r;
  std::map<int, int> index;
  SequenceParams params;
  params.sampler.temperature = 0, params.max_new_tokens = n, params.top_logprobs = 5;
  size_t next = 0;
  Generator::Events ev;
  ev.token = [&](int seq, const Pick& p, SequenceEnd end) {
    const int i = index.at(seq);
    if (r.steps[i].empty())
      r.reused[i] = gen.scheduler().sequence(seq).reused, r.restored[i] = gen.scheduler().sequence(seq).restored;
    r.steps[i].push_back({p.id, std::vector<TokenLogprob>(p.top, p.top + p.n_top)});
    EXPECT_EQ(end, static_cast<int>(r.steps[i].size()) < n ? SequenceEnd::none : SequenceEnd::length);
    return true;
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [&](bool idle) {
    if (!idle) return true;
    if (next == rounds.size()) return false;
    for (const auto& p : rounds[next]) {
      index[gen.add(p, params)] = static_cast<int>(r.steps.size());
      r.steps.emplace_back(), r.reused.push_back(0), r.restored.push_back(0);
    }
    ++next;
    return true;
  };
  gen.run(ev);
  return r;
}

// Runs prompts through the generator; `later` prompts are added when the
// ones before are done (so they can reuse their prefixes).
std::vector<std::vector<Step>> together(const Model& m, ThreadPool& pool, const GeneratorOptions& o,
                                        const std::vector<std::vector<int32_t>>& first,
                                        const std::vector<std::vector<int32_t>>& later, int n,
                                        std::vector<int>* reused = nullptr) {
  Exchange solo;
  Generator gen(m, pool, solo, o);
  Rounds r = in_rounds(gen, {first, later}, n);
  if (reused) *reused = r.reused;
  return std::move(r.steps);
}

void expect_batched_as_alone(const std::string& preset) {
  SCOPED_TRACE(preset);
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path(preset)), pool);
  // Lengths around the block size (16), the step budget and the window
  // (tiny 16, small 32).
  const std::vector<std::vector<int32_t>> prompts = {prompt(5, 1), prompt(40, 2), prompt(17, 3), prompt(1, 4),
                                                     prompt(33, 5)};
  const int n = 24;
  GeneratorOptions o;
  o.max_sequences = 3;  // the last two join as others finish
  o.step_tokens = 16;   // prompts in chunks, next to decode tokens
  o.context = 128;
  const std::vector<std::vector<Step>> got = together(m, pool, o, prompts, {}, n);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<Step> want = alone(m, pool, prompts[i], n);
    ASSERT_EQ(got[i].size(), want.size()) << "prompt " << i;
    for (int s = 0; s < n; ++s) EXPECT_TRUE(got[i][s] == want[s]) << "prompt " << i << " step " << s;
  }
}

TEST(Generator, BatchedSequencesAsAloneTiny) { expect_batched_as_alone("tiny"); }
TEST(Generator, BatchedSequencesAsAloneSmall) { expect_batched_as_alone("small"); }

// Long context: a sequence past 4k positions (17 chunks of attention,
// kv_pool.h; far past tiny's window of 16) and one that ends inside a
// chunk, batched beside a short one on 2 threads, give the greedy tokens and
// log-probabilities of each alone on 1 thread and on 2 (f32 cache). The F16
// model: its attention output goes into the output projection as floats,
// where Q8_0 weights' int8 inputs would round a last-bit difference away (a
// chunking by the thread count passed on tiny, fails on tiny-f16).
TEST(Generator, LongSequencesBatchedAsAloneOnAnyThreads) {
  ThreadPool two(2), one(1);
  Model m = load_model(GgufFile::open(model_path("tiny-f16")), two);
  const std::vector<std::vector<int32_t>> prompts = {prompt(4200, 1), prompt(600, 2), prompt(9, 3)};
  const int n = 6;
  GeneratorOptions o;
  o.max_sequences = 3, o.step_tokens = 256, o.context = 4224, o.kv_type = KvType::f32;
  const std::vector<std::vector<Step>> got = together(m, two, o, prompts, {}, n);
  SessionOptions s;
  s.context = o.context, s.kv_type = KvType::f32;
  for (size_t i = 0; i < prompts.size(); ++i)
    for (ThreadPool* pool : {&one, &two}) {
      const std::vector<Step> want = alone(m, *pool, prompts[i], n, s);
      ASSERT_EQ(got[i].size(), want.size()) << "prompt " << i;
      for (int k = 0; k < n; ++k)
        EXPECT_TRUE(got[i][k] == want[k]) << "prompt " << i << " step " << k << ", " << pool->size() << " threads";
    }
}

TEST(Generator, AReusedPrefixGivesTheSameTokensAndLogprobs) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("small")), pool);
  // A shared "system prompt" of 50 tokens (3 whole blocks), then each its own.
  std::vector<int32_t> system = prompt(50, 9), a = system, b = system, c = system;
  for (int32_t t : prompt(7, 10)) a.push_back(t);
  for (int32_t t : prompt(12, 11)) b.push_back(t);
  for (int32_t t : prompt(3, 12)) c.push_back(t);
  GeneratorOptions o;
  o.max_sequences = 2, o.step_tokens = 64, o.context = 128;
  std::vector<int> reused;
  const auto with = together(m, pool, o, {a}, {b, c}, 16, &reused);
  ASSERT_EQ(reused.size(), 3u);
  EXPECT_EQ(reused[0], 0);
  EXPECT_EQ(reused[1], 48);  // three whole blocks from a
  EXPECT_EQ(reused[2], 48);
  o.prefix_reuse = false;
  reused.clear();
  const auto without = together(m, pool, o, {a}, {b, c}, 16, &reused);
  EXPECT_EQ(reused, (std::vector<int>{0, 0, 0}));
  for (size_t i = 0; i < with.size(); ++i)
    for (size_t s = 0; s < with[i].size(); ++s) EXPECT_TRUE(with[i][s] == without[i][s]) << i << " " << s;
}

// The RAM tier of the prompt cache: a pool of 8 blocks that other prompts
// overflow between two turns sharing a 50-token system prompt. The blocks
// the pool reuses go to the tier and come back for the second turn, which
// computes only the rest; the tier overflows its own cap later and stays
// within it. Every token and top-5 log-probability is the bits of the same
// rounds without a tier (f32 cache), where the second turn recomputes.
TEST(Generator, TheRamTierRestoresEvictedPrefixesToTheSameBits) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("small")), pool);
  std::vector<int32_t> system = prompt(50, 9), a = system, c = system, d = system;
  for (int32_t t : prompt(7, 10)) a.push_back(t);
  for (int32_t t : prompt(9, 11)) c.push_back(t);
  for (int32_t t : prompt(5, 12)) d.push_back(t);
  const std::vector<std::vector<std::vector<int32_t>>> rounds = {
      {a}, {prompt(60, 20)}, {c}, {prompt(60, 21)}, {prompt(60, 22)}, {prompt(60, 23)}, {d}};
  GeneratorOptions o;
  o.max_sequences = 1, o.step_tokens = 64, o.context = 128, o.kv_type = KvType::f32;  // 8 full blocks
  const uint64_t unit = tier_unit_bytes(o.kv_type, m.config, m.shard);
  o.cache_ram_bytes = 2 * unit + unit / 2;  // 16 full blocks and 2 sliding ones
  const int n = 16;
  Exchange solo;
  Generator with_tier(m, pool, solo, o);
  const Rounds with = in_rounds(with_tier, rounds, n);
  o.cache_ram_bytes = 0;
  Generator without_tier(m, pool, solo, o);
  const Rounds without = in_rounds(without_tier, rounds, n);

  EXPECT_EQ(without.reused[2], 0);  // the pool alone lost the system prompt's first block
  EXPECT_EQ(with.reused[2], 48);    // three whole blocks ...
  EXPECT_GT(with.restored[2], 0);   // ... some of them from the tier
  const Scheduler::TierStats& stats = with_tier.scheduler().tier_stats();
  EXPECT_GT(stats.saved, 16);  // more than the tier holds: it evicted
  EXPECT_GT(with_tier.scheduler().tier().evictions(), 0);
  EXPECT_GE(stats.hits, 1);
  EXPECT_LE(with_tier.tier().bytes(), 2 * unit);  // within the cap
  EXPECT_GT(with_tier.tier().bytes(), 0u);
  ASSERT_EQ(with.steps.size(), without.steps.size());
  for (size_t i = 0; i < with.steps.size(); ++i) {
    ASSERT_EQ(with.steps[i].size(), static_cast<size_t>(n)) << i;
    for (int s = 0; s < n; ++s) EXPECT_TRUE(with.steps[i][s] == without.steps[i][s]) << "prompt " << i << " step " << s;
  }
}

// The disk tier of the prompt cache: a first run (a pool of 8 blocks, which
// two other prompts overflow) writes the system prompt's blocks behind as
// they enter the RAM tier, and at its end those the pool still holds; a second Generator on the same directory -- a
// restart -- loads them into its RAM tier and its first prompt with that
// system prompt gets all three whole blocks back and computes only the rest
// (no token of the saved prefix), with the bits of a run without any cache
// (f32 cache).
TEST(Generator, TheDiskTierRestoresASavedPrefixAfterARestart) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("small")), pool);
  std::vector<int32_t> system = prompt(50, 9), a = system, d = system;
  for (int32_t t : prompt(7, 10)) a.push_back(t);
  for (int32_t t : prompt(5, 12)) d.push_back(t);
  GeneratorOptions o;
  o.max_sequences = 1, o.step_tokens = 64, o.context = 128, o.kv_type = KvType::f32;  // 8 full blocks
  const uint64_t unit = tier_unit_bytes(o.kv_type, m.config, m.shard);
  o.cache_ram_bytes = 4 * unit;  // 32 full blocks and 4 sliding ones
  o.cache_dir = testing::temp_path("disk-restart");
  std::filesystem::remove_all(o.cache_dir);
  const int n = 16;
  Exchange solo;
  {
    Generator first(m, pool, solo, o);
    EXPECT_EQ(first.disk().stats().loaded, 0);
    in_rounds(first, {{a}, {prompt(60, 20)}, {prompt(60, 21)}}, n);
    // Both ways in: blocks the pool let go (through the RAM tier) and those
    // it still held at the end of the run.
    EXPECT_GT(first.scheduler().tier_stats().saved, 0);
    EXPECT_GT(first.disk().stats().written, first.scheduler().tier_stats().saved);
    EXPECT_TRUE(first.disk().warnings().empty());
  }
  Generator restarted(m, pool, solo, o);
  EXPECT_TRUE(restarted.disk().warnings().empty());
  EXPECT_GT(restarted.disk().stats().loaded, 3);
  const Rounds got = in_rounds(restarted, {{d}}, n);
  EXPECT_EQ(got.reused[0], 48);
  EXPECT_EQ(got.restored[0], 48);  // all from the RAM tier the disk filled
  EXPECT_EQ(restarted.stats().tokens, static_cast<int64_t>(d.size()) - 48 + n - 1);  // computed: the rest only
  o.cache_ram_bytes = 0, o.cache_dir.clear(), o.prefix_reuse = false;
  Generator none(m, pool, solo, o);
  const Rounds want = in_rounds(none, {{d}}, n);
  ASSERT_EQ(got.steps[0].size(), static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) EXPECT_TRUE(got.steps[0][s] == want.steps[0][s]) << "step " << s;
  std::filesystem::remove_all(testing::temp_path("disk-restart"));
}

// A --cache-dir that cannot be made: one warning, and the RAM tier alone
// serves the same tokens.
TEST(Generator, AnUnwritableCacheDirWarnsOnceAndGenerationGoesOn) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("small")), pool);
  std::vector<int32_t> system = prompt(50, 9), a = system, c = system;
  for (int32_t t : prompt(7, 10)) a.push_back(t);
  for (int32_t t : prompt(9, 11)) c.push_back(t);
  const std::vector<std::vector<std::vector<int32_t>>> rounds = {{a}, {prompt(60, 20)}, {prompt(60, 21)}, {c}};
  GeneratorOptions o;
  o.max_sequences = 1, o.step_tokens = 64, o.context = 128, o.kv_type = KvType::f32;
  o.cache_ram_bytes = 1 << 20;
  const int n = 8;
  Exchange solo;
  Generator ram_only(m, pool, solo, o);
  const Rounds want = in_rounds(ram_only, rounds, n);
  const std::string file = testing::temp_path("not-a-dir");
  std::ofstream(file) << "x";
  o.cache_dir = file + "/cache";
  Generator gen(m, pool, solo, o);
  EXPECT_FALSE(gen.disk().on());
  ASSERT_EQ(gen.disk().warnings().size(), 1u);
  EXPECT_NE(gen.disk().warnings()[0].find(o.cache_dir), std::string::npos) << gen.disk().warnings()[0];
  const Rounds got = in_rounds(gen, rounds, n);
  EXPECT_GT(got.restored[3], 0);
  for (size_t i = 0; i < rounds.size(); ++i) EXPECT_TRUE(got.steps[i] == want.steps[i]) << "prompt " << i;
  EXPECT_EQ(gen.disk().warnings().size(), 1u);
  std::filesystem::remove(file);
}

// --quantize changes the weights after load, so it is part of the disk
// tier's identity as the Generator builds it from the model it is given: the
// blocks a run of the 16-bit file saved load in a run of the same file, and
// not in a run that converts it with --quantize int8 (its keys and values
// differ), which says why.
TEST(Generator, TheDiskTierDoesNotLoadBlocksSavedWithoutTheQuantizePlan) {
  ThreadPool pool(2);
  const std::string path = model_path("tiny-f16");
  Model plain = load_model(GgufFile::open(path), pool);
  GeneratorOptions o;
  o.max_sequences = 1, o.step_tokens = 64, o.context = 128, o.kv_type = KvType::f32;
  o.cache_ram_bytes = 4 * tier_unit_bytes(o.kv_type, plain.config, plain.shard);
  o.cache_dir = testing::temp_path("disk-quantize");
  std::filesystem::remove_all(o.cache_dir);
  Exchange solo;
  {
    Generator first(plain, pool, solo, o);
    in_rounds(first, {{prompt(50, 9)}}, 4);
    ASSERT_GT(first.disk().stats().written, 0);
  }
  {
    Generator again(plain, pool, solo, o);
    EXPECT_GT(again.disk().stats().loaded, 0);
    EXPECT_TRUE(again.disk().warnings().empty());
  }
  Model converted = load_model(GgufFile::open(path), pool, SplitMode::tensor, 0, 1, parse_quantize("int8"));
  Generator quantized(converted, pool, solo, o);
  EXPECT_EQ(quantized.disk().stats().loaded, 0);
  EXPECT_EQ(quantized.disk().stats().files, 0);
  ASSERT_FALSE(quantized.disk().warnings().empty());
  EXPECT_NE(quantized.disk().warnings()[0].find("another model"), std::string::npos) << quantized.disk().warnings()[0];
  std::filesystem::remove_all(o.cache_dir);
}

// A client that goes away: its sequence ends between steps, running or
// waiting, its blocks go back, and the others' tokens do not change.
TEST(Generator, ACanceledSequenceLeavesTheOthersAsTheyWere) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  const std::vector<int32_t> a = prompt(20, 1), b = prompt(9, 2), c = prompt(30, 3), d = prompt(5, 4);
  const int n = 12;
  GeneratorOptions o;
  o.max_sequences = 2, o.step_tokens = 64, o.context = 128;
  Exchange solo;
  Generator gen(m, pool, solo, o);
  SequenceParams params;
  params.sampler.temperature = 0, params.max_new_tokens = n, params.top_logprobs = 5;
  const int sa = gen.add(a, params), sb = gen.add(b, params), sc = gen.add(c, params), sd = gen.add(d, params);
  std::map<int, std::vector<Step>> got;
  bool canceled = false;
  Generator::Events ev;
  ev.token = [&](int seq, const Pick& p, SequenceEnd end) {
    got[seq].push_back({p.id, std::vector<TokenLogprob>(p.top, p.top + p.n_top)});
    EXPECT_EQ(end, static_cast<int>(got[seq].size()) < n ? SequenceEnd::none : SequenceEnd::length);
    return true;
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [&](bool idle) {
    if (!canceled && got[sb].size() == 3) {
      EXPECT_FALSE(gen.scheduler().sequence(sd).admitted);
      EXPECT_TRUE(gen.cancel(sd));  // waiting
      EXPECT_TRUE(gen.cancel(sb));  // running
      canceled = true;
    }
    return !idle;
  };
  gen.run(ev);
  EXPECT_EQ(got[sb].size(), 3u);
  EXPECT_EQ(got.count(sd), 0u);
  EXPECT_TRUE(got[sa] == alone(m, pool, a, n));
  EXPECT_TRUE(got[sc] == alone(m, pool, c, n));  // admitted in b's place
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::full), 0);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::sliding), 0);
}

// A constrained sequence on a random-weight model, which left alone never
// writes JSON: sampled at temperature 1 from the masked logits, every
// output is the schema's JSON, for several seeds, batched beside an
// unconstrained sequence that keeps its own tokens; and a harmony turn
// whose analysis spends its budget is closed by the engine.
TEST(Generator, ConstrainedOutputIsAlwaysTheSchemasJson) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"n":{"type":"integer","minimum":0,
          "maximum":99},"ok":{"type":"boolean"}},"required":["name","n","ok"],"additionalProperties":false})";
  GeneratorOptions o;
  o.max_sequences = 2, o.context = 256;
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    Exchange solo;
    Generator gen(m, pool, solo, o);
    SequenceParams constrained, free;
    constrained.sampler.temperature = free.sampler.temperature = 1;
    constrained.sampler.seed = free.sampler.seed = seed;
    constrained.max_new_tokens = 200, free.max_new_tokens = 20;
    constrained.constraint = testing::schema_spec(schema);
    gen.add(prompt(6, 1), constrained);
    const int f = gen.add(prompt(6, 1), free);
    std::string text;
    std::vector<int32_t> free_ids;
    bool ended = false;
    Generator::Events ev;
    ev.token = [&](int seq, const Pick& p, SequenceEnd end) {
      EXPECT_NE(end, SequenceEnd::context);
      if (seq == f) {
        free_ids.push_back(p.id);
        return true;
      }
      if (m.tokenizer.is_control(p.id)) return !(ended = true);  // an end token: the JSON is whole
      text += m.tokenizer.token_bytes(p.id);
      return true;
    };
    ev.waiting = [](int, const std::string&) {};
    ev.between_steps = [](bool idle) { return !idle; };
    gen.run(ev);
    EXPECT_TRUE(ended) << text;
    std::printf("seed %d: %s\n", static_cast<int>(seed), text.c_str());
    const nlohmann::json j = nlohmann::json::parse(text);  // throws if not JSON
    EXPECT_TRUE(j.at("name").is_string() && j.at("name").get<std::string>().size() <= 12 * 4) << text;
    EXPECT_TRUE(j.at("n").is_number_integer() && j["n"].get<int>() >= 0 && j["n"].get<int>() <= 99) << text;
    EXPECT_TRUE(j.at("ok").is_boolean()) << text;
    EXPECT_EQ(j.size(), 3u) << text;
    // The unconstrained neighbour drew what it draws alone.
    Exchange solo2;
    Generator alone_gen(m, pool, solo2, o);
    alone_gen.add(prompt(6, 1), free);
    std::vector<int32_t> alone_ids;
    ev.token = [&](int, const Pick& p, SequenceEnd) {
      alone_ids.push_back(p.id);
      return true;
    };
    alone_gen.run(ev);
    EXPECT_EQ(free_ids.size(), 20u);
    EXPECT_EQ(free_ids, alone_ids);
  }
}

// The generator ends sequences itself, and says why: what each sequence
// drew, and the end reported with each token.
struct Drawn {
  std::vector<int32_t> ids;
  std::vector<SequenceEnd> ends;
};

std::map<int, Drawn> run_until_ended(Generator& gen) {
  std::map<int, Drawn> got;
  Generator::Events ev;
  ev.token = [&](int seq, const Pick& p, SequenceEnd end) {
    got[seq].ids.push_back(p.id), got[seq].ends.push_back(end);
    return true;  // never this caller's reason: the generator alone ends them
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [](bool idle) { return !idle; };
  gen.run(ev);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::full), 0);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::sliding), 0);
  return got;
}

TEST(Generator, AnAnalysisPastItsBudgetIsClosed) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  GeneratorOptions o;
  o.context = 256;
  Exchange solo;
  Generator gen(m, pool, solo, o);
  SequenceParams p;
  p.sampler.temperature = 1, p.sampler.seed = 5, p.max_new_tokens = 120;
  p.constraint = testing::harmony_spec(6, testing::schema_content(R"({"type":"boolean"})"));
  const int seq = gen.add(prompt(6, 2), p);
  const Drawn d = run_until_ended(gen)[seq];
  const std::vector<int32_t>& ids = d.ids;
  // <|channel|> analysis <|message|> (a token or two for "analysis"), six
  // tokens of thought, <|end|>.
  const int32_t end = m.tokenizer.special_id("<|end|>").value();
  const auto at = std::find(ids.begin(), ids.end(), end);
  ASSERT_NE(at, ids.end());
  const auto message = std::find(ids.begin(), ids.end(), m.tokenizer.special_id("<|message|>").value());
  EXPECT_EQ(at - message - 1, 6);
  EXPECT_EQ(ids.back(), m.tokenizer.special_id("<|return|>").value());
  EXPECT_EQ(d.ends.back(), SequenceEnd::stop);  // the generator ended it there
}

// A forced call in a small max_new_tokens: the analysis is cut to leave the
// shortest call room (analysis_budget), so the call is made; half the
// tokens for the analysis (the budget before) left the random model's call
// without room.
TEST(Generator, AForcedCallIsMadeWithinASmallMaxNewTokens) {
  EXPECT_EQ(analysis_budget(2048, 600, 60), 300);  // half
  EXPECT_EQ(analysis_budget(512, 4000, 60), 512);  // the effort's
  EXPECT_EQ(analysis_budget(2048, 100, 60), 34);   // the call's room
  EXPECT_EQ(analysis_budget(2048, 40, 60), 0);     // none
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  GeneratorOptions o;
  o.context = 256;
  Exchange solo;
  const int32_t call = m.tokenizer.special_id("<|call|>").value();
  for (uint64_t seed : {1, 2, 3}) {
    Generator gen(m, pool, solo, o);
    SequenceParams p;
    p.sampler.temperature = 1, p.sampler.seed = seed, p.max_new_tokens = 48;
    p.constraint = testing::harmony_spec(
        2048, testing::content(ContentSpec::Kind::none),
        {{"get_weather", testing::schema_content(R"({"type":"object","properties":{"city":{"enum":["Paris","Rome"]}},
                                                    "required":["city"],"additionalProperties":false})")}});
    const int seq = gen.add(prompt(6, 2), p);
    const Drawn d = run_until_ended(gen)[seq];
    EXPECT_EQ(d.ids.back(), call) << "seed " << seed << ": " << d.ids.size() << " tokens";
    EXPECT_EQ(d.ends.back(), SequenceEnd::stop) << "seed " << seed;
  }
}

// n tokens, the last one ending the sequence for `why`, none before.
void expect_ended(const Drawn& d, size_t n, SequenceEnd why) {
  ASSERT_EQ(d.ids.size(), n);
  for (size_t i = 0; i + 1 < n; ++i) EXPECT_EQ(d.ends[i], SequenceEnd::none) << "token " << i;
  EXPECT_EQ(d.ends.back(), why);
}

SequenceParams greedy(int max_new_tokens) {
  SequenceParams p;
  p.sampler.temperature = 0, p.max_new_tokens = max_new_tokens;
  return p;
}

GeneratorOptions small_options(int sequences, int context) {
  GeneratorOptions o;
  o.max_sequences = sequences, o.step_tokens = 64, o.context = context;
  return o;
}

TEST(Generator, EndsASequenceAtExactlyItsMaxNewTokens) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  {
    Exchange solo;
    Generator gen(m, pool, solo, small_options(1, 128));
    const int a = gen.add(prompt(9, 1), greedy(7));
    expect_ended(run_until_ended(gen)[a], 7, SequenceEnd::length);
  }
  // Batched: one ends after 1 token, one after 7, while the third goes on.
  Exchange solo;
  Generator gen(m, pool, solo, small_options(3, 128));
  const int a = gen.add(prompt(9, 1), greedy(7)), b = gen.add(prompt(20, 2), greedy(1));
  const int c = gen.add(prompt(4, 3), greedy(30));
  std::map<int, Drawn> got = run_until_ended(gen);
  expect_ended(got[a], 7, SequenceEnd::length);
  expect_ended(got[b], 1, SequenceEnd::length);
  expect_ended(got[c], 30, SequenceEnd::length);
}

TEST(Generator, EndsASequenceAtAStopToken) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  // The greedy tokens of a prompt, then one of them made a stop token: the
  // sequence ends at its first occurrence.
  const std::vector<Step> free = alone(m, pool, prompt(9, 1), 12);
  const int32_t stop = free[5].id;
  size_t first = 0;
  while (free[first].id != stop) ++first;
  SequenceParams stopping = greedy(12);
  stopping.stop_tokens = {stop};
  {
    Exchange solo;
    Generator gen(m, pool, solo, small_options(1, 128));
    const int a = gen.add(prompt(9, 1), stopping);
    expect_ended(run_until_ended(gen)[a], first + 1, SequenceEnd::stop);
  }
  // Batched beside one with the default stop tokens, which goes on.
  Exchange solo;
  Generator gen(m, pool, solo, small_options(2, 128));
  const int a = gen.add(prompt(9, 1), stopping), b = gen.add(prompt(9, 1), greedy(12));
  std::map<int, Drawn> got = run_until_ended(gen);
  expect_ended(got[a], first + 1, SequenceEnd::stop);
  expect_ended(got[b], 12, SequenceEnd::length);
  for (size_t i = 0; i < got[b].ids.size(); ++i) EXPECT_EQ(got[b].ids[i], free[i].id) << "token " << i;
}

// Two reasons at once: a stop token drawn as the last token max_new_tokens
// allows, or as the one that fills the context, ends the sequence as a stop
// (what a client then reads as a finished answer, not a cut one); a
// sequence at its max_new_tokens as the context fills, as its length.
TEST(Generator, AStopTokenThatIsAlsoTheLastAllowedTokenIsAStop) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  const std::vector<int32_t> ids = prompt(20, 1);
  const std::vector<Step> free = alone(m, pool, ids, 12);
  const int32_t stop = free[5].id;
  int first = 0;
  while (free[first].id != stop) ++first;
  SequenceParams stopping = greedy(first + 1);  // the stop token is the last one allowed
  stopping.stop_tokens = {stop};
  {
    Exchange solo;
    Generator gen(m, pool, solo, small_options(1, 128));
    const int a = gen.add(ids, stopping);
    expect_ended(run_until_ended(gen)[a], first + 1, SequenceEnd::stop);
  }
  {
    // A context of 20 + first + 1 positions: the token at `first` fills it.
    stopping.max_new_tokens = 100;
    Exchange solo;
    Generator gen(m, pool, solo, small_options(1, 20 + first));
    const int a = gen.add(ids, stopping);
    expect_ended(run_until_ended(gen)[a], first + 1, SequenceEnd::stop);
  }
  Exchange solo;
  Generator gen(m, pool, solo, small_options(1, 20 + first));
  const int a = gen.add(ids, greedy(first + 1));
  expect_ended(run_until_ended(gen)[a], first + 1, SequenceEnd::length);
}

// A context of 32 positions: a prompt of 20 has room for 12 more keys, so
// its 13th token, whose keys would be the 33rd, ends it.
TEST(Generator, EndsASequenceWhenTheContextIsFull) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  {
    Exchange solo;
    Generator gen(m, pool, solo, small_options(1, 32));
    const int a = gen.add(prompt(20, 1), greedy(100));
    expect_ended(run_until_ended(gen)[a], 13, SequenceEnd::context);
  }
  // Batched: a shorter prompt goes on after it (to 28 tokens), another
  // ends at its length first.
  Exchange solo;
  Generator gen(m, pool, solo, small_options(3, 32));
  const int a = gen.add(prompt(20, 1), greedy(100)), b = gen.add(prompt(5, 2), greedy(100));
  const int c = gen.add(prompt(5, 3), greedy(4));
  std::map<int, Drawn> got = run_until_ended(gen);
  expect_ended(got[a], 13, SequenceEnd::context);
  expect_ended(got[b], 28, SequenceEnd::context);
  expect_ended(got[c], 4, SequenceEnd::length);
}

// A constraint whose masks pass the matcher's work limit after its first
// tokens (the compile probe follows only those) ends its own sequence, with
// no token, at that step; its neighbour goes on drawing what it draws alone.
TEST(Generator, AConstraintThatGivesUpEndsOnlyItsOwnSequence) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  GeneratorOptions o;
  o.max_sequences = 2, o.context = 256;
  Exchange solo;
  Generator gen(m, pool, solo, o);
  SequenceParams costly, free;
  costly.sampler.temperature = free.sampler.temperature = 1;
  costly.sampler.seed = free.sampler.seed = 3;
  costly.max_new_tokens = 100, free.max_new_tokens = 30;
  costly.constraint = testing::gbnf_spec("root ::= \"1234567890123456789012345678901234567890\" ([a-z]*){1000}\n");
  const int c = gen.add(prompt(6, 1), costly);
  const int f = gen.add(prompt(6, 1), free);
  std::map<int, Drawn> got = run_until_ended(gen);
  ASSERT_FALSE(got[c].ends.empty());
  EXPECT_EQ(got[c].ends.back(), SequenceEnd::constraint);
  EXPECT_EQ(got[c].ids.back(), -1);
  EXPECT_GT(got[c].ids.size(), 5u);  // the digits came first
  EXPECT_LT(got[c].ids.size(), 30u);
  Exchange solo2;
  Generator alone_gen(m, pool, solo2, o);
  alone_gen.add(prompt(6, 1), free);
  const std::map<int, Drawn> alone = run_until_ended(alone_gen);
  EXPECT_EQ(got[f].ids, alone.begin()->second.ids);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::full), 0);
}

}  // namespace
}  // namespace tps
