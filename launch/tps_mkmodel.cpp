// tps-mkmodel: writes a synthetic gpt-oss GGUF file -- the real release's
// architecture, tensor names, types and metadata, seeded random weights, the
// real o200k_harmony vocabulary. Streams to disk with bounded memory.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/model/model_config.h"
#include "engine/model/synthetic_model.h"
#include "engine/text/o200k_vocab.h"
#include "launch/cli.h"
#include "launch/progress_line.h"
#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/output_file.h"
#include "runtime/process.h"
#include "topology/machine.h"

namespace {

struct Options {
  std::string preset = "small";
  std::string out;
  uint64_t seed = 1;
  std::string vocab_json = tps::default_o200k_json();
  std::string types;
  std::string split_max_size;
  bool if_missing = false;
  bool rounded = false;
  bool force = false;
  bool quiet = false;
  // Overrides of the preset's shape; 0 = keep.
  uint32_t layers = 0, embd = 0, heads = 0, kv_heads = 0, head_dim = 0, experts = 0, experts_used = 0, ff = 0,
           window = 0;
};

void apply_overrides(const Options& o, tps::ModelConfig& c) {
  auto set = [](uint32_t v, uint32_t& field) {
    if (v) field = v;
  };
  set(o.layers, c.n_layer), set(o.embd, c.n_embd), set(o.heads, c.n_head);
  set(o.kv_heads, c.n_head_kv), set(o.head_dim, c.head_dim), set(o.experts, c.n_expert);
  set(o.experts_used, c.n_expert_used), set(o.ff, c.n_ff_exp), set(o.window, c.sliding_window);
  // Rows of Q8_0 and MXFP4 matrices are whole 32-element blocks.
  auto blocks = [](uint32_t n, const char* what) {
    if (n % 32)
      throw tps::InputError(tps::cat(what, " = ", n,
                                     " is not a multiple of 32 (Q8_0/MXFP4 "
                                     "rows are whole 32-element blocks)"));
  };
  blocks(c.n_embd, "--embd");
  blocks(c.q_width(), "--heads x --head-dim");
  blocks(c.n_ff_exp, "--ff");
  if (c.n_head % c.n_head_kv)
    throw tps::InputError(tps::cat("--heads ", c.n_head, " is not a multiple of --kv-heads ", c.n_head_kv));
  if (c.head_dim % 2) throw tps::InputError(tps::cat("--head-dim ", c.head_dim, " is odd"));
  if (c.n_expert_used > c.n_expert)
    throw tps::InputError(tps::cat("--experts-used ", c.n_expert_used, " is more than --experts ", c.n_expert));
}

// Why the file at path is not the model spec describes (its preset, seed,
// shape and types); nullopt when it is.
std::optional<std::string> differs(const std::string& path, const tps::SyntheticSpec& spec) {
  try {
    tps::GgufFile f = tps::GgufFile::open(path);
    tps::ModelConfig c = tps::read_model_config(f);
    const std::optional<std::string_view> preset = f.find_string("tps.synthetic.preset");
    if (!preset) return "not a synthetic model";
    bool same_types = true;
    for (const tps::TensorSpec& t : tps::gpt_oss_tensors(spec.config))
      same_types &= f.tensor(t.name).type == tps::synthetic_type(t, spec);
    if (*preset == spec.preset && f.find_u64("tps.synthetic.seed") == spec.seed &&
        f.find_bool("tps.synthetic.rounded").value_or(false) == spec.rounded && c.n_layer == spec.config.n_layer &&
        c.n_embd == spec.config.n_embd && c.n_expert == spec.config.n_expert && same_types)
      return std::nullopt;
    return tps::cat("a synthetic model of preset ", *preset, ", seed ", f.find_u64("tps.synthetic.seed").value_or(0),
                    ", ", c.n_layer, " layers, d=", c.n_embd, ", ", c.n_expert, " experts, its own types");
  } catch (const tps::Error& e) {
    return tps::cat("not a model tps reads: ", e.what());
  }
}

int run(const Options& o) {
  using namespace tps;
  SyntheticSpec spec = synthetic_preset(o.preset);
  spec.seed = o.seed;
  spec.rounded = o.rounded;
  apply_overrides(o, spec.config);
  if (!o.types.empty()) set_synthetic_types(spec, o.types);
  if (!o.split_max_size.empty()) {
    const std::optional<SizeText> size = parse_size(o.split_max_size, "--split-max-size");
    if (!size || !size->has_unit)
      throw InputError(cat("--split-max-size '", o.split_max_size, "': expected a size with its unit (2G, 500M)"));
    spec.split_max_bytes = size->value;
  }
  std::string out = o.out.empty() ? cat("models/gpt-oss-", o.preset, ".gguf") : o.out;
  const std::vector<std::string> paths = synthetic_model_paths(spec, out);
  std::error_code ec;
  const bool exists = std::any_of(paths.begin(), paths.end(), [&](const std::string& p) {
    return std::filesystem::exists(std::filesystem::symlink_status(p, ec));
  });
  // An existing file is replaced only when asked (--force); --if-missing
  // keeps the model it would write and refuses anything else, which may be
  // what someone needs (never anything but a regular file, nor an input).
  if (exists && o.if_missing) {
    const std::optional<std::string> why = differs(paths.front(), spec);
    if (!why) {
      log_info(out, " is up to date");
      return 0;
    }
    if (!o.force)
      throw InputError(
          cat("-o ", out, ": exists and is not the model --if-missing would write (", *why, "); --force replaces it"));
  }
  const std::vector<std::string> inputs{o.vocab_json};
  for (const std::string& p : paths) {
    check_output_target(p, file_ids(inputs), "-o");
    if (!o.force && !o.if_missing && std::filesystem::exists(std::filesystem::symlink_status(p, ec)))
      throw InputError(cat(p, " exists (--force replaces it)"));
  }
  std::filesystem::path parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  // The tensors and their metadata (the vocabulary: ~5 MB) must fit the disk.
  const uint64_t bytes = synthetic_tensor_bytes(spec) + (64ull << 20);
  const std::filesystem::space_info disk = std::filesystem::space(parent.empty() ? "." : parent, ec);
  if (!ec && disk.available < bytes)
    throw InputError(cat("-o ", out, ": the model needs ", format_bytes(bytes), " but its file system has ",
                         format_bytes(disk.available), " free"));

  const Clock::time_point t0 = Clock::now();
  Vocab vocab = [&] {
    try {
      return build_o200k_harmony_vocab(o.vocab_json);
    } catch (const InputError& e) {
      throw InputError(cat("--vocab-json ", e.what()));
    }
  }();
  log_info("preset ", spec.preset, ", seed ", spec.seed, ", ", spec.config.n_layer, " layers, ", spec.config.n_expert,
           " experts, d=", spec.config.n_embd, ": ", static_cast<int64_t>(synthetic_tensor_bytes(spec) / 1e6),
           " MB of tensors -> ", out, paths.size() > 1 ? cat(" in ", paths.size(), " parts") : "");
  ProgressLine progress("writing");
  write_synthetic_model(
      spec, vocab, out, [&](uint64_t done, uint64_t total) { progress.update(done, total); }, inputs);
  log_info("wrote ", paths.size() > 1 ? cat(paths.size(), " parts, ", paths.front(), " ...") : out, " in ",
           fmt::format("{:.1f}", seconds_since(t0)), " s, peak RSS ", static_cast<int64_t>(peak_rss_mib()), " MiB");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "tps-mkmodel: write a synthetic gpt-oss GGUF file (the real release's "
      "architecture, tensor names, types and metadata; seeded random weights; the real "
      "o200k_harmony vocabulary).",
      "tps-mkmodel"};
  std::string presets =
      "tiny (unit tests), small (end-to-end tests), 20b-4l (gpt-oss-20b widths, "
      "4 layers), 20b (the full 24-layer shape), 120b-4l (gpt-oss-120b: 128 experts, 4 layers), 120b (its "
      "full 36 layers, 63.4 GB, in 3 parts as the release)";
  app.add_option("--preset", o.preset, presets)
      ->check(CLI::IsMember(tps::synthetic_preset_names()))
      ->capture_default_str();
  app.add_option("-o,--out", o.out, "output file (default: models/gpt-oss-PRESET.gguf)");
  app.add_option("--seed", o.seed, "weights are a pure function of preset, shape and seed")
      ->check(tps::kSeed)
      ->capture_default_str();
  app.add_option("--type", o.types,
                 "ROLE=TYPE,...: tensor types other than the release's (Q8_0 dense, MXFP4 experts), the last "
                 "that names a tensor winning; ROLE: token_embd, output, attn_q, attn_k, attn_v, attn_output, "
                 "ffn_gate_exps, ffn_up_exps, ffn_down_exps, attn, experts, dense; TYPE: " +
                     tps::type_names(tps::can_decode) + " (rounded to nearest)");
  app.add_option("--split-max-size", o.split_max_size,
                 "write a split model (llama.cpp's gguf-split layout: OUT less .gguf, -00001-of-0000N.gguf, ...) of "
                 "parts of whole tensors, each at most this size (2G, 500M) unless one tensor is more");
  app.add_flag("--force", o.force, "replace an existing file at -o (never anything but a regular file)");
  app.add_flag("--rounded", o.rounded,
               "round Q8_0 and MXFP4 tensors from the same values every other type rounds, so that one seed is "
               "one model in every type (to compare types); by default they are drawn as codes, another model");
  app.add_flag("--if-missing", o.if_missing,
               "do nothing when the output is already the model this would write (preset, seed, shape, types); "
               "refuse any other file there (--force replaces it)");
  app.add_option("--vocab-json", o.vocab_json,
                 "o200k_base ranks from the npm package tiktoken (installed by "
                 "scripts/install-deps)")
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "no progress output");
  auto* shape = app.add_option_group("shape", "override the preset's shape");
  // Bounds: what tps loads (experts, head dimension) or far past any
  // gpt-oss shape (the 120b: 36 layers, d = 2880, 64 heads, ff = 2880).
  shape->add_option("--layers", o.layers, "transformer blocks")->check(CLI::Range(1, 1024));
  shape->add_option("--embd", o.embd, "residual width (multiple of 32)")->check(CLI::Range(32, 1 << 16));
  shape->add_option("--heads", o.heads, "query heads")->check(CLI::Range(1, 1024));
  shape->add_option("--kv-heads", o.kv_heads, "key/value heads")->check(CLI::Range(1, 1024));
  shape->add_option("--head-dim", o.head_dim, "head dimension (even)")->check(CLI::Range(2, 512));
  shape->add_option("--experts", o.experts, "experts per layer")->check(CLI::Range(1, 256));
  shape->add_option("--experts-used", o.experts_used, "experts per token (top-k)")->check(CLI::Range(1, 256));
  shape->add_option("--ff", o.ff, "expert intermediate size (multiple of 32)")->check(CLI::Range(32, 1 << 18));
  shape->add_option("--window", o.window, "sliding window in tokens")->check(CLI::Range(1, 1 << 20));
  tps::add_version_flag(app);
  if (auto code = tps::parse_command_line(app, argc, argv)) return *code;
  tps::log_configure("tps-mkmodel", o.quiet ? tps::LogLevel::quiet : tps::LogLevel::info);
  return tps::run_tool("tps-mkmodel", [&] { return run(o); });
}
