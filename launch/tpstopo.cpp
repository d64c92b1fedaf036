// tpstopo: what this machine (or a described one) looks like to tps, where
// ranks would run, and how much memory bandwidth each NUMA node delivers.
#include <fmt/format.h>

#include <cstdio>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/synthetic_model.h"
#include "engine/sched/generator.h"
#include "launch/cli.h"
#include "launch/json_output.h"
#include "launch/run_options.h"
#include "runtime/error.h"
#include "runtime/log.h"
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
  std::string preset;        // a tps-mkmodel preset planned without its file
  tps::GeneratorOptions kv;  // tpsrun's options that size the KV pool
  std::string kv_size;
  tps::QuantizePlan quantize;  // tpsrun's --quantize: the types the ranks would hold
  int hosts = 1;               // the plan's hosts, each this machine
  double node_gbps = 0;        // read bandwidth of a NUMA node, for the projection; 0: none
};

// What each rank would hold of a model (--model's file or --preset's shape)
// in each split mode -- its weights and the KV pool tpsrun would give it
// with these options -- and whether that fits the memory of the rank's NUMA
// node (weights in the types --quantize converts them to) (on this host
// what it has available: free plus droppable file pages; for a described
// machine, its total), over --hosts hosts each like this machine (ranks in
// host order). Ranks that share a node share its memory and its bandwidth.
// With --node-gbps, the decode rate one sequence could reach if reading the
// weights were all its time: the slowest node's reads (cut inside layers,
// nodes read at once) or every stage's reads in turn (a pipeline);
// exchanges not counted.
nlohmann::json model_fit(const tps::Machine& m, const tps::PlacementPlan& plan, const Options& o) {
  using namespace tps;
  GeneratorOptions kv = o.kv;  // with --kv-size's limits
  // A file, or a preset's tensors as tps-mkmodel would write them.
  ModelConfig c;
  ModelShape shape;
  if (!o.preset.empty()) {
    const SyntheticSpec spec = synthetic_preset(o.preset);
    c = spec.config;
    shape = synthetic_model_shape(spec, o.quantize);
  } else {
    GgufFile f = GgufFile::open(o.model);
    c = read_model_config(f);
    shape = model_shape(f, c, o.quantize);
  }
  const int per_host = static_cast<int>(plan.ranks.size()), ranks = per_host * o.hosts;
  // Rank r runs on host r / per_host, node plan.ranks[r % per_host].numa_node.
  auto same_node = [&](int q, int r) {
    return q / per_host == r / per_host && plan.ranks[q % per_host].numa_node == plan.ranks[r % per_host].numa_node;
  };
  nlohmann::json j = {{"file", o.model},
                      {"preset", o.preset},
                      {"weight_bytes", shape.total()},
                      {"quantize", o.quantize.spec},
                      {"layers", c.n_layer},
                      {"memory", m.is_this_host ? "available" : "total"},
                      {"hosts", o.hosts},
                      {"node_gbps", o.node_gbps},
                      {"kv_options",
                       {{"context", kv.context},
                        {"sequences", kv.max_sequences},
                        {"step_tokens", kv.step_tokens},
                        {"kv_size", o.kv_size},
                        {"kv_type", kv_type_name(kv.kv_type)}}},
                      {"splits", nlohmann::json::object()}};
  parse_kv_size(o.kv_size, kv.kv_positions, kv.kv_bytes);
  for (SplitMode mode : kSplitModes) {
    nlohmann::json& out = j["splits"][split_mode_name(mode)];
    std::vector<RankShare> shares = plan_split(shape, mode, ranks);
    out["ranks"] = nlohmann::json::array();
    std::vector<uint64_t> kv_bytes(ranks);
    std::vector<SchedulerOptions> pools(ranks);
    for (int r = 0; r < ranks; ++r) {
      const Shard shard{mode, r, ranks, shares[r]};
      pools[r] = scheduler_options(kv, c, shard);
      kv_bytes[r] = kv_pool_bytes(pools[r], kv.kv_type, c, shard);
    }
    double token_seconds = 0;  // cut inside layers: the slowest node's; a pipeline: every stage's
    for (int r = 0; r < ranks; ++r) {
      const NumaNode& node = m.numa_nodes[plan.ranks[r % per_host].numa_node];
      uint64_t available = m.is_this_host ? node_available_bytes(node.os_index) : node.memory_bytes;
      uint64_t on_node = 0, node_reads = 0;
      for (int q = 0; q < ranks; ++q)
        if (same_node(q, r)) on_node += shares[q].bytes + kv_bytes[q], node_reads += shares[q].read_bytes;
      const double seconds =
          static_cast<double>(mode == SplitMode::layers ? shares[r].read_bytes : node_reads) / (o.node_gbps * 1e9);
      token_seconds = mode == SplitMode::layers ? token_seconds + seconds : std::max(token_seconds, seconds);
      auto range = [](const Range& x) { return nlohmann::json::array({x.begin, x.end}); };
      const RankShare& sh = shares[r];
      out["ranks"].push_back({{"rank", r},
                              {"host", r / per_host},
                              {"bytes", sh.bytes},
                              {"read_bytes_per_token", sh.read_bytes},
                              {"kv_bytes", kv_bytes[r]},
                              {"kv_positions", pools[r].full_blocks * kKvBlock},
                              {"layers", range(sh.layers)},
                              {"kv_heads", range(sh.kv_heads)},
                              {"experts", range(sh.experts)},
                              {"ff", range(sh.ff)},
                              {"vocab", range(sh.vocab)},
                              {"holds", share_text(sh, mode)},
                              {"idle", idle_parts(sh, mode)},
                              {"numa_node_os_index", node.os_index},
                              {"node_memory_bytes", available},
                              {"fits", on_node <= available}});
    }
    if (o.node_gbps > 0) out["projected_tokens_per_s"] = 1 / token_seconds;
  }
  return j;
}

