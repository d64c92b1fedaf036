// tpstopo: what this machine (or a described one) looks like to tps, where
// ranks would run, and how much memory bandwidth each NUMA node delivers.
#include <cstdio>

#include "engine/gguf_reader.h"
#include "engine/model_config.h"
#include "launch/cli.h"
#include "runtime/error.h"
#include "topology/bandwidth.h"
#include "topology/binding.h"
#include "topology/machine.h"
#include "topology/model_shape.h"
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
  std::string model;
};

// What each rank would hold of a model split by layers, and whether it fits
// the memory of the rank's NUMA node (free memory on this host; total
// memory for a described machine, where free memory is unknown).
nlohmann::json model_fit(const tps::Machine& m, const tps::PlacementPlan& plan,
                         const std::string& path) {
  using namespace tps;
  GgufFile f = GgufFile::open(path);
  ModelConfig c = read_model_config(f);
  ModelShape shape = model_shape(f, c);
  std::vector<LayerRange> ranges = split_layers(shape, static_cast<int>(plan.ranks.size()));
  nlohmann::json j = {{"file", path},
                      {"weight_bytes", shape.total()},
                      {"layers", c.n_layer},
                      {"split", "layers"},
                      {"memory", m.is_this_host ? "free" : "total"},
                      {"ranks", nlohmann::json::array()}};
  for (size_t r = 0; r < ranges.size(); ++r) {
    const NumaNode& node = m.numa_nodes[plan.ranks[r].numa_node];
    uint64_t available = m.is_this_host ? node_free_bytes(node.os_index) : node.memory_bytes;
    // Ranks sharing a node share its memory.
    uint64_t on_node = 0;
    for (size_t q = 0; q < ranges.size(); ++q)
      if (plan.ranks[q].numa_node == plan.ranks[r].numa_node) on_node += ranges[q].bytes;
    j["ranks"].push_back({{"rank", r},
                          {"layers", {ranges[r].begin, ranges[r].end}},
                          {"embeddings", r == 0},
                          {"output", r + 1 == ranges.size()},
                          {"bytes", ranges[r].bytes},
                          {"numa_node_os_index", node.os_index},
                          {"node_memory_bytes", available},
                          {"fits", on_node <= available}});
  }
  return j;
}

std::string model_fit_text(const nlohmann::json& j) {
  using tps::cat;
  using tps::format_bytes;
  std::string s = cat("model ", j["file"].get<std::string>(), ": ",
                      format_bytes(j["weight_bytes"]), " of weights in ", j["layers"].get<int>(),
                      " layers; split by layers:\n");
  for (const auto& r : j["ranks"]) {
    int b = r["layers"][0], e = r["layers"][1];
    s += cat("  rank ", r["rank"].get<int>(), ": layers ", b, "-", e - 1,
             r["embeddings"].get<bool>() ? " + embeddings" : "",
             r["output"].get<bool>() ? " + output" : "", ", ", format_bytes(r["bytes"]),
             "; node ", r["numa_node_os_index"].get<int>(), " has ",
             format_bytes(r["node_memory_bytes"]), " ", j["memory"].get<std::string>(), ": ",
             r["fits"].get<bool>() ? "fits" : "does NOT fit", "\n");
  }
  return s;
}

int run(const Options& o) {
  using namespace tps;
  Machine m = !o.xml.empty()         ? load_machine_xml(o.xml)
              : !o.synthetic.empty() ? load_machine_synthetic(o.synthetic)
                                     : discover_machine();
  std::optional<PlacementPlan> plan;
  if (o.ranks != 0 || o.threads != 0 || !o.model.empty()) {
    int ranks = o.ranks;
    if (ranks == 0)  // as tpsrun would be started: one rank per NUMA node with cores
      for (const NumaNode& n : m.numa_nodes) ranks += !n.cores.empty();
    plan = plan_placement(m, std::max(ranks, 1), o.threads);
  }
  nlohmann::json fit;
  if (!o.model.empty()) fit = model_fit(m, *plan, o.model);
  std::vector<BandwidthResult> bw;
  if (o.bandwidth) {
    if (!o.json && m.is_this_host) std::fputs("measuring memory bandwidth...\n", stderr);
    bw = measure_bandwidth(m, static_cast<uint64_t>(o.bandwidth_mib) << 20, o.repetitions);
  }

  if (o.json) {
    nlohmann::json j = {{"machine", machine_to_json(m)}};
    if (plan) j["placement"] = plan_to_json(m, *plan);
    if (o.bandwidth) j["bandwidth"] = bandwidth_to_json(m, bw);
    if (!o.model.empty()) j["model"] = fit;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string out = machine_to_text(m);
  if (plan) out += plan_to_text(m, *plan);
  if (o.bandwidth) out += bandwidth_to_text(bw);
  if (!o.model.empty()) out += model_fit_text(fit);
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
  app.add_option("--model", o.model,
                 "a gpt-oss GGUF file: the bytes each rank would hold (split by layers) and "
                 "whether they fit its NUMA node's memory");
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  return tps::run_tool("tpstopo", [&] { return run(o); });
}
