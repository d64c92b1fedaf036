// --quantize: the type a rank keeps each role of weights in when it is not
// the file's, converted while the rank copies its shard in at load
// (model/weights.h) -- so a 16-bit file runs at 8 or 4 bits without a
// second file on disk. Roles:
//   attn     the attention projections (attn_q, attn_k, attn_v, attn_output)
//   experts  the experts' matrices (ffn_gate_exps, ffn_up_exps, ffn_down_exps)
//   embed    the token embeddings (token_embd; converted, they are copied into
//            the rank's memory instead of being read through the file mapping)
//   output   the output head (output)
// The router, norms, biases and sinks stay as the file has them (F32, and
// small). A source converts from F32, F16 or BF16, or from Q8_0 to a type
// of fewer bits; any other source (already at the target's precision or
// lower, or quantized to another type) is refused when its role is named
// (ROLE=TYPE) and left as it is by a preset.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "engine/gguf/ggml_types.h"

namespace tps {

struct TensorView;
class GgufFile;

enum class WeightRole { attn, experts, embed, output };
inline constexpr int kWeightRoles = 4;
const char* role_name(WeightRole role);
// The role of a weight tensor by its GGUF name; nullopt for every other
// tensor (kept as it is).
std::optional<WeightRole> weight_role(std::string_view tensor);

// Bits a weight of this type takes in the file (scales included).
double bits_per_weight(GgmlType type);

struct QuantizePlan {
  std::array<std::optional<GgmlType>, kWeightRoles> target{};  // by role; none: the file's type
  bool preset = false;  // int8/int4: a tensor that cannot convert is kept as it is
  std::string spec;     // as given, for messages

  bool empty() const;
  // The type tensor t of the model file `path` is kept in: the role's
  // target, or its own. Throws InputError naming --quantize, the tensor and
  // the file for a conversion that cannot be made (a source already at a
  // lower precision or quantized to another type than Q8_0; rows not a
  // whole number of the target's blocks).
  GgmlType type_for(const TensorView& t, const std::string& path) const;
  // What the plan does to the file, role by role, for the start-up line:
  // "attn F16 -> Q8_0, experts MXFP4 (kept)".
  std::string describe(const GgufFile& file) const;
};

// --quantize's text: "" (nothing converted), a preset -- int8 (every role
// to Q8_0) or int4 (attention and experts to 4 bits, embeddings and output
// head to Q8_0) -- or ROLE=TYPE[,ROLE=TYPE...] with a role above and a
// quantized type the kernels take (q8_0, q4_0, mxfp4, q4_k, ...; "all" for
// every role; roles and presets in any case, like types; a role named twice
// takes the last). Throws InputError naming the flag for anything else.
QuantizePlan parse_quantize(const std::string& spec);
// The types --quantize converts to, for messages and help: "q8_0, q4_0, ...".
std::string quantize_type_names();

}  // namespace tps