std::string model_fit_text(const nlohmann::json& j) {
  using tps::cat;
  using tps::format_bytes;
  const nlohmann::json& kv = j["kv_options"];
  const std::string kv_size = kv["kv_size"].get<std::string>();
  const int hosts = j["hosts"].get<int>();
  std::string s =
      cat("model ",
          j["preset"].get<std::string>().empty() ? j["file"].get<std::string>()
                                                 : "preset " + j["preset"].get<std::string>(),
          ": ", format_bytes(j["weight_bytes"]), " of weights",
          j["quantize"].get<std::string>().empty() ? "" : " (--quantize " + j["quantize"].get<std::string>() + ")",
          " in ", j["layers"].get<int>(), " layers; what each rank holds, by split mode, with the KV pool for ",
          kv["sequences"].get<int>(), " sequence(s) of ", kv["context"].get<int>(), " positions in ",
          kv["kv_type"].get<std::string>(), kv_size.empty() ? "" : " (--kv-size " + kv_size + ")", " (node memory is ",
          j["memory"].get<std::string>(), " memory)", hosts > 1 ? cat(", on ", hosts, " such hosts") : "", ":\n");
  for (const auto& [mode, split] : j["splits"].items()) {
    if (split.contains("projected_tokens_per_s"))
      s += cat("  ", mode, ": one sequence decodes at most ",
               fmt::format("{:.1f}", split["projected_tokens_per_s"].get<double>()), " tok/s at ",
               j["node_gbps"].get<double>(), " GB/s a node (weights read; exchanges not counted)\n");
    for (const auto& r : split["ranks"]) {
      s += cat("  ", mode, " rank ", r["rank"].get<int>(), ": ", format_bytes(r["bytes"]), " (",
               r["holds"].get<std::string>(), ") + KV pool ", format_bytes(r["kv_bytes"]), " (",
               r["kv_positions"].get<int>(), " positions), reads ", format_bytes(r["read_bytes_per_token"]),
               " a token; ", hosts > 1 ? cat("host ", r["host"].get<int>(), " ") : "", "node ",
               r["numa_node_os_index"].get<int>(), ": ", r["fits"].get<bool>() ? "fits" : "does NOT fit");
      for (size_t i = 0; i < r["idle"].size(); ++i) s += cat(i ? ", " : "; holds no ", r["idle"][i].get<std::string>());
      s += "\n";
    }
  }
  return s;
}

