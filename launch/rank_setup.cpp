#include "launch/rank_setup.h"

#include <algorithm>
#include <cstdio>

#include "runtime/log.h"
#include "topology/topology_text.h"

namespace tps {

RankSetup setup_rank(const MpiSession& mpi, int threads_override) {
  RankSetup s;
  s.machine = discover_machine();
  const LaunchBinding launch = read_launch_binding();
  // mpirun --cpu-set (without --bind-to) confines the ranks to the PUs they
  // start on: the plan spreads them there, not over the whole machine.
  if (launch.mpirun_cpu_set && launch.mpirun_policy.empty()) s.machine.available_pus = s.machine.bound_pus;
  s.plan = plan_placement(s.machine, mpi.local_size(), threads_override);
  s.binding = decide_binding(s.machine, s.plan.ranks.at(mpi.local_rank()), launch, threads_override);
  s.applied = apply_binding(s.machine, s.binding);
  std::vector<int> siblings;
  for (const Core& core : s.machine.cores) {
    bool first = true;
    for (int pu : core.pus) {
      if (!std::binary_search(s.binding.pus.begin(), s.binding.pus.end(), pu)) continue;
      (first ? s.thread_pus : siblings).push_back(pu);
      first = false;
    }
  }
  s.thread_pus.insert(s.thread_pus.end(), siblings.begin(), siblings.end());

  const Machine& m = s.machine;
  const BindingDecision& b = s.binding;
  const NumaNode& node = m.numa_nodes.at(b.numa_node);
  std::string line = cat("host ", mpi.host(), " rank ", mpi.rank(), "/", mpi.size(), ": NUMA node ", node.os_index);
  if (node.package >= 0) line += cat(" (package ", m.packages[node.package].os_index, ")");
  line += cat(", PUs ", format_index_list(b.pus), ", ", b.threads, " thread(s), memory on node ",
              format_index_list(s.applied.memory_nodes), "; ", b.reason);
  if (s.applied.pus != b.pus) line += cat("; warning: the kernel reports PUs ", format_index_list(s.applied.pus));

  std::vector<std::string> lines = mpi.gather_to_root(line);
  if (mpi.rank() == 0 && log_level() >= LogLevel::info) {
    for (const std::string& w : s.plan.warnings) log_warn(w);
    for (const std::string& l : lines) log_line(l);
  }
  return s;
}

}  // namespace tps
