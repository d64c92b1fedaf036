// The generator on the ranks mpirun gives, split inside layers and by
// layers, against one rank in the same process: a constrained sequence
// added while another runs is announced to the ranks that sample, compiled
// there beside the steps and joins in a later plan, with one rank's tokens.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/sched/generator.h"
#include "tests/constraint_specs.h"
#include "tests/mpi_test_env.h"
#include "tests/test_models.h"

namespace tps {
namespace {

using Tokens = std::map<int, std::vector<int32_t>>;

// A free sequence, then -- once it has 4 tokens -- one held to a schema,
// announced while the first runs (whether it then joins on time or when
// the first ends is a matter of time: bench/constraint-join measures it).
Tokens run(Generator& gen, bool root) {
  if (!root) {
    gen.run({});
    return {};
  }
  const std::string schema = R"({"type": "object", "required": ["ok", "n"], "additionalProperties": false,
      "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 999}}})";
  Tokens got;
  int free = -1;
  bool added = false;
  Generator::Events ev;
  ev.token = [&](int seq, const Pick& p, SequenceEnd) {
    if (p.id >= 0) got[seq].push_back(p.id);
    return true;
  };
  ev.waiting = [](int, const std::string&) {};
  ev.between_steps = [&](bool idle) {
    SequenceParams p;
    p.sampler.temperature = 1, p.sampler.seed = 3, p.max_new_tokens = 48;
    if (free < 0) {
      free = gen.add(testing::spread_prompt(9, 1), p);
    } else if (!added && got[free].size() >= 4) {
      p.constraint = testing::schema_spec(schema), p.max_new_tokens = 30;
      gen.add(testing::spread_prompt(5, 2), p);
      added = true;
    }
    return !(idle && added);
  };
  gen.run(ev);
  return got;
}

TEST(GeneratorRanks, AConstraintAddedWhileAnotherRunsIsCompiledBesideTheSteps) {
  const MpiSession& mpi = testing::mpi();
  const bool root = mpi.rank() == 0;
  GeneratorOptions o;
  o.max_sequences = 2, o.context = 128;
  ThreadPool pool(1);
  Tokens alone;
  if (root) {
    Exchange solo;
    Model m = load_model(GgufFile::open(testing::model_path("tiny")), pool);
    Generator gen(m, pool, solo, o);
    alone = run(gen, true);
    ASSERT_EQ(alone.size(), 2u);
  }
  for (SplitMode mode : {SplitMode::tensor, SplitMode::layers}) {
    SCOPED_TRACE(split_mode_name(mode));
    Model m = load_model(GgufFile::open(testing::model_path("tiny")), pool, mode, mpi.rank(), mpi.size());
    Exchange exchange(mpi, "auto", static_cast<size_t>(o.step_tokens) * m.config.n_embd);
    Generator gen(m, pool, exchange, o);
    const Tokens got = run(gen, root);
    if (root) {
      EXPECT_EQ(got, alone);
    }
    const bool samples = mode == SplitMode::tensor || mpi.rank() == mpi.size() - 1;
    const Generator::Stats& s = gen.stats();
    EXPECT_EQ(s.constraint_joins, samples ? 1 : 0) << "rank " << mpi.rank();
    EXPECT_EQ(s.constraint_joins_announced_before, samples && mpi.size() > 1 ? 1 : 0) << "rank " << mpi.rank();
    std::printf("%s, rank %d: %lld join(s) waited for the compile\n", split_mode_name(mode), mpi.rank(),
                static_cast<long long>(s.constraint_join_waits));
  }
}

}  // namespace
}  // namespace tps
