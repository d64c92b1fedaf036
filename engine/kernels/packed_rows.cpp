#include "engine/kernels/packed_rows.h"

#include <algorithm>
#include <cstring>

#include "engine/gguf/block_codecs.h"
#include "engine/gguf/quant_blocks.h"
#include "runtime/error.h"

namespace tps {
namespace {

// Where row r's group of block b starts, in a tile of T rows (every group
// before it full).
PackedGroup group_at(const PackedFormat& f, int64_t blocks, int64_t T, int64_t r, int64_t b) {
  const int64_t k = b / kGroupBlocks, first = k * kGroupBlocks;
  const int g = static_cast<int>(std::min<int64_t>(kGroupBlocks, blocks - first));
  const int64_t start = k * T * (kGroupBlocks * f.value_bytes() + f.group_scale_bytes(kGroupBlocks));
  return {start + r * g * f.value_bytes(), start + T * g * f.value_bytes() + r * f.group_scale_bytes(g), g,
          static_cast<int>(b % kGroupBlocks)};
}

// The tile loop of packing: for each row's group, fill(block index, the
// row's group values, its scales, g) -- the group's blocks first .. first + g.
template <typename Fill>
void for_each_group(const PackedFormat& f, uint8_t* dst, int64_t rows, int64_t cols, uint64_t row_bytes, Fill fill) {
  const int64_t blocks = cols / 32;
  for (int64_t r0 = 0; r0 < rows;) {
    const int64_t T = tile_rows(r0, rows);
    uint8_t* tile = dst + r0 * static_cast<int64_t>(row_bytes);
    for (int64_t r = 0; r < T; ++r)
      for (int64_t first = 0; first < blocks; first += kGroupBlocks) {
        const PackedGroup at = group_at(f, blocks, T, r, first);
        fill(r0 + r, first, tile + at.values, tile + at.scales, at.g);
      }
    r0 += T;
  }
}

// Q8_0 and MXFP4 (the bulk of a gpt-oss file) by fixed-size moves: a
// block's bytes already are its quads (with the sizes at run time, each
// copy was a memcpy call and packing took a quarter of a 20b-4l load).
template <int V, int S>
void pack_direct(const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols,
                 const PackedFormat& f) {
  constexpr int kQuadsPerVector = 32 / V;
  for_each_group(f, dst, rows, cols, (cols / 32) * (V + S),
                 [&](int64_t row, int64_t first, uint8_t* values, uint8_t* scales, int g) {
                   for (int lane = 0; lane < g; ++lane) {
                     const uint8_t* block = src + row * src_stride + (first + lane) * (V + S);  // [scale][values]
                     std::memcpy(scales + S * lane, block, S);
                     for (int v = 0; v < V / 4; ++v)
                       std::memcpy(values + 4 * g * v + 4 * lane, block + S + quad_first_value(v * kQuadsPerVector), 4);
                   }
                 });
}

// A per-block type's scales of block `lane` of a group of g: F16 d at 2
// lane, Q4_1's and Q5_1's F16 m at 2 g + 2 lane.
void pack_block_scales(GgmlType type, const BlockFields& f, int g, int lane, uint8_t* scales) {
  std::memcpy(scales + 2 * lane, &f.d, 2);
  if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) std::memcpy(scales + 2 * g + 2 * lane, &f.m, 2);
}

// A super-block's scales (packed_rows.h): F16 d (and dmin), then bytes by
// block: sub-blocks of 32 one each; of 16, the first halves' 8, then the
// last halves'.
void pack_group_scales(GgmlType type, const BlockFields& f, uint8_t* scales) {
  uint8_t* at = scales;
  auto put = [&](const void* p, size_t n) { std::memcpy(at, p, n), at += n; };
  auto halves = [&](const int8_t* v) {
    for (int half = 0; half < 2; ++half)
      for (int b = 0; b < 8; ++b) put(&v[2 * b + half], 1);
  };
  put(&f.d, 2);
  switch (type) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: put(&f.m, 2), put(f.scale, 8), put(f.min, 8); return;
    case GgmlType::Q6_K:
    case GgmlType::Q3_K: halves(f.scale); return;
    case GgmlType::Q2_K: put(&f.m, 2), halves(f.scale), halves(f.min); return;
    case GgmlType::IQ4_XS: put(f.scale, 8); return;
    default: not_packed(type);
  }
}

// Every other type from its blocks' codes: the planes from each value's
// code, the scales by the type's own unpacking (block_codecs.h).
void pack_codes(GgmlType type, const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols,
                const PackedFormat& f) {
  const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(type));
  const int per_block = static_cast<int>(info.block_elems / 32);  // 32-value blocks in a file block
  uint8_t codes[256];
  BlockFields sc;
  for_each_group(f, dst, rows, cols, packed_row_bytes(type, cols),
                 [&](int64_t row, int64_t first, uint8_t* values, uint8_t* scales, int g) {
                   std::memset(values, 0, static_cast<size_t>(g) * f.value_bytes());
                   for (int lane = 0; lane < g; ++lane) {
                     const int64_t b = first + lane;
                     if (lane % per_block == 0) {
                       const uint8_t* block = src + row * src_stride + (b / per_block) * info.block_bytes;
                       block_fields(type, block, codes, sc);
                       if (f.per_group) pack_group_scales(type, sc, scales);
                     }
                     if (!f.per_group) pack_block_scales(type, sc, g, lane, scales);
                     const uint8_t* c = codes + 32 * (lane % per_block);
                     for (int j = 0; j < 32; ++j) {
                       const int k = quad_of(j), i = j % 4, at = 4 * lane + i;
                       if (f.nibbles) values[4 * g * (k / 2) + at] |= static_cast<uint8_t>((c[j] & 15) << 4 * (k % 2));
                       if (f.two_bits >= 0)
                         values[two_bit_plane(f, g) + 4 * g * (k / 4) + at] |=
                             static_cast<uint8_t>(((c[j] >> f.two_bits) & 3) << 2 * (k % 4));
                       if (f.one_bit >= 0)
                         values[one_bit_plane(f, g) + at] |= static_cast<uint8_t>(((c[j] >> f.one_bit) & 1) << k);
                     }
                   }
                 });
}

}  // namespace

void not_packed(GgmlType type) { throw Error(cat("packed rows: ", type_name(type), " rows are not repacked")); }

uint64_t packed_row_bytes(GgmlType type, int64_t cols) {
  if (!is_packed_type(type)) return row_bytes(type, static_cast<uint64_t>(cols));
  const PackedFormat f = packed_format(type);
  const int64_t blocks = cols / 32, full = blocks / kGroupBlocks;
  const int tail = static_cast<int>(blocks % kGroupBlocks);
  return static_cast<uint64_t>(blocks * f.value_bytes() + full * f.group_scale_bytes(kGroupBlocks) +
                               (tail ? f.group_scale_bytes(tail) : 0));
}

PackedGroup packed_group(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b) {
  return group_at(packed_format(type), blocks, T, r, b);
}

void pack_rows(GgmlType type, const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols) {
  const PackedFormat f = packed_format(type);
  switch (type) {
    case GgmlType::Q8_0: return pack_direct<32, 2>(src, src_stride, dst, rows, cols, f);
    case GgmlType::MXFP4: return pack_direct<16, 1>(src, src_stride, dst, rows, cols, f);
    default: return pack_codes(type, src, src_stride, dst, rows, cols, f);
  }
}

}  // namespace tps
