// Speculative decoding is lossless: with drafts the generator gives the
// tokens, the log-probabilities and (with a seed) the draws of decoding
// without them, to the bit -- greedy and sampled, drafts taken whole, in
// part and not at all, cut by the step's budget, across KV block and
// sliding-window boundaries, next to other sequences, held to a constraint,
// ending inside a draft at a stop token or at max_new_tokens. And the
// drafter's lookups and lengths.
#include <gtest/gtest.h>

#include <map>

#include "engine/sched/drafter.h"
#include "engine/sched/generator.h"
#include "tests/constraint_specs.h"
#include "tests/test_models.h"
#include "tests/test_paths.h"

namespace tps {
namespace {

using testing::model_path;
constexpr auto prompt = testing::spread_prompt;

std::vector<int32_t> proposed(Drafter& d, std::vector<int32_t> text, int most, const DraftCorpus* corpus = nullptr) {
  return d.propose(text, most, corpus).tokens;
}

TEST(Drafter, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  // "1 2 3 4 5 9 1 2 3": the earlier 1 2 3 was followed by 4 5 9 1 2 3.
  Drafter d;
  EXPECT_EQ(proposed(d, {1, 2, 3, 4, 5, 9, 1, 2, 3}, 3), (std::vector<int32_t>{4, 5, 9}));
  // Running into the present, the match repeats with its period.
  Drafter same;
  EXPECT_EQ(proposed(same, {7, 7, 7, 7}, 4), (std::vector<int32_t>{7, 7, 7, 7}));
  Drafter cycle;
  EXPECT_EQ(proposed(cycle, {5, 6, 5, 6, 5}, 4), (std::vector<int32_t>{6, 5, 6, 5}));
  // No earlier occurrence, no proposal; fewer than kMatch tokens match nothing.
  Drafter none;
  EXPECT_TRUE(proposed(none, {1, 2, 3, 4, 1, 2}, 4).empty());
  // How far the match goes back: 8 0 1 2 3 against 9 0 1 2 3 is 4 tokens.
  Drafter m;
  EXPECT_EQ(m.propose(std::vector<int32_t>{8, 0, 1, 2, 3, 5, 9, 0, 1, 2, 3}, 2, nullptr).matched, 4);
}

TEST(Drafter, TheChanceOfATakenTokenFollowsTheMatchAndTheRecord) {
  Drafter d;
  EXPECT_DOUBLE_EQ(d.chance(Drafter::kMatch), 0.5);         // a bare match: the record's prior
  EXPECT_DOUBLE_EQ(d.chance(Drafter::kMatch + 8), 8 / 9.);  // 8 more tokens matched
  d.verified(4, 4);
  EXPECT_GT(d.chance(Drafter::kMatch), 0.75);
  for (int i = 0; i < 10; ++i) d.verified(4, 0);
  EXPECT_LT(d.chance(Drafter::kMatch), 0.1);
  EXPECT_DOUBLE_EQ(d.chance(Drafter::kMatch + 8), 8 / 9.);
}

TEST(Drafter, ItsLengthIsWhatGivesTheMostTokensPerStepTime) {
  // Each drafted token costs half a step: at a chance of 1/2 nothing pays.
  EXPECT_EQ(draft_length(0.5, 0.5, 16), 0);
  EXPECT_EQ(draft_length(0.7, 0.5, 16), 1);  // 1.7 / 1.5 beats 2.19 / 2
  EXPECT_EQ(draft_length(1.0, 0.5, 16), 16);
  EXPECT_EQ(draft_length(0.99, 0.5, 16), 13);  // past it, the 14th's chance is below what it costs
  EXPECT_EQ(draft_length(0.99, 0.5, 3), 3);
  // Cheap drafted tokens (a step's time is mostly fixed) pay sooner.
  EXPECT_GE(draft_length(0.5, 0.05, 16), 3);
  EXPECT_EQ(draft_length(1.0, 0.0, 0), 0);
}

TEST(DraftCorpus, FollowsEndedTextsToTheirEndAndDropsTheOldestWhenFull) {
  DraftCorpus corpus(12);
  corpus.add(std::vector<int32_t>{1, 2, 3, 4, 5});
  Drafter d;
  EXPECT_EQ(proposed(d, {9, 1, 2, 3}, 4, &corpus), (std::vector<int32_t>{4, 5}));  // not past its end
  // The sequence's own text comes first.
  Drafter own;
  EXPECT_EQ(proposed(own, {1, 2, 3, 8, 1, 2, 3}, 2, &corpus), (std::vector<int32_t>{8, 1}));
  // No match across two texts.
  corpus.add(std::vector<int32_t>{6, 7});
  EXPECT_TRUE(corpus.follow(std::vector<int32_t>{4, 5, 6}, 2).tokens.empty());
  EXPECT_EQ(corpus.size(), 9);
  corpus.add(std::vector<int32_t>{10, 11, 12, 13});  // 14 > 12: the first text goes
  EXPECT_EQ(corpus.size(), 8);
  EXPECT_TRUE(corpus.follow(std::vector<int32_t>{1, 2, 3}, 2).tokens.empty());
  EXPECT_EQ(corpus.follow(std::vector<int32_t>{10, 11, 12}, 2).tokens, (std::vector<int32_t>{13}));
  DraftCorpus off;
  off.add(std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(off.size(), 0);
}

// What a sequence drew: each token, its top-5 and the end said with it.
struct Drawn {
  std::vector<int32_t> ids;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  std::vector<SequenceEnd> ends;
  bool operator==(const Drawn&) const = default;
};

struct Request {
  std::vector<int32_t> prompt;
  SequenceParams params;
};

// Runs requests in rounds (each added when the one before has ended, so a
// later round drafts from the earlier ones' texts); what each drew.
std::vector<Drawn> run(const Model& m, ThreadPool& pool, GeneratorOptions o,
                       const std::vector<std::vector<Request>>& rounds, Scheduler::DraftStats* stats = nullptr) {
  Exchange solo;
  Generator gen(m, pool, solo, o);
  std::vector<Drawn> got;
  std::map<int, size_t> index;
  size_t next = 0;
  Generator::Events ev;
  ev.token = [&](int seq, const Pick& p, SequenceEnd end) {
    Drawn& d = got[index.at(seq)];
    d.ids.push_back(p.id), d.ends.push_back(end), d.top.emplace_back();
    for (int i = 0; i < p.n_top; ++i) d.top.back().emplace_back(p.top[i].id, p.top[i].logprob);
    return true;
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [&](bool idle) {
    if (!idle) return true;
    if (next == rounds.size()) return false;
    for (const Request& r : rounds[next]) index[gen.add(r.prompt, r.params)] = got.size(), got.emplace_back();
    ++next;
    return true;
  };
  gen.run(ev);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::full), 0);
  EXPECT_EQ(gen.scheduler().blocks().held(BlockKind::sliding), 0);
  if (stats) *stats = gen.scheduler().draft_stats();
  return got;
}

SequenceParams params(float temperature, uint64_t seed, int n) {
  SequenceParams p;
  p.sampler.temperature = temperature, p.sampler.seed = seed, p.sampler.top_k = 40;
  p.max_new_tokens = n, p.top_logprobs = 5;
  p.stop_tokens.clear();
  return p;
}

// Rounds that draft: prompts run, then run again (their texts drafted from
// the corpus: taken whole when greedy or with the same seed), then with
// another seed (taken in part), four at once in steps of 24 tokens (drafts
// cut by the budget), on tiny (a window of 16: rollbacks inside it and
// across its blocks).
void expect_as_plain(float temperature, KvType kv_type) {
  SCOPED_TRACE(std::to_string(temperature) + ", " + kv_type_name(kv_type));
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  const int n = 36;
  std::vector<Request> first = {{prompt(5, 1), params(temperature, 7, n)},
                                {prompt(21, 2), params(temperature, 8, n)},
                                {prompt(3, 3), params(temperature, 9, n)},
                                {prompt(9, 4), params(temperature, 10, n)}};
  std::vector<Request> other_seed = first;
  for (Request& r : other_seed) r.params.sampler.seed += 100;
  const std::vector<std::vector<Request>> rounds = {first, first, other_seed};
  GeneratorOptions o;
  o.max_sequences = 4, o.step_tokens = 24, o.context = 128, o.kv_type = kv_type;
  const std::vector<Drawn> plain = run(m, pool, o, rounds);
  o.draft_tokens = 16;
  Scheduler::DraftStats stats;
  const std::vector<Drawn> drafted = run(m, pool, o, rounds, &stats);
  ASSERT_EQ(drafted.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].ids.size(), static_cast<size_t>(n)) << "sequence " << i;
    EXPECT_TRUE(drafted[i] == plain[i]) << "sequence " << i;
  }
  // Drafts were checked, taken and refused: the test saw every path.
  EXPECT_GT(stats.taken, n) << stats.verifies << " verifies, " << stats.drafted << " drafted";
  EXPECT_LT(stats.taken, stats.drafted);
  // Drafts sized by the measured cost of a step: the same tokens.
  if (kv_type != kDefaultKvType) return;
  o.draft_by_cost = true;
  const std::vector<Drawn> by_cost = run(m, pool, o, rounds);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(by_cost[i] == plain[i]) << "sequence " << i;
}

