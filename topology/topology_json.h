// JSON views of the topology layer's data, for `tpstopo --json`, scripts and
// golden tests. The field names are the public format: change them only
// with docs/USAGE.md.
#pragma once

#include <nlohmann/json.hpp>

#include "topology/bandwidth.h"
#include "topology/machine.h"
#include "topology/placement.h"

namespace tps {

nlohmann::json machine_to_json(const Machine& machine);
nlohmann::json plan_to_json(const Machine& machine, const PlacementPlan& plan);
nlohmann::json bandwidth_to_json(const Machine& machine, const std::vector<BandwidthResult>& results);

}  // namespace tps