int run(const Options& o) {
  using namespace tps;
  Machine m = !o.xml.empty()         ? load_machine_xml(o.xml)
              : !o.synthetic.empty() ? load_machine_synthetic(o.synthetic)
                                     : discover_machine();
  std::optional<PlacementPlan> plan;
  const bool planned_model = !o.model.empty() || !o.preset.empty();
  if (o.ranks != 0 || o.threads != 0 || planned_model) {
    int ranks = o.ranks;
    if (ranks == 0)  // as tpsrun would be started: one rank per NUMA node with cores
      for (const NumaNode& n : m.numa_nodes) ranks += !n.cores.empty();
    plan = plan_placement(m, std::max(ranks, 1), o.threads);
  }
  nlohmann::json fit;
  if (planned_model) fit = model_fit(m, *plan, o);
  std::vector<BandwidthResult> bw;
  if (o.bandwidth && o.bandwidth_mib > 0)
    for (const NumaNode& n : m.numa_nodes) {
      // The triad's three arrays, each on every node measured.
      const uint64_t need = 3 * (static_cast<uint64_t>(o.bandwidth_mib) << 20), has = node_available_bytes(n.os_index);
      if (!n.cores.empty() && has > 0 && need > has)
        throw InputError(cat("--bandwidth-mib ", o.bandwidth_mib, ": three arrays of that size need ",
                             format_bytes(need), " but NUMA node ", n.os_index, " has ", format_bytes(has),
                             " available"));
    }
  if (o.bandwidth) {
    if (!o.json && m.is_this_host) log_info("measuring memory bandwidth...");
    bw = measure_bandwidth(m, static_cast<uint64_t>(o.bandwidth_mib) << 20, o.repetitions);
  }

  if (o.json) {
    nlohmann::json j = {{"machine", machine_to_json(m)}};
    if (plan) j["placement"] = plan_to_json(m, *plan);
    if (o.bandwidth) j["bandwidth"] = bandwidth_to_json(m, bw);
    if (planned_model) j["model"] = fit;
    print_json(j);
    return 0;
  }
  std::string out = machine_to_text(m);
  if (plan) out += plan_to_text(m, *plan);
  if (o.bandwidth) out += bandwidth_to_text(bw);
  if (planned_model) out += model_fit_text(fit);
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
  app.add_option("--ranks", o.ranks, "print the placement plan for N ranks on one host")->check(tps::kPositive);
  app.add_option("-t,--threads", o.threads, "threads per rank for the plan (default: one per core)")
      ->check(tps::kPositive);
  auto* xml = app.add_option("--input", o.xml,
                             "read the topology from an hwloc XML file "
                             "(lstopo --of xml) instead of this host");
  app.add_option("--synthetic", o.synthetic, "use an hwloc synthetic topology, e.g. \"pack:2 numa:1 core:4 pu:2\"")
      ->excludes(xml);
  auto* bandwidth = app.add_flag("--bandwidth", o.bandwidth,
                                 "measure memory bandwidth (STREAM triad) of each NUMA node alone and of all "
                                 "nodes together, with threads bound to each node's cores (this host only)");
  app.add_option("--bandwidth-mib", o.bandwidth_mib,
                 "size of each triad array per node in MiB (default: 4x the node's L3, "
                 "256..1024)")
      ->check(tps::kPositive)
      ->needs(bandwidth);
  app.add_option("--repetitions", o.repetitions, "triad repetitions (best and median reported)")
      ->check(tps::kPositive)
      ->needs(bandwidth);
  auto* model =
      app.add_option("-m,--model", o.model,
                     "a gpt-oss GGUF file: the bytes each rank would hold in each split mode "
                     "(layers, experts, tensor), with the KV pool tpsrun would give it, and whether they fit its NUMA "
                     "node's memory");
  auto* preset = app.add_option("--preset", o.preset,
                                "plan a tps-mkmodel preset (e.g. 120b) as --model plans a file, from its shape and "
                                "types, without the file")
                     ->check(CLI::IsMember(tps::synthetic_preset_names()))
                     ->excludes(model);
  // Each of these plans with --model or --preset, and means nothing alone.
  const std::vector<CLI::Option*> model_options{
      app.add_option("--ctx", o.kv.context, "with --model or --preset: tpsrun's --ctx")
          ->check(tps::kPositive)
          ->capture_default_str(),
      app.add_option("--parallel", o.kv.max_sequences, "with --model or --preset: tpsrun's --parallel")
          ->check(tps::kPositive)
          ->capture_default_str(),
      app.add_option("--batch", o.kv.step_tokens, "with --model or --preset: tpsrun's --batch")
          ->check(tps::kPositive)
          ->capture_default_str(),
      app.add_option("--kv-size", o.kv_size, "with --model or --preset: tpsrun's --kv-size"),
      tps::add_kv_type_option(app, o.kv.kv_type, "with --model or --preset: tpsrun's --kv-type"),
      tps::add_quantize_option(
          app, o.quantize, "with --model or --preset: tpsrun's --quantize (the weights in the types it converts to)"),
      app.add_option("--hosts", o.hosts,
                     "with --model or --preset: plan for this many hosts like this machine (ranks in host order)")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str(),
      app.add_option("--node-gbps", o.node_gbps,
                     "with --model or --preset: a NUMA node's read bandwidth in GB/s (e.g. tpstopo --bandwidth's "
                     "triad), to project the decode rate of one sequence in each split")
          ->check(tps::positive_number(1e6, "GB/s", "GB/S"))};
  app.callback([&] {
    if (model->count() == 0 && preset->count() == 0)
      for (CLI::Option* option : model_options)
        if (option->count() > 0) throw CLI::RequiresError(option->get_name(), "--model or --preset");
  });
  tps::add_version_flag(app, [] { return "hwloc: " + tps::hwloc_version(); });
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  tps::log_configure("tpstopo", tps::LogLevel::info);
  return tps::run_tool("tpstopo", [&] { return run(o); });
}
