#include "topology/topology_json.h"

namespace tps {

using nlohmann::json;

json machine_to_json(const Machine& m) {
  json j;
  j["source"] = m.source;
  if (m.is_this_host) j["hostname"] = m.hostname;
  j["packages"] = json::array();
  for (const Package& p : m.packages)
    j["packages"].push_back(
        {{"index", p.index}, {"os_index", p.os_index}, {"numa_nodes", p.numa_nodes}, {"cores", p.cores}});
  j["numa_nodes"] = json::array();
  for (const NumaNode& n : m.numa_nodes)
    j["numa_nodes"].push_back({{"index", n.index},
                               {"os_index", n.os_index},
                               {"package", n.package},
                               {"memory_bytes", n.memory_bytes},
                               {"cores", n.cores},
                               {"memory_only", n.cores.empty()}});
  j["cores"] = json::array();
  for (const Core& c : m.cores)
    j["cores"].push_back({{"index", c.index},
                          {"package", c.package},
                          {"numa_node", c.numa_node},
                          {"pus", c.pus},
                          {"l2_bytes", c.l2_bytes},
                          {"l3_bytes", c.l3_bytes},
                          {"l3_group", c.l3_group},
                          {"usable", m.core_is_usable(c.index)}});
  j["distances"] = m.distances;
  j["available_pus"] = m.available_pus;
  j["bound_pus"] = m.bound_pus;
  j["summary"] = {{"packages", m.packages.size()},
                  {"numa_nodes", m.numa_nodes.size()},
                  {"cores", m.cores.size()},
                  {"pus", m.pu_count()},
                  {"memory_bytes", m.total_memory()}};
  return j;
}

json plan_to_json(const Machine& m, const PlacementPlan& plan) {
  json j;
  j["ranks"] = json::array();
  for (const RankPlacement& r : plan.ranks)
    j["ranks"].push_back({{"rank", r.rank},
                          {"numa_node", r.numa_node},
                          {"numa_node_os_index", m.numa_nodes[r.numa_node].os_index},
                          {"package", r.package},
                          {"cores", r.cores},
                          {"pus", r.pus},
                          {"threads", r.threads},
                          {"shares_cores", r.shares_cores}});
  j["idle_nodes"] = plan.idle_nodes;
  j["memory_only_nodes"] = plan.memory_only_nodes;
  j["warnings"] = plan.warnings;
  return j;
}

json bandwidth_to_json(const Machine& m, const std::vector<BandwidthResult>& results) {
  json j = json::array();
  for (const BandwidthResult& r : results) {
    json nodes = json::array();
    for (int n : r.nodes) nodes.push_back(m.numa_nodes[n].os_index);
    j.push_back({{"scope", r.scope},
                 {"numa_nodes_os_index", nodes},
                 {"threads", r.threads},
                 {"array_bytes", r.array_bytes},
                 {"best_gb_per_s", r.best_gb_per_s},
                 {"median_gb_per_s", r.median_gb_per_s}});
  }
  return j;
}

}  // namespace tps
