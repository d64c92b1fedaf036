// Who runs where: a pure function from (machine, ranks on this host, threads
// per rank) to each rank's NUMA node, cores and thread count. No hwloc, no
// MPI: it is tested on synthetic machines of any shape.
//
// Rules, in order:
//  1. One rank per NUMA node first, spreading across packages before filling
//     a package's second node (sockets first; SMT siblings are never counted
//     as cores).
//  2. More ranks than NUMA nodes: nodes take ranks in proportion to their
//     cores and split their cores into contiguous groups, one per rank.
//  3. Fewer ranks than nodes: the remaining nodes stay idle, and the plan says so.
//  4. Nodes with memory but no usable cores (CXL/HBM-like) never get threads.
//  5. More ranks than cores: ranks share cores, with a warning.
#pragma once

#include <string>
#include <vector>

#include "topology/machine.h"

namespace tps {

struct RankPlacement {
  int rank = 0;               // rank among the ranks on this host
  int numa_node = -1;         // index into Machine::numa_nodes; memory is bound here
  int package = -1;           // index into Machine::packages
  std::vector<int> cores;     // indexes into Machine::cores
  std::vector<int> pus;       // OS indexes of the available PUs of those cores
  int threads = 0;            // worker threads (default: one per core)
  bool shares_cores = false;  // another rank runs on the same cores
};

struct PlacementPlan {
  std::vector<RankPlacement> ranks;
  std::vector<int> idle_nodes;         // nodes with usable cores but no rank
  std::vector<int> memory_only_nodes;  // nodes without usable cores
  std::vector<std::string> warnings;   // oversubscription and the like, for the user
};

// Ranks on a host, and threads of a rank, at most per PU the process may use.
constexpr int kMaxPerPu = 8;

// threads_per_rank = 0 means one thread per core of the rank. Throws
// InputError for ranks < 1, threads_per_rank < 0, either above kMaxPerPu per
// PU, or a machine where this process has no usable core.
PlacementPlan plan_placement(const Machine& machine, int ranks, int threads_per_rank = 0);

}  // namespace tps
