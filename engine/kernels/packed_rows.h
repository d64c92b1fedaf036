// The layout tps keeps quantized weight matrices in, and the layout of the
// int8 activations they are multiplied with. Matrices are repacked once, at
// load, so that the kernels read one sequential stream and load whole
// vectors with no per-block shuffling.
//
// Rows go by tiles of 4 (the rows a decode step computes at once); the last
// rows % 4 rows of a matrix are tiles of 1. A tile of T rows takes its T
// rows in groups of 8 blocks of 32 values (256 values; the last group of a
// row may have fewer, g):
//
//   GGUF rows:   row0 [block][block] ...  row1 ...
//   packed tile: group 0 [values of row0..row T-1][scales of row0..row T-1]
//                group 1 [values ...][scales ...] ...
//
// so a decode tile streams its T rows front to back. Within a row's group,
// each 4g-byte vector holds 4 bytes of each block (lane b, at byte 4b): the
// 32 values of a block go by quads of 4, quad k (0..7) being the values
// 16 (k % 2) + 4 (k / 2) + 0..3, so that quads 0, 2, 4, 6 are the block's
// first 16 values and 1, 3, 5, 7 its last 16 (the halves the 16-value
// sub-blocks of Q2_K, Q3_K and Q6_K scale apart). A 4-product integer sum
// per lane then adds up block by block, and a few float multiply-adds per
// 8 blocks apply all the scales.
//
// Values. Q8_0 keeps its int8 values, vector k = quad k. Every other type
// keeps each value's integer code (what indexes its table, or its unsigned
// level) in bit planes, in this order:
//   nibbles (4 vectors): vector m holds the low 4 bits of quad 2m in its
//     low nibbles and of quad 2m + 1 in its high ones -- MXFP4, Q4_0, Q4_1,
//     IQ4_NL, Q4_K, IQ4_XS, and the low 4 bits of Q5_0, Q5_1, Q5_K, Q6_K;
//   two bits (2 vectors): byte i of a lane of vector v holds 2 bits of
//     value i of quads 4v..4v+3, quad 4v + j at bits 2j -- bits 4..5 of
//     Q6_K, bits 0..1 of Q3_K and Q2_K;
//   one bit (1 vector): byte i of a lane holds one bit of value i of every
//     quad, quad k at bit k -- bit 4 of Q5_0, Q5_1, Q5_K, bit 2 of Q3_K.
// Scales, after all the rows' values of a group:
//   per block (g of them a row): Q8_0, Q4_0, Q5_0, IQ4_NL: F16 d; MXFP4:
//     E8M0; Q4_1, Q5_1: F16 d of the g blocks, then their F16 m;
//   per group (the K-quants' and IQ4_XS's 256-value super-block; their rows
//     are whole groups): F16 d (and F16 dmin), then one byte per block or
//     per half block, unpacked from the file's 6-bit fields:
//       Q4_K, Q5_K: d, dmin, scale[8], min[8]            (20 bytes)
//       Q6_K, Q3_K: d, scale of first halves[8], of last halves[8] (int8; 18)
//       Q2_K: d, dmin, scale[8] first, [8] last, min[8] first, [8] last (36)
//       IQ4_XS: d, scale[8] (int8; 10)
// A last group of g < 8 blocks is the same with g lanes: vectors of 4g
// bytes, g scales a row.
// Activations (QuantizedActivations::quantize in matmul.h) follow the quad
// order in full groups of 8 blocks, lanes past a row's last block zero.
// The kernels read a last group's vectors and scales whole, past its g
// lanes: up to kPackedOverread bytes past the end of a matrix, which must be
// readable memory. (With masked loads and its scales gathered byte by byte,
// the 2-block last group made an MXFP4 row of 2880 values 18% slower than
// one of 2816 in L2; read whole, 6%.)
#pragma once

#include <bit>
#include <cstdint>

#include "engine/gguf/ggml_types.h"

