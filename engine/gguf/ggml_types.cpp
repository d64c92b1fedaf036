#include "engine/gguf/ggml_types.h"

#include "runtime/error.h"

namespace tps {

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: return GgmlTypeInfo{"F32", 1, 4};
    case GgmlType::F16: return GgmlTypeInfo{"F16", 1, 2};
    case GgmlType::Q4_0: return GgmlTypeInfo{"Q4_0", 32, 18};
    case GgmlType::Q4_1: return GgmlTypeInfo{"Q4_1", 32, 20};
    case GgmlType::Q5_0: return GgmlTypeInfo{"Q5_0", 32, 22};
    case GgmlType::Q5_1: return GgmlTypeInfo{"Q5_1", 32, 24};
    case GgmlType::Q8_0: return GgmlTypeInfo{"Q8_0", 32, 34};
    case GgmlType::Q8_1: return GgmlTypeInfo{"Q8_1", 32, 36};
    case GgmlType::Q2_K: return GgmlTypeInfo{"Q2_K", 256, 84};
    case GgmlType::Q3_K: return GgmlTypeInfo{"Q3_K", 256, 110};
    case GgmlType::Q4_K: return GgmlTypeInfo{"Q4_K", 256, 144};
    case GgmlType::Q5_K: return GgmlTypeInfo{"Q5_K", 256, 176};
    case GgmlType::Q6_K: return GgmlTypeInfo{"Q6_K", 256, 210};
    case GgmlType::Q8_K: return GgmlTypeInfo{"Q8_K", 256, 292};
    case GgmlType::IQ2_XXS: return GgmlTypeInfo{"IQ2_XXS", 256, 66};
    case GgmlType::IQ2_XS: return GgmlTypeInfo{"IQ2_XS", 256, 74};
    case GgmlType::IQ3_XXS: return GgmlTypeInfo{"IQ3_XXS", 256, 98};
    case GgmlType::IQ1_S: return GgmlTypeInfo{"IQ1_S", 256, 50};
    case GgmlType::IQ4_NL: return GgmlTypeInfo{"IQ4_NL", 32, 18};
    case GgmlType::IQ3_S: return GgmlTypeInfo{"IQ3_S", 256, 110};
    case GgmlType::IQ2_S: return GgmlTypeInfo{"IQ2_S", 256, 82};
    case GgmlType::IQ4_XS: return GgmlTypeInfo{"IQ4_XS", 256, 136};
    case GgmlType::I8: return GgmlTypeInfo{"I8", 1, 1};
    case GgmlType::I16: return GgmlTypeInfo{"I16", 1, 2};
    case GgmlType::I32: return GgmlTypeInfo{"I32", 1, 4};
    case GgmlType::I64: return GgmlTypeInfo{"I64", 1, 8};
    case GgmlType::F64: return GgmlTypeInfo{"F64", 1, 8};
    case GgmlType::IQ1_M: return GgmlTypeInfo{"IQ1_M", 256, 56};
    case GgmlType::BF16: return GgmlTypeInfo{"BF16", 1, 2};
    case GgmlType::TQ1_0: return GgmlTypeInfo{"TQ1_0", 256, 54};
    case GgmlType::TQ2_0: return GgmlTypeInfo{"TQ2_0", 256, 66};
    case GgmlType::MXFP4: return GgmlTypeInfo{"MXFP4", 32, 17};
  }
  return std::nullopt;
}

const char* type_name(GgmlType type) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  return info ? info->name : "unknown";
}

std::string type_names(const std::function<bool(GgmlType)>& which) {
  std::string names;
  for (uint32_t id = 0; id < 64; ++id)
    if (auto info = ggml_type_info(id); info && which(static_cast<GgmlType>(id)))
      names += (names.empty() ? "" : ", ") + std::string(info->name);
  return names;
}

std::optional<GgmlType> type_from_name(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id)
    if (auto info = ggml_type_info(id); info && name == info->name) return static_cast<GgmlType>(id);
  return std::nullopt;
}

uint64_t row_bytes(GgmlType type, uint64_t n) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) throw InputError(cat("unknown tensor type id ", static_cast<uint32_t>(type)));
  if (n % info->block_elems)
    throw InputError(cat("a row of ", n, " ", info->name,
                         " elements is not a multiple of its "
                         "block of ",
                         info->block_elems));
  return n / info->block_elems * info->block_bytes;
}

}  // namespace tps
