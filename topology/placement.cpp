#include "topology/placement.h"

#include <algorithm>
#include <map>

#include "runtime/error.h"

namespace tps {
namespace {

// Nodes with usable cores, ordered to spread ranks over packages first:
// package 0's first node, package 1's first node, ..., package 0's second node.
std::vector<int> spread_order(const Machine& m, const std::vector<std::vector<int>>& usable) {
  std::map<int, std::vector<int>> by_package;  // package -> nodes, in node order
  for (const NumaNode& n : m.numa_nodes)
    if (!usable[n.index].empty()) by_package[n.package].push_back(n.index);
  std::vector<int> order;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (auto& [package, nodes] : by_package) {
      if (round < nodes.size()) {
        order.push_back(nodes[round]);
        any = true;
      }
    }
    if (!any) return order;
  }
}

// How many ranks each node (in spread order) takes: at least one each while
// ranks last, then the next rank goes to the node with the most cores per rank.
std::vector<int> ranks_per_node(const std::vector<int>& order, const std::vector<std::vector<int>>& usable, int ranks) {
  std::vector<int> count(order.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    size_t best = 0;
    if (r < static_cast<int>(order.size())) {
      best = r;
    } else {
      // Largest cores/(count+1), compared without division.
      for (size_t i = 1; i < order.size(); ++i) {
        size_t ci = usable[order[i]].size(), cb = usable[order[best]].size();
        if (ci * (count[best] + 1) > cb * (count[i] + 1)) best = i;
      }
    }
    ++count[best];
  }
  return count;
}

}  // namespace

PlacementPlan plan_placement(const Machine& m, int ranks, int threads_per_rank) {
  if (ranks < 1) throw InputError(cat("ranks: got ", ranks, ", expected 1 or more"));
  if (threads_per_rank < 0)
    throw InputError(cat("threads per rank: got ", threads_per_rank, ", expected 1 or more (or 0 for one per core)"));

  PlacementPlan plan;
  std::vector<std::vector<int>> usable(m.numa_nodes.size());  // node -> usable cores
  int usable_total = 0;
  for (const NumaNode& n : m.numa_nodes) {
    for (int c : n.cores)
      if (m.core_is_usable(c)) usable[n.index].push_back(c);
    if (usable[n.index].empty()) plan.memory_only_nodes.push_back(n.index);
    usable_total += static_cast<int>(usable[n.index].size());
  }
  if (usable_total == 0)
    throw InputError(cat("no usable core: this process may run on PUs ", format_index_list(m.available_pus),
                         ", which belong to no core of the machine (", m.source, ")"));
  // More than this only queue on the same cores (and thousands of threads
  // can exhaust the process's limit).
  const int64_t pus = static_cast<int64_t>(m.available_pus.size()), most = kMaxPerPu * pus;
  if (ranks > most)
    throw InputError(cat(ranks, " ranks on one host: more than ", kMaxPerPu, " per hardware thread (", pus,
                         " here); expected at most ", most));
  if (threads_per_rank > most)
    throw InputError(cat("-t ", threads_per_rank, ": more than ", kMaxPerPu, " threads per hardware thread (", pus,
                         " here); expected at most ", most));

  std::vector<int> order = spread_order(m, usable);
  std::vector<int> count = ranks_per_node(order, usable, ranks);

  int rank = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    int node = order[i];
    const std::vector<int>& cores = usable[node];
    int k = count[i];
    if (k == 0) {
      plan.idle_nodes.push_back(node);
      continue;
    }
    int c = static_cast<int>(cores.size());
    for (int j = 0; j < k; ++j, ++rank) {
      RankPlacement p;
      p.rank = rank;
      p.numa_node = node;
      p.package = m.numa_nodes[node].package;
      if (c >= k) {  // contiguous groups of c/k or c/k+1 cores
        int begin = j * c / k, end = (j + 1) * c / k;
        p.cores.assign(cores.begin() + begin, cores.begin() + end);
      } else {  // more ranks than cores on this node: share
        p.cores = {cores[j % c]};
        p.shares_cores = true;
      }
      for (int core : p.cores)
        for (int pu : m.cores[core].pus)
          if (std::binary_search(m.available_pus.begin(), m.available_pus.end(), pu)) p.pus.push_back(pu);
      std::sort(p.pus.begin(), p.pus.end());
      p.threads = threads_per_rank > 0 ? threads_per_rank : static_cast<int>(p.cores.size());
      if (p.threads > static_cast<int>(p.pus.size()))
        plan.warnings.push_back(
            cat("rank ", p.rank, ": ", p.threads, " threads on ", p.pus.size(), " hardware threads (oversubscribed)"));
      plan.ranks.push_back(std::move(p));
    }
  }
  std::sort(plan.idle_nodes.begin(), plan.idle_nodes.end());

  if (ranks > usable_total)
    plan.warnings.push_back(cat(ranks, " ranks on ", usable_total,
                                " usable cores: ranks share cores (oversubscribed); "
                                "expect far lower speed"));
  if (!plan.idle_nodes.empty()) {
    std::vector<int> os;
    for (int n : plan.idle_nodes) os.push_back(m.numa_nodes[n].os_index);
    plan.warnings.push_back(cat(plan.idle_nodes.size(), " NUMA node(s) left idle (OS index ", format_index_list(os),
                                "): run one rank per node to use ", "their memory bandwidth"));
  }
  return plan;
}

}  // namespace tps
