#include "engine/kernels/packed_rows.h"

#include <algorithm>
#include <cstring>

#include "runtime/error.h"

namespace tps {
namespace {

// A packed format as the layout uses it: bytes of values (V) and of scale
// (S) per block; a row's group holds V / 4 vectors, each of 32 / V quads
// (Q8_0: one; MXFP4: the low and the high nibbles of the same bytes).
struct Format {
  int64_t V, S;
  constexpr Format(PackedFormat p) : V(p.value_bytes), S(p.scale_bytes) {}
  constexpr int vectors() const { return static_cast<int>(V / 4); }
  constexpr int quads_per_vector() const { return static_cast<int>(32 / V); }
  // Where the 4 bytes of vector v of a block sit in the file's block values.
  constexpr int source_byte(int v) const { return quad_first_value(v * quads_per_vector()); }
};
constexpr Format kQ8_0{kPackedQ8_0}, kMxfp4{kPackedMxfp4};

[[noreturn]] void not_packed(GgmlType type) {
  throw Error(cat("packed rows: ", type_name(type), " rows are not repacked"));
}

Format format_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return kQ8_0;
    case GgmlType::MXFP4: return kMxfp4;
    default: not_packed(type);
  }
}

// Where row r's group of block b starts, in a tile of T rows: its values and
// scales, and the group's lanes g.
struct GroupPlace {
  int64_t values, scales;
  int g;
};
GroupPlace group_place(const Format& f, int64_t blocks, int64_t T, int64_t r, int64_t b) {
  const int64_t k = b / kGroupBlocks, first = k * kGroupBlocks;
  const int g = static_cast<int>(std::min<int64_t>(kGroupBlocks, blocks - first));
  const int64_t start = first * T * (f.V + f.S);  // the groups before are full
  return {start + r * g * f.V, start + T * g * f.V + r * g * f.S, g};
}

}  // namespace

int64_t packed_value_offset(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b, int j) {
  const Format f = format_of(type);
  const GroupPlace at = group_place(f, blocks, T, r, b);
  const int vector = quad_of(j) / f.quads_per_vector();
  return at.values + 4 * at.g * vector + 4 * (b % kGroupBlocks) + j % 4;
}

int64_t packed_scale_offset(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b) {
  const Format f = format_of(type);
  return group_place(f, blocks, T, r, b).scales + f.S * (b % kGroupBlocks);
}

namespace {
// pack_rows for one format, known at compile time so that every copy is a
// fixed-size move (with the sizes at run time, each was a memcpy call and
// packing took a quarter of a 20b-4l load's samples).
template <Format f>
void pack_rows_as(const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols) {
  const int64_t blocks = cols / 32, row = blocks * (f.V + f.S);
  for (int64_t r0 = 0; r0 < rows;) {
    const int64_t T = tile_rows(r0, rows);
    uint8_t* tile = dst + r0 * row;
    for (int64_t r = 0; r < T; ++r) {
      const uint8_t* in = src + (r0 + r) * src_stride;
      for (int64_t first = 0; first < blocks; first += kGroupBlocks) {
        const GroupPlace at = group_place(f, blocks, T, r, first);
        for (int lane = 0; lane < at.g; ++lane) {
          const uint8_t* block = in + (first + lane) * (f.V + f.S);  // [scale][values]
          std::memcpy(tile + at.scales + f.S * lane, block, f.S);
          for (int v = 0; v < f.vectors(); ++v)
            std::memcpy(tile + at.values + 4 * at.g * v + 4 * lane, block + f.S + f.source_byte(v), 4);
        }
      }
    }
    r0 += T;
  }
}
}  // namespace

void pack_rows(GgmlType type, const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols) {
  switch (type) {
    case GgmlType::Q8_0: return pack_rows_as<kQ8_0>(src, src_stride, dst, rows, cols);
    case GgmlType::MXFP4: return pack_rows_as<kMxfp4>(src, src_stride, dst, rows, cols);
    default: not_packed(type);
  }
}

}  // namespace tps
