// Binding decisions (pure) and binding this process on this host (real).
#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>

#include "tests/test_paths.h"
#include "topology/binding.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace tps {
namespace {

Machine bound_machine(std::vector<int> bound) {
  Machine m = load_machine_synthetic("pack:2 numa:1 core:4 pu:1");
  m.bound_pus = std::move(bound);
  return m;
}

TEST(Binding, UnboundProcessFollowsThePlan) {
  Machine m = bound_machine({0, 1, 2, 3, 4, 5, 6, 7});
  PlacementPlan plan = plan_placement(m, 2);
  BindingDecision d = decide_binding(m, plan.ranks[1], LaunchBinding{true, ""}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_EQ(d.threads, 4);
  EXPECT_EQ(d.reason, "tps placement");
}

TEST(Binding, MemoryIsBoundToTheNodeTheKernelNumbers) {
  // Nodes 1 and 3 hold the cores; node 0 has memory only. hwloc lists them
  // 1, 3, 0: positions and the kernel's numbers differ.
  Machine m = load_machine_xml(std::string(tps::test_paths::data) + "/sparse-node-numbers.xml");
  PlacementPlan plan = plan_placement(m, 2);
  const LaunchBinding alone;
  EXPECT_EQ(memory_node_os_index(m, decide_binding(m, plan.ranks[0], alone, 0)), 1);
  EXPECT_EQ(memory_node_os_index(m, decide_binding(m, plan.ranks[1], alone, 0)), 3);
  EXPECT_EQ(memory_node_os_index(m, BindingDecision{}), -1);
}

TEST(Binding, MpirunDefaultBindingIsReplaced) {
  // mpirun -np 2 without --bind-to binds rank 1 to core 1: on socket 0.
  Machine m = bound_machine({1});
  PlacementPlan plan = plan_placement(m, 2);
  BindingDecision d = decide_binding(m, plan.ranks[1], LaunchBinding{true, "", true}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_NE(d.reason.find("replaced the binding it started with: mpirun's default, or numactl's"), std::string::npos);
  // --bind-to none and no binding: tps places.
  m.bound_pus = m.available_pus;
  EXPECT_EQ(decide_binding(m, plan.ranks[1], LaunchBinding{true, "none"}, 0).numa_node, 1);
}

TEST(Binding, NumactlUnderMpirunWithoutItsBindingIsKept) {
  // mpirun --bind-to none numactl --physcpubind=1: mpirun bound nothing, so
  // the binding is numactl's.
  Machine m = bound_machine({1});
  PlacementPlan plan = plan_placement(m, 2);
  BindingDecision d = decide_binding(m, plan.ranks[1], LaunchBinding{true, "none", false}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{1}));
  EXPECT_NE(d.reason.find("kept the existing CPU affinity"), std::string::npos);
}

TEST(Binding, MemoryPolicyIsKept) {
  // numactl --membind=1 alone: the threads go to node 1's cores.
  Machine m = bound_machine({0, 1, 2, 3, 4, 5, 6, 7});
  PlacementPlan plan = plan_placement(m, 1);
  BindingDecision d = decide_binding(m, plan.ranks[0], LaunchBinding{false, "", false, false, 1}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_NE(d.reason.find("memory kept on node 1"), std::string::npos);
  // numactl --cpunodebind=0 --membind=1: both kept, as asked.
  m.bound_pus = {0, 1, 2, 3};
  d = decide_binding(m, plan.ranks[0], LaunchBinding{false, "", false, false, 1}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(d.numa_node, 1);
  // Under mpirun's default binding too: the memory policy was numactl's.
  m.bound_pus = {1};
  d = decide_binding(m, plan.ranks[0], LaunchBinding{true, "", true, false, 1}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(d.numa_node, 1);
}

TEST(Binding, KeptPusOnTwoNodesAreSaidToSpanThem) {
  Machine m = bound_machine({3, 4});
  PlacementPlan plan = plan_placement(m, 1);
  BindingDecision d = decide_binding(m, plan.ranks[0], LaunchBinding{true, "core", true}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{3, 4}));
  EXPECT_NE(d.reason.find("warning: its PUs span 2 NUMA nodes"), std::string::npos) << d.reason;
}

TEST(Binding, ExplicitMpirunBindingIsKept) {
  Machine m = bound_machine({4, 5});
  PlacementPlan plan = plan_placement(m, 2);
  BindingDecision d = decide_binding(m, plan.ranks[0], LaunchBinding{true, "core", true}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{4, 5}));
  EXPECT_EQ(d.numa_node, 1);  // memory follows the cores it was given
  EXPECT_EQ(d.threads, 2);
  EXPECT_NE(d.reason.find("kept mpirun's binding (--bind-to core)"), std::string::npos);
  EXPECT_EQ(decide_binding(m, plan.ranks[0], LaunchBinding{true, "core", true}, 3).threads, 3);
}

TEST(Binding, TasksetOutsideMpirunIsKept) {
  Machine m = bound_machine({2});
  PlacementPlan plan = plan_placement(m, 1);
  BindingDecision d = decide_binding(m, plan.ranks[0], LaunchBinding{false, ""}, 0);
  EXPECT_EQ(d.pus, (std::vector<int>{2}));
  EXPECT_NE(d.reason.find("kept the existing CPU affinity"), std::string::npos);
}

TEST(Binding, AppliesToThisProcess) {
  Machine m = discover_machine();
  PlacementPlan plan = plan_placement(m, 1);
  BindingDecision d;
  d.pus = {m.bound_pus.front()};
  d.numa_node = m.cores.front().numa_node;
  AppliedBinding applied = apply_binding(m, d);
  EXPECT_EQ(applied.pus, d.pus);
  ASSERT_EQ(applied.memory_nodes.size(), 1u);
  EXPECT_EQ(applied.memory_nodes[0], m.numa_nodes[d.numa_node].os_index);
  bind_this_thread(m.bound_pus);  // undo for the tests that follow
}

TEST(Binding, NodeMemoryLandsOnItsNode) {
  Machine m = discover_machine();
  int node = m.numa_nodes.front().os_index;
  size_t bytes = 4 << 20;
  void* p = alloc_on_node(bytes, node);
  std::memset(p, 1, bytes);  // first touch backs the pages
  EXPECT_EQ(node_of_page(p), node);
  EXPECT_EQ(node_of_page(static_cast<char*>(p) + bytes - 1), node);
  free_on_node(p, bytes);
}

}  // namespace
}  // namespace tps