class KvTypes : public ::testing::TestWithParam<KvType> {};

TEST_P(KvTypes, GreedyGivesPlainDecodingsTokens) { expect_as_plain(0, GetParam()); }
INSTANTIATE_TEST_SUITE_P(Speculation, KvTypes,  // f16: sampled, below
                         ::testing::Values(KvType::f32, KvType::bf16, KvType::q8_0, KvType::q4_0),
                         [](const ::testing::TestParamInfo<KvType>& p) { return kv_type_name(p.param); });
TEST(Speculation, SampledGivesPlainDecodingsDraws) { expect_as_plain(0.8f, kDefaultKvType); }

// Held to a constraint, a draft's rows are masked as the constraint stands
// after the draft's tokens before them: a JSON schema and a harmony turn
// (its analysis closed at its budget), greedy and sampled, drafts taken
// whole (a repeat) and in part (another seed).
TEST(Speculation, ConstrainedGivesPlainDecodingsTokens) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"tags":{"type":"array",)"
      R"("items":{"enum":["alpha","beta","gamma"]},"maxItems":6},"n":{"type":"integer"}},"required":["name","tags","n"],)"
      R"("additionalProperties":false})";
  for (const ConstraintSpec& spec :
       {testing::schema_spec(schema), testing::harmony_spec(12, testing::content(ContentSpec::Kind::text))}) {
    SCOPED_TRACE(spec.text());
    std::vector<Request> first;
    for (int i = 0; i < 2; ++i) {
      SequenceParams p = params(i == 0 ? 0 : 0.8f, 5 + i, 60);
      p.constraint = spec;
      p.stop_tokens = SequenceParams{}.stop_tokens;
      first.push_back({prompt(6, 1 + i), p});
    }
    std::vector<Request> other_seed = first;
    other_seed[1].params.sampler.seed += 100;
    const std::vector<std::vector<Request>> rounds = {first, first, other_seed};
    GeneratorOptions o;
    o.max_sequences = 2, o.step_tokens = 32, o.context = 128;
    const std::vector<Drawn> plain = run(m, pool, o, rounds);
    o.draft_tokens = 8;
    Scheduler::DraftStats stats;
    const std::vector<Drawn> drafted = run(m, pool, o, rounds, &stats);
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(drafted[i] == plain[i]) << "sequence " << i;
    EXPECT_GT(stats.taken, 20) << stats.drafted << " drafted";
  }
}

