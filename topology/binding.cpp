#include "topology/binding.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace tps {

LaunchBinding read_launch_binding() {
  LaunchBinding b;
  b.under_mpirun = std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  // mpirun passes an explicit --bind-to (or the same MCA parameter from the
  // environment) to its ranks under this name; its default binding leaves it unset.
  if (const char* p = std::getenv("OMPI_MCA_hwloc_base_binding_policy")) b.mpirun_policy = p;
  b.mpirun_bound = std::getenv("OMPI_MCA_orte_bound_at_launch") != nullptr;
  b.mpirun_cpu_set = std::getenv("OMPI_MCA_hwloc_base_cpu_set") != nullptr;
  if (numa_available() >= 0) {
    int mode = 0;
    bitmask* nodes = numa_allocate_nodemask();
    if (get_mempolicy(&mode, nodes->maskp, nodes->size + 1, nullptr, 0) == 0 &&
        (mode == MPOL_BIND || mode == MPOL_PREFERRED) && numa_bitmask_weight(nodes) == 1)
      for (int i = 0; i <= numa_max_node(); ++i)
        if (numa_bitmask_isbitset(nodes, i)) b.memory_node = i;
    numa_free_nodemask(nodes);
  }
  return b;
}

BindingDecision decide_binding(const Machine& m, const RankPlacement& plan, const LaunchBinding& launch,
                               int threads_override) {
  BindingDecision d;
  const bool bound_before = m.bound_pus != m.available_pus;
  const bool mpirun_policy = !launch.mpirun_policy.empty() && launch.mpirun_policy != "none";
  // Under mpirun's default binding the CPUs it started with may be mpirun's
  // or numactl's inside it: tps cannot tell, and places the rank itself.
  const bool deliberate = bound_before && (!launch.under_mpirun || mpirun_policy || !launch.mpirun_bound);
  const NumaNode* memory = nullptr;
  for (const NumaNode& n : m.numa_nodes)
    if (n.os_index == launch.memory_node) memory = &n;
  const std::string kept_memory =
      memory ? cat("; memory kept on node ", memory->os_index, " (the memory policy it started with)") : "";
  if (!deliberate && memory && !memory->cores.empty()) {
    // numactl --membind alone: the threads follow the memory.
    for (int c : memory->cores)
      for (int pu : m.cores[c].pus)
        if (std::binary_search(m.available_pus.begin(), m.available_pus.end(), pu)) d.pus.push_back(pu);
    std::sort(d.pus.begin(), d.pus.end());
    d.numa_node = memory->index;
    d.threads = threads_override > 0 ? threads_override : static_cast<int>(memory->cores.size());
    d.reason = cat("on the cores of node ", memory->os_index, kept_memory);
    if (!d.pus.empty()) return d;
  }
  if (!deliberate) {
    d.pus = plan.pus;
    d.numa_node = plan.numa_node;
    d.threads = threads_override > 0 ? threads_override : plan.threads;
    d.reason = !bound_before ? "tps placement"
               : m.bound_pus == plan.pus
                   ? "tps placement (the same as the binding it started with)"
                   : "tps placement (replaced the binding it started with: mpirun's default, or numactl's or "
                     "taskset's under it; mpirun --bind-to core|socket keeps mpirun's, --bind-to none the others)";
    return d;
  }
  // Keep the existing binding: memory goes to the node its policy names, or
  // to the node with most of its cores.
  d.pus = m.bound_pus;
  std::map<int, int> cores_on_node;
  int cores = 0;
  for (const Core& c : m.cores) {
    bool in = std::any_of(c.pus.begin(), c.pus.end(),
                          [&](int pu) { return std::binary_search(d.pus.begin(), d.pus.end(), pu); });
    if (in) {
      ++cores;
      ++cores_on_node[c.numa_node];
    }
  }
  int best = plan.numa_node, most = 0;
  for (auto [node, n] : cores_on_node)
    if (n > most) best = node, most = n;
  d.numa_node = memory ? memory->index : best;
  d.threads = threads_override > 0 ? threads_override : std::max(cores, 1);
  d.reason = launch.under_mpirun && mpirun_policy ? cat("kept mpirun's binding (--bind-to ", launch.mpirun_policy, ")")
                                                  : "kept the existing CPU affinity (taskset/numactl)";
  d.reason += kept_memory;
  if (cores_on_node.size() > 1)
    d.reason += cat("; warning: its PUs span ", cores_on_node.size(), " NUMA nodes, memory is on one");
  return d;
}

