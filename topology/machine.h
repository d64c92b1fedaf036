// What the hardware is: packages (sockets), NUMA nodes with their memory,
// cores, PUs (hardware threads), caches and NUMA distances, as plain data.
//
// Only topology/machine.cpp calls hwloc to build it. A Machine comes from this
// host (cgroup/affinity aware), from an hwloc XML file, or from an hwloc
// synthetic description such as "pack:2 numa:1 core:4 pu:1", so multi-socket
// logic can be exercised on any machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tps {

struct Core {
  int index = 0;          // position in Machine::cores (logical, 0-based)
  int package = -1;       // index into Machine::packages
  int numa_node = -1;     // index into Machine::numa_nodes (its most local node)
  std::vector<int> pus;   // OS indexes of its hardware threads, SMT siblings
  uint64_t l2_bytes = 0;  // 0 when unknown
  uint64_t l3_bytes = 0;  // size of the L3 it shares; 0 when unknown
  int l3_group = -1;      // cores with the same l3_group share one L3
};

struct NumaNode {
  int index = 0;              // position in Machine::numa_nodes
  int os_index = 0;           // the kernel's node number (for membind, numactl)
  int package = -1;           // index into Machine::packages; -1 if above packages
  uint64_t memory_bytes = 0;  // local memory; 0 when unknown
  std::vector<int> cores;     // indexes into Machine::cores; empty for memory-only nodes
};

struct Package {
  int index = 0;
  int os_index = 0;
  std::vector<int> numa_nodes;  // indexes into Machine::numa_nodes
  std::vector<int> cores;       // indexes into Machine::cores
};

struct Machine {
  // Where this description came from: "this host", "xml:PATH", "synthetic:DESC".
  std::string source;
  bool is_this_host = false;
  std::string hostname;  // empty unless is_this_host

  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;

  // distances[i][j]: relative latency from node i to node j (10 = local), as
  // the firmware reports it. Empty when unknown.
  std::vector<std::vector<uint64_t>> distances;

  // OS indexes of the PUs the OS lets this process use at all (cgroup /
  // cpuset); a process may widen its affinity to any of them. For XML and
  // synthetic descriptions: every PU.
  std::vector<int> available_pus;
  // OS indexes of the PUs the process is bound to now (its affinity, e.g. set
  // by mpirun or taskset); a subset of available_pus.
  std::vector<int> bound_pus;

  int pu_count() const;
  // A core is usable when at least one of its PUs is available.
  bool core_is_usable(int core) const;
  uint64_t total_memory() const;
};

// This host, as the process sees it.
Machine discover_machine();

// The hwloc tps was built with, and the API version of the one it runs with.
std::string hwloc_version();
// An hwloc XML export (lstopo --of xml). Throws InputError naming the file.
Machine load_machine_xml(const std::string& path);
// An hwloc synthetic description. Throws InputError naming the description.
Machine load_machine_synthetic(const std::string& description);

// "0-3,8,10-11" for a sorted list of indexes.
std::string format_index_list(const std::vector<int>& indexes);
// "16.0 GiB"-style size.
std::string format_bytes(uint64_t bytes);

}  // namespace tps
