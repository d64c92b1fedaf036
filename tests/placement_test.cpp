// The placement plan on machines of many shapes: synthetic hwloc topologies,
// a hand-written asymmetric XML, and hand-built Machines.
#include <gtest/gtest.h>

#include <set>

#include "runtime/error.h"
#include "topology/machine.h"
#include "topology/model_shape.h"
#include "topology/placement.h"

namespace tps {
namespace {

// Properties every plan must have, whatever the machine.
void expect_valid(const Machine& m, const PlacementPlan& plan, int ranks) {
  ASSERT_EQ(static_cast<int>(plan.ranks.size()), ranks);
  std::set<int> used_cores;
  bool any_shared = false;
  for (int r = 0; r < ranks; ++r) {
    const RankPlacement& p = plan.ranks[r];
    EXPECT_EQ(p.rank, r);
    ASSERT_GE(p.numa_node, 0);
    EXPECT_FALSE(m.numa_nodes[p.numa_node].cores.empty()) << "rank on a memory-only node";
    ASSERT_FALSE(p.cores.empty());
    EXPECT_GE(p.threads, 1);
    for (int c : p.cores) {
      EXPECT_EQ(m.cores[c].numa_node, p.numa_node) << "core outside the rank's node";
      EXPECT_TRUE(m.core_is_usable(c));
      if (!used_cores.insert(c).second) {
        EXPECT_TRUE(p.shares_cores);
      }
    }
    for (int pu : p.pus)
      EXPECT_TRUE(std::binary_search(m.available_pus.begin(), m.available_pus.end(), pu));
    any_shared |= p.shares_cores;
  }
  for (int n : plan.memory_only_nodes)
    for (const RankPlacement& p : plan.ranks) EXPECT_NE(p.numa_node, n);
  int usable = 0;
  for (const Core& c : m.cores) usable += m.core_is_usable(c.index);
  EXPECT_EQ(any_shared, ranks > usable);
}

std::vector<int> nodes_of(const PlacementPlan& plan) {
  std::vector<int> out;
  for (const RankPlacement& p : plan.ranks) out.push_back(p.numa_node);
  return out;
}

bool has_warning(const PlacementPlan& plan, const std::string& text) {
  for (const std::string& w : plan.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

TEST(Placement, OneSocketTwoCores) {
  Machine m = load_machine_synthetic("pack:1 numa:1 core:2 pu:1");
  PlacementPlan one = plan_placement(m, 1);
  expect_valid(m, one, 1);
  EXPECT_EQ(one.ranks[0].cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(one.ranks[0].threads, 2);
  EXPECT_TRUE(one.warnings.empty());

  PlacementPlan two = plan_placement(m, 2);
  expect_valid(m, two, 2);
  EXPECT_EQ(two.ranks[0].cores, (std::vector<int>{0}));
  EXPECT_EQ(two.ranks[1].cores, (std::vector<int>{1}));
  EXPECT_TRUE(two.warnings.empty());

  PlacementPlan three = plan_placement(m, 3);  // oversubscribed, planned with a warning
  expect_valid(m, three, 3);
  EXPECT_TRUE(has_warning(three, "oversubscribed"));
}

TEST(Placement, TwoSocketsFourCores) {
  Machine m = load_machine_synthetic("pack:2 numa:1 core:4 pu:1");
  PlacementPlan two = plan_placement(m, 2);
  expect_valid(m, two, 2);
  EXPECT_EQ(nodes_of(two), (std::vector<int>{0, 1}));
  EXPECT_EQ(two.ranks[1].cores, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(two.ranks[1].package, 1);
  EXPECT_TRUE(two.warnings.empty());

  PlacementPlan one = plan_placement(m, 1);  // the other node idles, and the plan says so
  EXPECT_EQ(one.idle_nodes, (std::vector<int>{1}));
  EXPECT_TRUE(has_warning(one, "idle"));

  PlacementPlan four = plan_placement(m, 4);
  expect_valid(m, four, 4);
  EXPECT_EQ(nodes_of(four), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(four.ranks[1].cores, (std::vector<int>{2, 3}));
}

TEST(Placement, SmtSiblingsAreNotCores) {
  Machine m = load_machine_synthetic("pack:2 numa:1 core:8 pu:2");
  PlacementPlan two = plan_placement(m, 2);
  expect_valid(m, two, 2);
  EXPECT_EQ(two.ranks[0].threads, 8);          // one per core, not per PU
  EXPECT_EQ(two.ranks[0].pus.size(), 16u);     // but bound to all its PUs
  EXPECT_TRUE(plan_placement(m, 2, 16).warnings.empty());
  EXPECT_TRUE(has_warning(plan_placement(m, 2, 17), "oversubscribed"));
  // 32 ranks on 16 cores share cores even though there are 32 PUs.
  expect_valid(m, plan_placement(m, 32), 32);
}

TEST(Placement, FourSockets) {
  Machine m = load_machine_synthetic("pack:4 numa:1 core:16 pu:1");
  EXPECT_EQ(nodes_of(plan_placement(m, 4)), (std::vector<int>{0, 1, 2, 3}));
  PlacementPlan two = plan_placement(m, 2);
  EXPECT_EQ(nodes_of(two), (std::vector<int>{0, 1}));
  EXPECT_EQ(two.idle_nodes, (std::vector<int>{2, 3}));
  PlacementPlan eight = plan_placement(m, 8);
  expect_valid(m, eight, 8);
  for (const RankPlacement& p : eight.ranks) EXPECT_EQ(p.cores.size(), 8u);
  for (int r = 1; r <= 80; ++r) expect_valid(m, plan_placement(m, r), r);
}

TEST(Placement, EightSocketsSpreadOverPackagesBeforeNodes) {
  // Two NUMA nodes per package: 8 ranks take one node in each package.
  Machine m = load_machine_synthetic("pack:8 numa:2 core:6 pu:2");
  PlacementPlan eight = plan_placement(m, 8);
  expect_valid(m, eight, 8);
  std::set<int> packages;
  for (const RankPlacement& p : eight.ranks) packages.insert(p.package);
  EXPECT_EQ(packages.size(), 8u);
  PlacementPlan sixteen = plan_placement(m, 16);
  expect_valid(m, sixteen, 16);
  EXPECT_TRUE(sixteen.idle_nodes.empty());
  for (int r = 1; r <= 100; r += 3) expect_valid(m, plan_placement(m, r), r);
}

TEST(Placement, MemoryOnlyNodesNeverGetThreads) {
  // Each package has a second NUMA node with the same locality and no cores
  // of its own (HBM/CXL-like).
  Machine m = load_machine_synthetic("pack:2 [numa] [numa] core:4 pu:1");
  ASSERT_EQ(m.numa_nodes.size(), 4u);
  PlacementPlan plan = plan_placement(m, 4);
  expect_valid(m, plan, 4);
  EXPECT_EQ(plan.memory_only_nodes.size(), 2u);
  for (int n : plan.memory_only_nodes) EXPECT_TRUE(m.numa_nodes[n].cores.empty());
}

TEST(Placement, AsymmetricXmlWithCxlNode) {
  Machine m = load_machine_xml(TPS_TEST_DATA "/asymmetric-2pkg-cxl.xml");
  ASSERT_EQ(m.numa_nodes.size(), 3u);
  ASSERT_EQ(m.cores.size(), 6u);
  EXPECT_EQ(m.distances.size(), 3u);
  PlacementPlan two = plan_placement(m, 2);
  expect_valid(m, two, 2);
  EXPECT_EQ(two.ranks[0].cores.size(), 4u);
  EXPECT_EQ(two.ranks[1].cores.size(), 2u);
  EXPECT_EQ(two.ranks[1].pus, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_EQ(two.memory_only_nodes.size(), 1u);
  EXPECT_EQ(m.numa_nodes[two.memory_only_nodes[0]].os_index, 2);
  // Three ranks: the 4-core node takes two (2 cores each), the 2-core node one.
  PlacementPlan three = plan_placement(m, 3);
  expect_valid(m, three, 3);
  EXPECT_EQ(three.ranks[2].numa_node, 1);
  for (int r = 1; r <= 20; ++r) expect_valid(m, plan_placement(m, r), r);
}

// A hand-built machine: node 0 has 6 cores, node 1 has 2.
Machine uneven_machine() {
  Machine m;
  m.source = "hand-built";
  m.packages = {Package{0, 0, {0}, {0, 1, 2, 3, 4, 5}}, Package{1, 1, {1}, {6, 7}}};
  m.numa_nodes = {NumaNode{0, 0, 0, 1 << 30, {0, 1, 2, 3, 4, 5}},
                  NumaNode{1, 1, 1, 1 << 30, {6, 7}}};
  for (int c = 0; c < 8; ++c) {
    Core core;
    core.index = c;
    core.package = c < 6 ? 0 : 1;
    core.numa_node = c < 6 ? 0 : 1;
    core.pus = {c};
    m.cores.push_back(core);
    m.available_pus.push_back(c);
  }
  m.bound_pus = m.available_pus;
  return m;
}

TEST(Placement, UnevenNodesTakeRanksInProportionToCores) {
  Machine m = uneven_machine();
  PlacementPlan four = plan_placement(m, 4);
  expect_valid(m, four, 4);
  EXPECT_EQ(nodes_of(four), (std::vector<int>{0, 0, 0, 1}));
  for (const RankPlacement& p : four.ranks) EXPECT_EQ(p.cores.size(), 2u);
}

TEST(Placement, RestrictedCpusetLimitsTheCores) {
  Machine m = uneven_machine();
  m.available_pus = {0, 1, 2};  // e.g. a cgroup cpuset: node 1 has no usable core
  m.bound_pus = m.available_pus;
  PlacementPlan plan = plan_placement(m, 2);
  expect_valid(m, plan, 2);
  EXPECT_EQ(nodes_of(plan), (std::vector<int>{0, 0}));
  EXPECT_EQ(plan.memory_only_nodes, (std::vector<int>{1}));
}

TEST(Placement, BadInputIsAnInputError) {
  Machine m = uneven_machine();
  EXPECT_THROW(plan_placement(m, 0), InputError);
  EXPECT_THROW(plan_placement(m, -2), InputError);
  EXPECT_THROW(plan_placement(m, 1, -1), InputError);
  m.available_pus = {};
  try {
    plan_placement(m, 1);
    FAIL() << "expected an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no usable core"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tps

namespace tps {
namespace {

TEST(SplitLayers, BalancedContiguousRanges) {
  ModelShape s;
  s.layer_bytes.assign(24, 100);
  s.input_bytes = 200;
  s.output_bytes = 200;
  for (int ranks = 1; ranks <= 24; ++ranks) {
    std::vector<LayerRange> r = split_layers(s, ranks);
    ASSERT_EQ(static_cast<int>(r.size()), ranks);
    uint64_t total = 0, most = 0;
    for (int i = 0; i < ranks; ++i) {
      EXPECT_EQ(r[i].begin, i == 0 ? 0 : r[i - 1].end);
      EXPECT_GT(r[i].end, r[i].begin) << "rank " << i << " of " << ranks << " has no layer";
      total += r[i].bytes;
      most = std::max(most, r[i].bytes);
    }
    EXPECT_EQ(r.back().end, 24);
    EXPECT_EQ(total, s.total());
    // No rank holds more than its share plus one layer and the embeddings.
    EXPECT_LE(most, s.total() / ranks + 100 + 200) << ranks << " ranks";
  }
  std::vector<LayerRange> two = split_layers(s, 2);
  EXPECT_EQ(two[0].end, 12);
  EXPECT_EQ(two[0].bytes, 1400u);
  EXPECT_THROW(split_layers(s, 0), InputError);
  // More ranks than layers: one layer each, then none; the head stays last.
  std::vector<LayerRange> many = split_layers(s, 26);
  for (int i = 0; i < 26; ++i) EXPECT_EQ(many[i].end - many[i].begin, i < 24 ? 1 : 0) << i;
  EXPECT_EQ(many[25].bytes, 200u);
  // Balanced by what a token reads when the shape says: gpt-oss-20b's output
  // head reads about as much as 7 blocks, so the last stage gets fewer.
  s.layer_read_bytes.assign(24, 100);
  s.input_read_bytes = 1;
  s.output_read_bytes = 700;
  std::vector<LayerRange> reads = split_layers(s, 2);
  EXPECT_EQ(reads[0].end, 15);
  EXPECT_EQ(reads[1].bytes, 9 * 100u + 200);  // bytes held: its blocks and the head
}

}  // namespace
}  // namespace tps

namespace tps {
namespace {

// gpt-oss-20b's proportions (spec §7.1), in bytes.
ModelShape shape_20b() {
  ModelShape s;
  s.layer_bytes.assign(24, 0);
  s.input_bytes = 615329280;
  s.output_bytes = 615329280 + 2880 * 4;
  s.kv_heads = 8, s.experts = 32, s.ff = 2880, s.vocab = 201088;
  s.attention_bytes = 24ull * (2 * 12533760 + 2 * 1566720);
  s.expert_bytes = 24ull * 3 * 141004800;
  s.replicated_bytes = 24ull * (2 * 2880 * 4 + 368640);
  for (int l = 0; l < 24; ++l)
    s.layer_bytes[l] = (s.attention_bytes + s.expert_bytes + s.replicated_bytes) / 24;
  return s;
}

TEST(PlanSplit, SharesCoverEverythingOnce) {
  ModelShape s = shape_20b();
  for (SplitMode mode : {SplitMode::experts, SplitMode::tensor}) {
    for (int ranks = 1; ranks <= 12; ++ranks) {
      std::vector<RankShare> p = plan_split(s, mode, ranks);
      int64_t kv = 0, vocab = 0, experts = 0, ff = 0;
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(p[r].vocab.begin, r ? p[r - 1].vocab.end : 0);
        vocab += p[r].vocab.size();
        kv += p[r].kv_heads.size();
        // Up to 8 ranks (the KV heads) every rank has some of everything.
        if (ranks <= 8) {
          EXPECT_TRUE(idle_parts(p[r], mode).empty()) << ranks << " ranks, rank " << r;
        }
        if (mode == SplitMode::experts) {
          EXPECT_GE(p[r].experts.size(), 1);
          experts += p[r].experts.size();
          EXPECT_EQ(p[r].ff.size(), 2880);
        } else {
          EXPECT_EQ(p[r].ff.begin % 32, 0);  // whole MXFP4 blocks
          EXPECT_EQ(p[r].ff.end % 32, 0);
          EXPECT_GE(p[r].ff.size(), 32);
          ff += p[r].ff.size();
        }
      }
      EXPECT_EQ(kv, 8);
      EXPECT_EQ(vocab, 201088);
      EXPECT_EQ(mode == SplitMode::experts ? experts : ff, mode == SplitMode::experts ? 32 : 2880);
    }
  }
  // Two ranks in tensor mode hold about half each, plus the embeddings each.
  std::vector<RankShare> two = plan_split(s, SplitMode::tensor, 2);
  const uint64_t half = (s.total() - s.input_bytes - s.replicated_bytes) / 2;
  EXPECT_NEAR(double(two[0].bytes), double(half + s.input_bytes + s.replicated_bytes),
              0.01 * double(half));
  EXPECT_EQ(plan_split(s, SplitMode::tensor, 90).back().ff.size(), 32);
  // Vocabulary rows go in chunks of kVocabGranule; the last chunk is short.
  for (const RankShare& x : plan_split(s, SplitMode::tensor, 3))
    EXPECT_EQ(x.vocab.begin % kVocabGranule, 0);
  // More ranks than experts or feature blocks: the extra ranks hold none of
  // them and say so.
  std::vector<RankShare> many = plan_split(s, SplitMode::experts, 33);
  EXPECT_EQ(many[0].experts.size(), 0);
  EXPECT_EQ(idle_parts(many[0], SplitMode::experts),
            (std::vector<std::string>{"attention heads", "experts"}));
  EXPECT_EQ(plan_split(s, SplitMode::tensor, 91)[0].ff.size(), 0);
  EXPECT_THROW(plan_split(s, SplitMode::tensor, 0), InputError);
  // Layers mode: every head and expert of the rank's layers; the output head
  // on the last rank.
  std::vector<RankShare> pipe = plan_split(s, SplitMode::layers, 2);
  EXPECT_EQ(pipe[0].vocab.size(), 0);
  EXPECT_EQ(pipe[1].vocab.size(), 201088);
  EXPECT_EQ(pipe[0].ff.size(), 2880);
  EXPECT_THROW(parse_split_mode("rows"), InputError);
  EXPECT_EQ(parse_split_mode("tensor"), SplitMode::tensor);
}

}  // namespace
}  // namespace tps

