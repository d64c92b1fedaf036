#include "engine/model/quantize_plan.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/packed_rows.h"
#include "engine/model/role_types.h"
#include "runtime/error.h"

namespace tps {

namespace {

constexpr const char* kRoleNames[kWeightRoles] = {"attn", "experts", "embed", "output"};

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

std::string quantize_type_names() {
  std::string list;
  for (GgmlType t : kPackedTypes) list += (list.empty() ? "" : ", ") + lower(type_name(t));
  return list;
}

namespace {

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

}  // namespace

const char* role_name(WeightRole role) { return kRoleNames[static_cast<int>(role)]; }

std::optional<WeightRole> weight_role(std::string_view name) {
  for (const char* tail : {".attn_q.weight", ".attn_k.weight", ".attn_v.weight", ".attn_output.weight"})
    if (name.ends_with(tail)) return WeightRole::attn;
  for (const char* tail : {".ffn_gate_exps.weight", ".ffn_up_exps.weight", ".ffn_down_exps.weight"})
    if (name.ends_with(tail)) return WeightRole::experts;
  if (name == "token_embd.weight") return WeightRole::embed;
  if (name == "output.weight") return WeightRole::output;
  return std::nullopt;
}

double bits_per_weight(GgmlType type) {
  const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(type));
  return 8.0 * info.block_bytes / info.block_elems;
}

bool QuantizePlan::empty() const {
  return std::none_of(target.begin(), target.end(), [](const auto& t) { return t.has_value(); });
}

GgmlType QuantizePlan::type_for(const TensorView& t, const std::string& path) const {
  const std::optional<WeightRole> role = weight_role(t.name);
  if (!role || !target[static_cast<int>(*role)]) return t.type;
  const GgmlType to = *target[static_cast<int>(*role)];
  if (to == t.type) return to;
  const std::string where = cat(t.name, " in ", path);
  // Q8_0 keeps a weight within half a step of 1/127 of its block's largest:
  // what it holds converts to fewer bits about as well as the 16-bit source.
  const bool convertible =
      is_float(t.type) || (t.type == GgmlType::Q8_0 && bits_per_weight(to) < bits_per_weight(t.type));
  if (!convertible) {
    if (preset) return t.type;
    throw InputError(cat("--quantize ", role_name(*role), "=", lower(type_name(to)), ": ", where, " is ",
                         type_name(t.type), ", ",
                         bits_per_weight(to) >= bits_per_weight(t.type) ? "already at this precision or lower"
                                                                        : "quantized to another type than Q8_0",
                         " (--quantize converts F32, F16 and BF16 weights, and Q8_0 ones to fewer bits)"));
  }
  const uint32_t block = ggml_type_info(static_cast<uint32_t>(to))->block_elems;
  if (t.ne[0] % block)
    throw InputError(cat("--quantize ", role_name(*role), "=", lower(type_name(to)), ": ", where, " has rows of ",
                         t.ne[0], " values, not a whole number of ", type_name(to), "'s ", block, "-value blocks",
                         block > 32 && t.ne[0] % 32 == 0
                             ? " (a type of 32-value blocks fits: q8_0, q4_0, q4_1, q5_0, q5_1, "
                               "iq4_nl, mxfp4)"
                             : ""));
  return to;
}

std::string QuantizePlan::describe(const GgufFile& file) const {
  std::string text;
  for (int r = 0; r < kWeightRoles; ++r) {
    if (!target[r]) continue;
    std::vector<std::string> changes;  // each "FROM -> TO" or "TYPE (kept)" once, in file order
    for (const TensorView& t : file.tensors()) {
      if (weight_role(t.name) != static_cast<WeightRole>(r)) continue;
      const GgmlType to = type_for(t, file.path());
      const std::string change =
          to == t.type ? cat(type_name(t.type), " (kept)") : cat(type_name(t.type), " -> ", type_name(to));
      if (std::find(changes.begin(), changes.end(), change) == changes.end()) changes.push_back(change);
    }
    for (const std::string& c : changes) text += cat(text.empty() ? "" : ", ", kRoleNames[r], " ", c);
  }
  return text;
}

QuantizePlan parse_quantize(const std::string& spec) {
  QuantizePlan plan;
  plan.spec = spec;
  if (spec.empty()) return plan;
  auto all = [&](GgmlType t) { plan.target.fill(t); };
  const std::string text = lower(spec);  // as types are named: any case
  if (text == "int8") {
    all(GgmlType::Q8_0);
    plan.preset = true;
    return plan;
  }
  if (text == "int4") {
    all(GgmlType::Q8_0);
    plan.target[static_cast<int>(WeightRole::attn)] = GgmlType::Q4_0;
    plan.target[static_cast<int>(WeightRole::experts)] = GgmlType::MXFP4;
    plan.preset = true;
    return plan;
  }
  auto refusal = [&](const std::string& item) {
    return cat("--quantize '", spec, "': expected int8, int4 or ROLE=TYPE[,ROLE=TYPE...] with ROLE one of ",
               "attn, experts, embed, output, all; got '", item, "'");
  };
  for (const auto& [item, role, type] : split_role_types(text, refusal)) {
    const std::optional<GgmlType> t = type_from_name(upper(type));  // ggml's names are upper case
    if (!t || !is_packed_type(*t))
      throw InputError(cat("--quantize ", item, ": '", type, "' is not a type tps quantizes to (expected one of ",
                           quantize_type_names(), ")"));
    const auto* name = std::find(std::begin(kRoleNames), std::end(kRoleNames), role);
    if (role == "all")
      all(*t);
    else if (name != std::end(kRoleNames))
      plan.target[name - std::begin(kRoleNames)] = *t;
    else
      throw InputError(
          cat("--quantize ", item, ": '", role, "' is not a role (expected attn, experts, embed, output or all)"));
  }
  return plan;
}

}  // namespace tps
