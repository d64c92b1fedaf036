#include "topology/machine.h"

#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "runtime/error.h"

namespace tps {
namespace {

// Owns an hwloc topology for the duration of one conversion to a Machine.
class Topology {
 public:
  Topology() {
    if (hwloc_topology_init(&t_) != 0) throw Error("hwloc: cannot initialise a topology");
  }
  ~Topology() { hwloc_topology_destroy(t_); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
};

class Bitmap {
 public:
  Bitmap() : b_(hwloc_bitmap_alloc()) {}
  ~Bitmap() { hwloc_bitmap_free(b_); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  hwloc_bitmap_t get() const { return b_; }

 private:
  hwloc_bitmap_t b_;
};

std::vector<int> indexes_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  unsigned i = 0;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(static_cast<int>(i)); }
  hwloc_bitmap_foreach_end();
  return out;
}

hwloc_obj_t ancestor(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_obj_t obj) {
  return hwloc_get_ancestor_obj_by_type(t, type, obj);
}

Machine convert(hwloc_topology_t t, std::string source, bool this_host) {
  Machine m;
  m.source = std::move(source);
  m.is_this_host = this_host;

  // Packages. A topology without package objects is one package.
  int n_packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  std::map<hwloc_obj_t, int> package_of_obj;
  for (int i = 0; i < n_packages; ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, i);
    package_of_obj[p] = i;
    m.packages.push_back(Package{i, static_cast<int>(p->os_index), {}, {}});
  }
  if (m.packages.empty()) m.packages.push_back(Package{0, 0, {}, {}});
  auto package_index = [&](hwloc_obj_t obj) {
    hwloc_obj_t p = obj->type == HWLOC_OBJ_PACKAGE ? obj : ancestor(t, HWLOC_OBJ_PACKAGE, obj);
    if (p) return package_of_obj.at(p);
    return n_packages == 0 ? 0 : -1;
  };

  // NUMA nodes. A node's locality is its parent's cpuset; memory-only nodes
  // (CXL, HBM) share a locality with a node that has the cores.
  int n_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  std::vector<hwloc_obj_t> node_objs;
  for (int i = 0; i < n_nodes; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    node_objs.push_back(n);
    NumaNode node;
    node.index = i;
    node.os_index = static_cast<int>(n->os_index);
    node.package = package_index(n->parent);
    node.memory_bytes = n->attr ? n->attr->numanode.local_memory : 0;
    m.numa_nodes.push_back(node);
    if (node.package >= 0) m.packages[node.package].numa_nodes.push_back(i);
  }

  // Cores; a topology without core objects has one core per PU.
  hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  int n_cores = hwloc_get_nbobjs_by_type(t, core_type);
  for (int i = 0; i < n_cores; ++i) {
    hwloc_obj_t c = hwloc_get_obj_by_type(t, core_type, i);
    Core core;
    core.index = i;
    core.package = package_index(c);
    core.pus = indexes_of(c->cpuset);
    if (hwloc_obj_t l2 = ancestor(t, HWLOC_OBJ_L2CACHE, c)) core.l2_bytes = l2->attr->cache.size;
    if (hwloc_obj_t l3 = ancestor(t, HWLOC_OBJ_L3CACHE, c)) {
      core.l3_bytes = l3->attr->cache.size;
      core.l3_group = static_cast<int>(l3->logical_index);
    }
    // The most local node: the smallest locality containing the core; on a
    // tie, the node the kernel numbered first (CPU nodes come before
    // memory-only nodes on Linux).
    int best = -1;
    int best_weight = 0;
    for (int n = 0; n < n_nodes; ++n) {
      hwloc_const_cpuset_t locality = node_objs[n]->cpuset;
      if (!hwloc_bitmap_isincluded(c->cpuset, locality)) continue;
      int w = hwloc_bitmap_weight(locality);
      if (best < 0 || w < best_weight || (w == best_weight && m.numa_nodes[n].os_index < m.numa_nodes[best].os_index)) {
        best = n;
        best_weight = w;
      }
    }
    core.numa_node = best;
    if (best >= 0) m.numa_nodes[best].cores.push_back(i);
    if (core.package >= 0) m.packages[core.package].cores.push_back(i);
    m.cores.push_back(std::move(core));
  }