namespace {

cpu_set_t to_cpu_set(const std::vector<int>& pus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int pu : pus) {
    if (pu < 0 || pu >= CPU_SETSIZE) throw Error(cat("PU ", pu, " is beyond CPU_SETSIZE"));
    CPU_SET(pu, &set);
  }
  return set;
}

std::vector<int> current_pus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) out.push_back(i);
  return out;
}

}  // namespace

void bind_this_thread(const std::vector<int>& pus) {
  cpu_set_t set = to_cpu_set(pus);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    throw Error(cat("cannot bind to PUs ", format_index_list(pus), ": ", std::strerror(errno)));
}

int memory_node_os_index(const Machine& m, const BindingDecision& d) {
  return d.numa_node < 0 ? -1 : m.numa_nodes.at(d.numa_node).os_index;
}

AppliedBinding apply_binding(const Machine& m, const BindingDecision& d) {
  bind_this_thread(d.pus);
  AppliedBinding out;
  out.pus = current_pus();
  if (const int os = memory_node_os_index(m, d); numa_available() >= 0 && os >= 0) {
    bitmask* nodes = numa_allocate_nodemask();
    numa_bitmask_setbit(nodes, os);
    errno = 0;
    numa_set_membind(nodes);
    int err = errno;
    numa_free_nodemask(nodes);
    if (err != 0) throw Error(cat("cannot bind memory to NUMA node ", os, ": ", std::strerror(err)));
    bitmask* now = numa_get_membind();
    for (int i = 0; i <= numa_max_node(); ++i)
      if (numa_bitmask_isbitset(now, i)) out.memory_nodes.push_back(i);
    numa_free_nodemask(now);
  }
  return out;
}

void* alloc_on_node(size_t bytes, int node_os_index) {
  void* p = numa_available() >= 0 ? numa_alloc_onnode(bytes, node_os_index) : nullptr;
  if (!p) throw Error(cat("cannot allocate ", format_bytes(bytes), " on NUMA node ", node_os_index));
  return p;
}

void free_on_node(void* p, size_t bytes) {
  if (p) numa_free(p, bytes);
}

namespace {

// The kB value of `field` in a meminfo-style file ("Node 0 MemFree:   123 kB"
// or "MemFree:   123 kB"); 0 when absent.
uint64_t meminfo_kib(const std::string& path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(field + ":");
    if (at != std::string::npos) return std::strtoull(line.c_str() + at + field.size() + 1, nullptr, 10);
  }
  return 0;
}

// What the process's cgroup (v2) still lets it allocate; UINT64_MAX without a limit.
uint64_t cgroup_headroom() {
  std::ifstream max_in("/sys/fs/cgroup/memory.max"), cur_in("/sys/fs/cgroup/memory.current");
  std::string max_text;
  uint64_t current = 0;
  if (!(max_in >> max_text) || max_text == "max" || !(cur_in >> current)) return UINT64_MAX;
  const uint64_t limit = std::strtoull(max_text.c_str(), nullptr, 10);
  return limit > current ? limit - current : 0;
}

}  // namespace

uint64_t node_available_bytes(int node_os_index) {
  const std::string path = cat("/sys/devices/system/node/node", node_os_index, "/meminfo");
  uint64_t kib = meminfo_kib(path, "MemFree") + meminfo_kib(path, "Active(file)") + meminfo_kib(path, "Inactive(file)");
  if (kib == 0) kib = meminfo_kib("/proc/meminfo", "MemAvailable");  // a kernel without NUMA
  return std::min(kib * 1024, cgroup_headroom());
}

int node_of_page(const void* p) {
  int node = -1;
  void* page = const_cast<void*>(p);
  if (move_pages(0, 1, &page, nullptr, &node, 0) != 0 || node < 0) return -1;
  return node;
}

double fraction_on_node(const void* p, size_t bytes, int node_os_index, int samples) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = bytes / page;
  if (pages == 0 || samples < 1) return -1;
  const size_t n = std::min<size_t>(pages, static_cast<size_t>(samples));
  std::vector<void*> where(n);
  std::vector<int> status(n, -1);
  const uintptr_t base = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  for (size_t i = 0; i < n; ++i)
    where[i] = reinterpret_cast<void*>(base + (i * (pages - 1) / std::max<size_t>(1, n - 1)) * page);
  if (move_pages(0, n, where.data(), nullptr, status.data(), 0) != 0) return -1;
  size_t on = 0;
  for (int st : status) on += st == node_os_index;
  return static_cast<double>(on) / static_cast<double>(n);
}

}  // namespace tps
