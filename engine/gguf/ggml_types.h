// ggml tensor types as GGUF files store them (spec §3.3): id, name, block
// size in elements and bytes per block. Unknown and retired ids are refused.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace tps {

// clang-format off
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};
// clang-format on

struct GgmlTypeInfo {
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};

// The table entry of a known type id; nullopt for unknown or retired ids.
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
const char* type_name(GgmlType type);
// The known type of that name (as type_name gives it); nullopt otherwise.
std::optional<GgmlType> type_from_name(const std::string& name);
// The names of the known types `which` takes, in id order: "F32, F16, ...",
// for messages and help.
std::string type_names(const std::function<bool(GgmlType)>& which);

// Bytes of a row of n elements; throws InputError when n is not a multiple
// of the type's block size.
uint64_t row_bytes(GgmlType type, uint64_t n);

}  // namespace tps
