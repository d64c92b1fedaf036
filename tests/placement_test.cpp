// The placement plan on machines of many shapes: synthetic hwloc topologies,
// a hand-written asymmetric XML, and hand-built Machines.
#include <gtest/gtest.h>

#include <set>

#include "runtime/error.h"
#include "tests/test_paths.h"
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
    for (int pu : p.pus) EXPECT_TRUE(std::binary_search(m.available_pus.begin(), m.available_pus.end(), pu));
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
  EXPECT_EQ(two.ranks[0].threads, 8);       // one per core, not per PU
  EXPECT_EQ(two.ranks[0].pus.size(), 16u);  // but bound to all its PUs
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
  Machine m = load_machine_xml(std::string(tps::test_paths::data) + "/asymmetric-2pkg-cxl.xml");
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
  m.numa_nodes = {NumaNode{0, 0, 0, 1 << 30, {0, 1, 2, 3, 4, 5}}, NumaNode{1, 1, 1, 1 << 30, {6, 7}}};
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
