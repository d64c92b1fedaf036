#include "engine/kernels/packed_rows.h"

#include <cstring>

#include "engine/quant_blocks.h"
#include "runtime/error.h"

namespace tps {

void pack_row(GgmlType type, const uint8_t* src, uint8_t* dst, int64_t cols) {
  const int64_t blocks = cols / 32;
  switch (type) {
    case GgmlType::Q8_0: {
      constexpr int64_t kBlock = sizeof(BlockQ8_0);
      auto values = [&](int64_t b) { return src + b * kBlock + 2; };
      for (int64_t b = 0; b < blocks; ++b) std::memcpy(dst + 32 * blocks + 2 * b, src + b * kBlock, 2);
      int64_t b = 0;
      for (; b + 2 <= blocks; b += 2) {
        uint8_t* pair = dst + 32 * b;
        std::memcpy(pair, values(b), 16);
        std::memcpy(pair + 16, values(b + 1), 16);
        std::memcpy(pair + 32, values(b) + 16, 16);
        std::memcpy(pair + 48, values(b + 1) + 16, 16);
      }
      if (b < blocks) std::memcpy(dst + 32 * b, values(b), 32);
      return;
    }
    case GgmlType::MXFP4: {
      constexpr int64_t kBlock = sizeof(BlockMxfp4);
      for (int64_t b = 0; b < blocks; ++b) {
        dst[16 * blocks + b] = src[b * kBlock];
        std::memcpy(dst + 16 * b, src + b * kBlock + 1, 16);
      }
      return;
    }
    default: throw Error(cat("pack_row: ", type_name(type), " rows are not repacked"));
  }
}

}  // namespace tps
