// Discovery of this host and loading of described machines.
#include <gtest/gtest.h>
#include <sched.h>

#include "runtime/error.h"
#include "tests/test_paths.h"
#include "topology/machine.h"

namespace tps {
namespace {

std::vector<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> out;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) out.push_back(i);
  return out;
}

TEST(Machine, ThisHostIsConsistent) {
  Machine m = discover_machine();
  EXPECT_TRUE(m.is_this_host);
  EXPECT_FALSE(m.hostname.empty());
  ASSERT_GE(m.packages.size(), 1u);
  ASSERT_GE(m.numa_nodes.size(), 1u);
  ASSERT_GE(m.cores.size(), 1u);
  EXPECT_EQ(m.bound_pus, affinity_of_this_thread());
  for (const Core& c : m.cores) {
    EXPECT_GE(c.numa_node, 0) << "core " << c.index << " has no NUMA node";
    EXPECT_GE(c.package, 0);
    EXPECT_FALSE(c.pus.empty());
  }
  for (int pu : m.bound_pus) EXPECT_TRUE(std::binary_search(m.available_pus.begin(), m.available_pus.end(), pu));
  EXPECT_GT(m.total_memory(), 0u);
}

TEST(Machine, SyntheticShape) {
  Machine m = load_machine_synthetic("pack:2 numa:1 l3:1 core:4 pu:2");
  EXPECT_FALSE(m.is_this_host);
  EXPECT_EQ(m.packages.size(), 2u);
  EXPECT_EQ(m.numa_nodes.size(), 2u);
  EXPECT_EQ(m.cores.size(), 8u);
  EXPECT_EQ(m.pu_count(), 16);
  EXPECT_EQ(m.available_pus.size(), 16u);
  EXPECT_EQ(m.cores[5].package, 1);
  EXPECT_EQ(m.cores[5].numa_node, 1);
  EXPECT_EQ(m.cores[5].pus, (std::vector<int>{10, 11}));
  EXPECT_GT(m.cores[5].l3_bytes, 0u);
  EXPECT_EQ(m.cores[0].l3_group, m.cores[3].l3_group);
  EXPECT_NE(m.cores[0].l3_group, m.cores[4].l3_group);
}

TEST(Machine, XmlWithDistances) {
  Machine m = load_machine_xml(std::string(tps::test_paths::data) + "/asymmetric-2pkg-cxl.xml");
  ASSERT_EQ(m.distances.size(), 3u);
  EXPECT_EQ(m.distances[0][1], 21u);
  EXPECT_EQ(m.distances[2][2], 10u);
  EXPECT_EQ(m.numa_nodes[0].memory_bytes, 32ull << 30);
  EXPECT_EQ(m.cores[4].l2_bytes, 2u << 20);
}

void expect_input_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "expected an InputError mentioning '" << fragment << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Machine, BadDescriptionsNameTheInput) {
  expect_input_error([] { load_machine_synthetic("pack:two"); }, "pack:two");
  expect_input_error([] { load_machine_synthetic(""); }, "synthetic");
  expect_input_error([] { load_machine_xml("/no/such/file.xml"); }, "/no/such/file.xml");
  expect_input_error([] { load_machine_xml(std::string(tps::test_paths::data) + "/not-a-topology.xml"); },
                     "not-a-topology.xml");
}

TEST(Machine, IndexLists) {
  EXPECT_EQ(format_index_list({}), "none");
  EXPECT_EQ(format_index_list({3}), "3");
  EXPECT_EQ(format_index_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

}  // namespace
}  // namespace tps