namespace tps {

// The types the integer kernels take (KernelSet::quantized, in this order),
// and so the types load_shard repacks.
inline constexpr GgmlType kPackedTypes[] = {
    GgmlType::Q8_0, GgmlType::MXFP4, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,  GgmlType::IQ4_NL,
    GgmlType::Q2_K, GgmlType::Q3_K,  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};
constexpr int kPackedTypeCount = sizeof kPackedTypes / sizeof kPackedTypes[0];
// The index of type in kPackedTypes, or -1.
constexpr int packed_index(GgmlType t) {
  for (int i = 0; i < kPackedTypeCount; ++i)
    if (kPackedTypes[i] == t) return i;
  return -1;
}
constexpr bool is_packed_type(GgmlType t) { return packed_index(t) >= 0; }

constexpr int64_t kTileRows = 4;
constexpr int64_t kPackedOverread = 64;
constexpr int kGroupBlocks = 8;

// A packed type's layout: which bit planes hold its codes, and its scale
// bytes per block or per group.
struct PackedFormat {
  bool bytes;         // Q8_0: the values themselves, 8 vectors
  bool nibbles;       // the low 4 bits of each code
  int two_bits = -1;  // the code's bit where its 2-bit field starts, or -1
  int one_bit = -1;   // the code's bit kept in the 1-bit plane, or -1
  int scale_bytes;    // per block (per_group false) or per group
  bool per_group = false;
  constexpr int value_bytes() const {  // per block
    return (bytes ? 32 : 0) + (nibbles ? 16 : 0) + (two_bits >= 0 ? 8 : 0) + (one_bit >= 0 ? 4 : 0);
  }
  // A row's scale bytes for a group of g blocks.
  constexpr int group_scale_bytes(int g) const { return per_group ? scale_bytes : g * scale_bytes; }
};
// Where each plane starts in a row's group of g blocks.
constexpr int nibble_plane(const PackedFormat&, int) { return 0; }
constexpr int two_bit_plane(const PackedFormat& f, int g) { return f.nibbles ? 16 * g : 0; }
constexpr int one_bit_plane(const PackedFormat& f, int g) {
  return two_bit_plane(f, g) + (f.two_bits >= 0 ? 8 * g : 0);
}

// Throws the Error for a type that is not repacked.
[[noreturn]] void not_packed(GgmlType type);

// The layout of a packed type (an Error for another type). Inline and
// constexpr so that the scalar kernels, instantiated per type, fold it.
constexpr PackedFormat packed_format(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return {.bytes = true, .nibbles = false, .scale_bytes = 2};
    case GgmlType::MXFP4: return {.bytes = false, .nibbles = true, .scale_bytes = 1};
    case GgmlType::Q4_0:
    case GgmlType::IQ4_NL: return {.bytes = false, .nibbles = true, .scale_bytes = 2};
    case GgmlType::Q4_1: return {.bytes = false, .nibbles = true, .scale_bytes = 4};
    case GgmlType::Q5_0: return {.bytes = false, .nibbles = true, .one_bit = 4, .scale_bytes = 2};
    case GgmlType::Q5_1: return {.bytes = false, .nibbles = true, .one_bit = 4, .scale_bytes = 4};
    case GgmlType::Q2_K: return {.bytes = false, .nibbles = false, .two_bits = 0, .scale_bytes = 36, .per_group = true};
    case GgmlType::Q3_K:
      return {.bytes = false, .nibbles = false, .two_bits = 0, .one_bit = 2, .scale_bytes = 18, .per_group = true};
    case GgmlType::Q4_K: return {.bytes = false, .nibbles = true, .scale_bytes = 20, .per_group = true};
    case GgmlType::Q5_K: return {.bytes = false, .nibbles = true, .one_bit = 4, .scale_bytes = 20, .per_group = true};
    case GgmlType::Q6_K: return {.bytes = false, .nibbles = true, .two_bits = 4, .scale_bytes = 18, .per_group = true};
    case GgmlType::IQ4_XS: return {.bytes = false, .nibbles = true, .scale_bytes = 10, .per_group = true};
    default: not_packed(type);
  }
}

// The bytes of a packed row of cols values (cols a multiple of the type's
// block); for another type, the file's row bytes.
uint64_t packed_row_bytes(GgmlType type, int64_t cols);

// Packs `rows` rows of cols values of a packed type, row i at src + i *
// src_stride in the file's layout, into dst: rows * packed_row_bytes(type,
// cols) bytes in the packed layout (dst does not overlap src). `rows`
// counts from a tile boundary: the start of a matrix.
void pack_rows(GgmlType type, const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols);

// Groups of 8 blocks in a row of cols values (the last one may be partial).
inline int64_t block_groups(int64_t cols) { return (cols / 32 + kGroupBlocks - 1) / kGroupBlocks; }

// The rows of the tile that holds row r of a matrix of `rows` rows.
inline int64_t tile_rows(int64_t r, int64_t rows) { return r < rows - rows % kTileRows ? kTileRows : 1; }

// The quad (0..7) of value j (0..31) of a block, and the first value of
// quad k.
constexpr int quad_of(int j) { return 2 * ((j % 16) / 4) + j / 16; }
constexpr int quad_first_value(int k) { return 16 * (k % 2) + 4 * (k / 2); }

// Where value j (0..31) of block b sits in a token's int8 activations:
// 256 bytes a group of 8 blocks, in which quad k of the group's block b
// (its lane) is at 32k + 4b.
constexpr int64_t activation_position(int64_t b, int j) {
  return 256 * (b / kGroupBlocks) + 32 * quad_of(j) + 4 * (b % kGroupBlocks) + j % 4;
}

// Row r's part of the group that holds block b, in a tile of T rows (rows
// of `blocks` blocks): byte offsets from the tile's start of its values and
// its scales, the group's lanes g and b's lane.
struct PackedGroup {
  int64_t values, scales;
  int g, lane;
};
PackedGroup packed_group(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b);

// Value j's code in the block at `lane` of a row's group of g lanes whose
// values start at v: Q8_0's int8 value, or the unsigned code from the planes.
// Inline: the scalar kernels call it for every value.
inline int packed_code(const PackedFormat& f, const uint8_t* v, int g, int lane, int j) {
  const int k = quad_of(j), at = 4 * lane + j % 4;
  if (f.bytes) return static_cast<int8_t>(v[4 * g * k + at]);
  int code = 0;
  if (f.nibbles) code |= (v[4 * g * (k / 2) + at] >> 4 * (k % 2)) & 15;
  if (f.two_bits >= 0) code |= ((v[two_bit_plane(f, g) + 4 * g * (k / 4) + at] >> 2 * (k % 4)) & 3) << f.two_bits;
  if (f.one_bit >= 0) code |= ((v[one_bit_plane(f, g) + at] >> k) & 1) << f.one_bit;
  return code;
}

// E8M0 scale e as the float 2^(e - 127) from its bits, as the vector kernels
// form it: e = 0 (2^-127, a denormal) becomes 0, a weight too small to count.
inline float e8m0_bits_to_fp32(uint8_t e) { return std::bit_cast<float>(uint32_t{e} << 23); }

}  // namespace tps
