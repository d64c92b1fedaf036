// tpstopo: what this machine (or a described one) looks like to tps, where
// ranks would run, and how much memory bandwidth each NUMA node delivers.
#include <cstdio>

#include "launch/cli.h"
#include "runtime/error.h"
#include "topology/bandwidth.h"
#include "topology/machine.h"
#include "topology/placement.h"
#include "topology/topology_json.h"
#include "topology/topology_text.h"

namespace {

struct Options {
  bool json = false;
  int ranks = 0;  // 0: no plan
  int threads = 0;
  std::string xml;
  std::string synthetic;
  bool bandwidth = false;
  int bandwidth_mib = 0;
  int repetitions = 10;
};

int run(const Options& o) {
  using namespace tps;
  Machine m = !o.xml.empty()         ? load_machine_xml(o.xml)
              : !o.synthetic.empty() ? load_machine_synthetic(o.synthetic)
                                     : discover_machine();
  std::optional<PlacementPlan> plan;
  if (o.ranks != 0 || o.threads != 0) plan = plan_placement(m, o.ranks ? o.ranks : 1, o.threads);
  std::vector<BandwidthResult> bw;
  if (o.bandwidth) {
    if (!o.json && m.is_this_host) std::fputs("measuring memory bandwidth...\n", stderr);
    bw = measure_bandwidth(m, static_cast<uint64_t>(o.bandwidth_mib) << 20, o.repetitions);
  }

  if (o.json) {
    nlohmann::json j = {{"machine", machine_to_json(m)}};
    if (plan) j["placement"] = plan_to_json(m, *plan);
    if (o.bandwidth) j["bandwidth"] = bandwidth_to_json(m, bw);
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string out = machine_to_text(m);
  if (plan) out += plan_to_text(m, *plan);
  if (o.bandwidth) out += bandwidth_to_text(bw);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "tpstopo: the machine as tps sees it -- packages, NUMA nodes and their memory, cores, "
      "caches, NUMA distances and the PUs this process may use; optionally the placement of "
      "N ranks and measured memory bandwidth per node.",
      "tpstopo"};
  app.add_flag("--json", o.json, "print JSON instead of text");
  app.add_option("--ranks", o.ranks, "print the placement plan for N ranks on one host")
      ->check(tps::kPositive);
  app.add_option("--threads", o.threads, "threads per rank for the plan (default: one per core)")
      ->check(tps::kPositive);
  auto* xml = app.add_option("--input", o.xml, "read the topology from an hwloc XML file "
                                               "(lstopo --of xml) instead of this host");
  app.add_option("--synthetic", o.synthetic,
                 "use an hwloc synthetic topology, e.g. \"pack:2 numa:1 core:4 pu:2\"")
      ->excludes(xml);
  app.add_flag("--bandwidth", o.bandwidth,
               "measure memory bandwidth (STREAM triad) of each NUMA node alone and of all "
               "nodes together, with threads bound to each node's cores (this host only)");
  app.add_option("--bandwidth-mib", o.bandwidth_mib,
                 "size of each triad array per node in MiB (default: 4x the node's L3, "
                 "256..1024)")
      ->check(tps::kPositive);
  app.add_option("--repetitions", o.repetitions, "triad repetitions (best and median reported)")
      ->check(tps::kPositive);
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  return tps::run_tool("tpstopo", [&] { return run(o); });
}
