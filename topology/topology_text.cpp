#include "topology/topology_text.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "runtime/error.h"

namespace tps {

std::string pus_of_cores(const Machine& m, const std::vector<int>& cores) {
  std::vector<int> pus;
  for (int c : cores) pus.insert(pus.end(), m.cores[c].pus.begin(), m.cores[c].pus.end());
  std::sort(pus.begin(), pus.end());
  return format_index_list(pus);
}

std::string machine_to_text(const Machine& m) {
  std::string s = cat("machine: ", m.source, m.hostname.empty() ? "" : " (" + m.hostname + ")", "\n  ",
                      m.packages.size(), " package(s), ", m.numa_nodes.size(), " NUMA node(s), ", m.cores.size(),
                      " core(s), ", m.pu_count(), " PU(s), ", format_bytes(m.total_memory()), " memory\n");
  for (const Package& p : m.packages) s += cat("  package ", p.os_index, ": cores ", format_index_list(p.cores), "\n");
  for (const NumaNode& n : m.numa_nodes) {
    s += cat("  NUMA node ", n.os_index, ": ", format_bytes(n.memory_bytes));
    if (n.package >= 0) s += cat(", package ", m.packages[n.package].os_index);
    if (n.cores.empty()) {
      s += ", no cores (memory only: never given threads)\n";
      continue;
    }
    s += cat(", cores ", format_index_list(n.cores), " (PUs ", pus_of_cores(m, n.cores), ")");
    const Core& c = m.cores[n.cores.front()];
    if (c.l2_bytes) s += cat(", L2 ", format_bytes(c.l2_bytes), "/core");
    std::set<int> groups;
    uint64_t l3 = 0;
    for (int ci : n.cores)
      if (groups.insert(m.cores[ci].l3_group).second) l3 += m.cores[ci].l3_bytes;
    if (l3) s += cat(", L3 ", format_bytes(l3), " in ", groups.size(), " slice(s)");
    s += "\n";
  }
  if (m.distances.empty()) {
    s += m.numa_nodes.size() > 1 ? "  NUMA distances: not reported\n" : "";
  } else {
    s += "  NUMA distances (10 = local):\n          ";
    char cell[32];
    for (const NumaNode& n : m.numa_nodes) {
      std::snprintf(cell, sizeof cell, "%-8s", cat("node", n.os_index).c_str());
      s += cell;
    }
    s += "\n";
    for (size_t i = 0; i < m.distances.size(); ++i) {
      std::snprintf(cell, sizeof cell, "    %-6s", cat("node", m.numa_nodes[i].os_index).c_str());
      s += cell;
      for (uint64_t d : m.distances[i]) {
        std::snprintf(cell, sizeof cell, "%-8llu", static_cast<unsigned long long>(d));
        s += cell;
      }
      s += "\n";
    }
  }
  s += cat("  this process may use PUs ", format_index_list(m.available_pus));
  if (m.bound_pus != m.available_pus) s += cat(", is bound to PUs ", format_index_list(m.bound_pus));
  s += "\n";
  return s;
}

std::string plan_to_text(const Machine& m, const PlacementPlan& plan) {
  std::string s = cat("placement of ", plan.ranks.size(), " rank(s) per host:\n");
  for (const RankPlacement& r : plan.ranks) {
    const NumaNode& n = m.numa_nodes[r.numa_node];
    s += cat("  rank ", r.rank, ": NUMA node ", n.os_index);
    if (r.package >= 0) s += cat(" (package ", m.packages[r.package].os_index, ")");
    s += cat(", cores ", format_index_list(r.cores), ", PUs ", format_index_list(r.pus), ", ", r.threads, " thread(s)",
             r.shares_cores ? ", shares its cores" : "", "\n");
  }
  for (int n : plan.memory_only_nodes)
    s += cat("  NUMA node ", m.numa_nodes[n].os_index, ": memory only, no threads\n");
  for (const std::string& w : plan.warnings) s += cat("warning: ", w, "\n");
  return s;
}

std::string bandwidth_to_text(const std::vector<BandwidthResult>& results) {
  std::string s = "memory bandwidth (STREAM triad, 3 x 8 bytes per element; 1 GB = 1e9 B):\n";
  for (const BandwidthResult& r : results) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-10s %2d thread(s), arrays %s: best %.1f GB/s, median %.1f GB/s\n",
                  r.scope.c_str(), r.threads, format_bytes(r.array_bytes).c_str(), r.best_gb_per_s, r.median_gb_per_s);
    s += line;
  }
  return s;
}

}  // namespace tps
