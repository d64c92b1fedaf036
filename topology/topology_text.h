// Human-readable views of the topology layer's data, for tpstopo and the
// start-up log. One concept per line; sizes in binary units.
#pragma once

#include <string>
#include <vector>

#include "topology/bandwidth.h"
#include "topology/binding.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace tps {

std::string machine_to_text(const Machine& machine);
std::string plan_to_text(const Machine& machine, const PlacementPlan& plan);
std::string bandwidth_to_text(const std::vector<BandwidthResult>& results);
// Core indexes -> their PU OS indexes, as "0-3".
std::string pus_of_cores(const Machine& machine, const std::vector<int>& cores);

}  // namespace tps
