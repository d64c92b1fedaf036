#include "launch/run_options.h"

#include "engine/model/quantize_plan.h"
#include "launch/cli.h"
#include "runtime/error.h"

namespace tps {

void parse_kv_size(const std::string& text, int& positions, uint64_t& bytes) {
  positions = 0, bytes = 0;
  if (text.empty()) return;
  const std::optional<SizeText> size = parse_size(text, "--kv-size");
  if (!size) throw InputError(cat("--kv-size '", text, "': expected positions (16384) or bytes per rank (2G, 512M)"));
  if (size->has_unit) {
    bytes = size->value;
  } else {
    if (size->value > (1ull << 30)) throw InputError(cat("--kv-size ", text, ": more positions than a pool can hold"));
    positions = static_cast<int>(size->value);
  }
}

const CLI::Validator kQuantizeSpec(
    [](std::string& text) -> std::string {
      try {
        parse_quantize(text);
        return "";
      } catch (const InputError& e) {  // CLI11 names the flag: the message's own "--quantize " goes
        const std::string message = e.what(), flag = "--quantize ";
        return message.starts_with(flag) ? message.substr(flag.size()) : message;
      }
    },
    "SPEC");

namespace {
// What --kv-type takes, said alike by the validator (CLI11 adds the flag's
// name) and by kv_type().
std::string kv_type_refusal(const std::string& text) { return "'" + text + "': expected f32, f16, bf16 or q8_0"; }
}  // namespace

const CLI::Validator kKvTypeName(
    [](std::string& text) -> std::string { return parse_kv_type(text) ? "" : kv_type_refusal(text); }, "TYPE");

KvType kv_type(const std::string& text) {
  if (text.empty()) return kDefaultKvType;
  if (const std::optional<KvType> type = parse_kv_type(text)) return *type;
  throw InputError("--kv-type " + kv_type_refusal(text));
}

GeneratorOptions generator_options(const RunOptions& o) {
  GeneratorOptions g;
  g.max_sequences = o.parallel;
  g.max_tokens = o.batch;
  g.context = o.ctx;
  parse_kv_size(o.kv_size, g.kv_positions, g.kv_bytes);
  g.kv_type = kv_type(o.kv_type);
  g.prefix_reuse = !o.no_prefix_cache;
  g.yarn_truncate = o.yarn_truncate;
  return g;
}

}  // namespace tps