// A sequence ends inside a taken draft exactly where plain decoding ends it:
// at a stop token, at max_new_tokens, at the context's end.
TEST(Speculation, EndsInsideADraftWherePlainDecodingEnds) {
  ThreadPool pool(2);
  Model m = load_model(GgufFile::open(model_path("tiny")), pool);
  GeneratorOptions o;
  o.max_sequences = 1, o.step_tokens = 64, o.context = 48;
  const SequenceParams long_run = params(0, 0, 40);
  const std::vector<Drawn> reference = run(m, pool, o, {{{prompt(6, 4), long_run}}});
  ASSERT_EQ(reference[0].ids.size(), 40u);
  SequenceParams stop = long_run, length = long_run, context = long_run;
  stop.stop_tokens = {reference[0].ids[17]};
  length.max_new_tokens = 13;
  context.max_new_tokens = 100;  // the context (48) ends it
  for (const SequenceParams& p : {stop, length, context}) {
    // The first round puts the text in the corpus; the second drafts it.
    const std::vector<std::vector<Request>> rounds = {{{prompt(6, 4), long_run}}, {{prompt(6, 4), p}}};
    o.draft_tokens = 0;
    const std::vector<Drawn> plain = run(m, pool, o, rounds);
    o.draft_tokens = 16;
    Scheduler::DraftStats stats;
    const std::vector<Drawn> drafted = run(m, pool, o, rounds, &stats);
    EXPECT_TRUE(drafted[1] == plain[1]) << plain[1].ids.size() << " tokens plain, " << drafted[1].ids.size();
    EXPECT_NE(plain[1].ends.back(), SequenceEnd::none);
    EXPECT_GT(stats.taken, 0);
  }
}

}  // namespace
}  // namespace tps
