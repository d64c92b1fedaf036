// Memory bandwidth per NUMA node, STREAM-triad style (a[i] = b[i] + s*c[i],
// counted as 3 x 8 bytes per element): threads bound to the node's cores,
// arrays allocated on that node and first touched by the threads that use
// them. This is the roofline that decode speed is measured against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/machine.h"

namespace tps {

struct BandwidthResult {
  std::string scope;       // "node 0" or "all nodes"
  std::vector<int> nodes;  // indexes into Machine::numa_nodes
  int threads = 0;
  uint64_t array_bytes = 0;  // per array, summed over threads
  double best_gb_per_s = 0;  // best of the repetitions, 1e9 bytes/s
  double median_gb_per_s = 0;
};

// Measures each node with usable cores alone, then (with more than one) all
// of them at once. array_bytes = 0 picks a default per node: 4x its L3, at
// least 256 MiB, at most 1 GiB per array. Only for this host.
std::vector<BandwidthResult> measure_bandwidth(const Machine& machine, uint64_t array_bytes, int repetitions);

}  // namespace tps