  // NUMA distances (latency-like, as the firmware reports them), if any.
  unsigned n_dist = 1;
  hwloc_distances_s* dist = nullptr;
  if (n_nodes > 1 &&
      hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &n_dist, &dist, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 &&
      n_dist >= 1) {
    if (dist->nbobjs == static_cast<unsigned>(n_nodes)) {
      std::map<unsigned, int> pos;  // os_index -> our node index
      for (int n = 0; n < n_nodes; ++n) pos[node_objs[n]->os_index] = n;
      m.distances.assign(n_nodes, std::vector<uint64_t>(n_nodes, 0));
      for (unsigned i = 0; i < dist->nbobjs; ++i)
        for (unsigned j = 0; j < dist->nbobjs; ++j)
          m.distances[pos.at(dist->objs[i]->os_index)][pos.at(dist->objs[j]->os_index)] =
              dist->values[i * dist->nbobjs + j];
    }
    hwloc_distances_release(t, dist);
  }

  // What this process may use.
  hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(t);
  m.available_pus = indexes_of(allowed);
  m.bound_pus = m.available_pus;
  if (this_host) {
    Bitmap bound;
    if (hwloc_get_cpubind(t, bound.get(), HWLOC_CPUBIND_PROCESS) == 0) {
      hwloc_bitmap_and(bound.get(), bound.get(), allowed);
      m.bound_pus = indexes_of(bound.get());
    }
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) m.hostname = host;
  }
  return m;
}

}  // namespace

int Machine::pu_count() const {
  int n = 0;
  for (const Core& c : cores) n += static_cast<int>(c.pus.size());
  return n;
}

bool Machine::core_is_usable(int core) const {
  for (int pu : cores.at(core).pus)
    if (std::binary_search(available_pus.begin(), available_pus.end(), pu)) return true;
  return false;
}

uint64_t Machine::total_memory() const {
  uint64_t total = 0;
  for (const NumaNode& n : numa_nodes) total += n.memory_bytes;
  return total;
}

std::string hwloc_version() {
  const unsigned api = hwloc_get_api_version();
  return cat(HWLOC_VERSION, " (API ", api >> 16, ".", (api >> 8) & 0xff, " at run time)");
}

Machine discover_machine() {
  Topology t;
  if (hwloc_topology_load(t.get()) != 0)
    throw Error(cat("hwloc: cannot read this host's topology: ", std::strerror(errno)));
  return convert(t.get(), "this host", true);
}

Machine load_machine_xml(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(cat(path,
                         ": no such topology file (expected an hwloc XML export, e.g. "
                         "from `lstopo --of xml`)"));
  Topology t;
  if (hwloc_topology_set_xml(t.get(), path.c_str()) != 0 || hwloc_topology_load(t.get()) != 0)
    throw InputError(cat(path,
                         ": not a valid hwloc XML topology (expected the output of "
                         "`lstopo --of xml`)"));
  return convert(t.get(), "xml:" + path, false);
}

Machine load_machine_synthetic(const std::string& description) {
  Topology t;
  if (description.empty() || hwloc_topology_set_synthetic(t.get(), description.c_str()) != 0 ||
      hwloc_topology_load(t.get()) != 0)
    throw InputError(cat("invalid synthetic topology '", description,
                         "': expected hwloc's synthetic syntax, e.g. "
                         "'pack:2 numa:1 core:4 pu:2' (levels with counts, outermost first)"));
  return convert(t.get(), "synthetic:" + description, false);
}

std::string format_index_list(const std::vector<int>& indexes) {
  std::string out;
  for (size_t i = 0; i < indexes.size();) {
    size_t j = i;
    while (j + 1 < indexes.size() && indexes[j + 1] == indexes[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(indexes[i]);
    if (j > i) out += cat("-", indexes[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace tps
