// What every tpsrun rank does first: look at the machine, find its place in
// the plan for the ranks on its host, bind its threads and memory there, and
// report it (one line per rank, printed by rank 0 in rank order).
#pragma once

#include "runtime/mpi_session.h"
#include "topology/binding.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace tps {

struct RankSetup {
  Machine machine;
  PlacementPlan plan;       // for the ranks on this host
  BindingDecision binding;  // what this rank applied
  AppliedBinding applied;   // what the kernel reports
  // PUs for the rank's worker threads in order: one per core first, then
  // the cores' SMT siblings.
  std::vector<int> thread_pus;
};

// threads_override > 0 replaces the default of one thread per core.
// Collective over the world communicator.
RankSetup setup_rank(const MpiSession& mpi, int threads_override);

}  // namespace tps
