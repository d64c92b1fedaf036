// Self-binding: a rank started by plain `mpirun -np N` pins itself to the
// cores its placement gives it and binds its memory to its NUMA node.
// Only this file and runtime/ call libnuma.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "topology/machine.h"
#include "topology/placement.h"

namespace tps {

// Who bound the process before tps started, read from the environment.
struct LaunchBinding {
  bool under_mpirun = false;  // started by OpenMPI's mpirun
  // The binding policy the user gave mpirun (--bind-to X); empty when mpirun
  // used its default.
  std::string mpirun_policy;
  // mpirun bound the process itself (its default, or --bind-to); false
  // under --bind-to none, where a binding comes from numactl or taskset.
  bool mpirun_bound = false;
  // mpirun's --cpu-set: the ranks are confined to the PUs they start on.
  bool mpirun_cpu_set = false;
  // The NUMA node (OS index) the process's memory policy binds or prefers
  // as it starts (numactl --membind/--preferred); -1 for none or several.
  int memory_node = -1;
};
LaunchBinding read_launch_binding();

// The binding a rank will apply.
struct BindingDecision {
  std::vector<int> pus;  // OS indexes of the PUs the process runs on
  int numa_node = -1;    // index into Machine::numa_nodes; memory goes there
  int threads = 0;
  std::string reason;  // one phrase for the start-up log
};

// Pure: the plan's entry unless the process was deliberately bound before tps
// started (mpirun --bind-to, taskset, numactl), in which case that binding is
// kept and the decision says so. mpirun's default binding (per core for
// np <= 2) is replaced: it would put two ranks on one socket. A memory
// policy the process starts with (numactl --membind) is kept: memory stays
// on its node, and the threads go to that node's cores unless a CPU binding
// is kept too. threads_override > 0 replaces the default thread count.
BindingDecision decide_binding(const Machine& machine, const RankPlacement& plan, const LaunchBinding& launch,
                               int threads_override);

// Applies the decision to the calling thread (threads it creates later
// inherit it): CPU affinity and MPOL_BIND to the node. Throws Error if the
// kernel refuses. Returns what the kernel reports afterwards (PUs, node).
// The kernel's number of the node a decision binds memory to (-1: none).
// Not the node's position in Machine::numa_nodes: hwloc lists nodes in its
// own order, and node numbers may have gaps.
int memory_node_os_index(const Machine& machine, const BindingDecision& decision);

struct AppliedBinding {
  std::vector<int> pus;
  std::vector<int> memory_nodes;  // OS indexes in the memory policy
};
AppliedBinding apply_binding(const Machine& machine, const BindingDecision& decision);

// Pins the calling thread to the given PUs (OS indexes).
void bind_this_thread(const std::vector<int>& pus);

// Memory placed on one NUMA node (OS index), page-aligned; free with
// free_on_node. Throws Error when the node cannot provide it.
void* alloc_on_node(size_t bytes, int node_os_index);
void free_on_node(void* p, size_t bytes);

// Memory a NUMA node (OS index) can give now: its free pages and the file
// pages the kernel can drop (a model file just read sits there), as its
// sysfs meminfo reports them, and no more than the cgroup's limit leaves;
// 0 if unknown.
uint64_t node_available_bytes(int node_os_index);

// The NUMA node (OS index) holding the page at p, from the kernel; -1 if the
// page is not yet backed.
int node_of_page(const void* p);

// The fraction of the pages of [p, p + bytes) that the kernel reports on
// NUMA node `node_os_index`, from up to `samples` pages spread evenly over
// the range (one move_pages query); -1 when the kernel cannot tell.
double fraction_on_node(const void* p, size_t bytes, int node_os_index, int samples = 4096);

}  // namespace tps
