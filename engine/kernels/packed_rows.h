// The layout tps keeps quantized weight matrices in, and the layout of the
// int8 activations they are multiplied with. Matrices are repacked once, at
// load, so that the kernels read one sequential stream and load whole
// vectors with no per-block shuffling.
//
// Rows go by tiles of 4 (the rows a decode step computes at once); the last
// rows % 4 rows of a matrix are tiles of 1. A tile of T rows takes the bytes
// of its T rows in the file, in groups of 8 blocks (256 values; the last
// group of a row may have fewer, g):
//
//   GGUF rows:   row0 [scale|values] [scale|values] ...  row1 ...  (34 / 17 bytes a block)
//   packed tile: group 0 [values of row0..row T-1][scales of row0..row T-1]
//                group 1 [values ...][scales ...] ...
//
// so a decode tile streams its T rows front to back. Within a row's group,
// lane b (4 bytes) of each 32-byte vector belongs to block b: the 32 values
// of a block go by quads of 4, quad k (0..7) being the values
// 16 (k % 2) + 4 (k / 2) + 0..3, and vector k holds quad k of the 8 blocks.
// A 4-product integer sum per lane then adds up block by block, and one
// float multiply-add per 8 blocks applies all 8 scales.
//   Q8_0:  vector k at byte 32k of the row's group (int8). Scales: F16,
//          block b's at byte 2b of the row's scales.
//   MXFP4: 4 vectors of nibbles; vector m at byte 32m: the low nibbles are
//          quad 2m, the high ones quad 2m + 1 (in the file, byte j of a
//          block holds values j and j + 16, so a byte of vector m holds
//          value 4m + i and 16 + 4m + i). Scales: E8M0, one byte a block.
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

// Types the integer kernels take, and so the types load_shard repacks.
inline bool is_packed_type(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::MXFP4; }

constexpr int64_t kTileRows = 4;
constexpr int64_t kPackedOverread = 32;
constexpr int kGroupBlocks = 8;

// A packed type's bytes per block: its values and its scale.
struct PackedFormat {
  int value_bytes, scale_bytes;
};
constexpr PackedFormat kPackedQ8_0{32, 2}, kPackedMxfp4{16, 1};

// The quad (0..7) of value j (0..31) of a block, and the first value of
// quad k: quad k is the values 16 (k % 2) + 4 (k / 2) + 0..3.
constexpr int quad_of(int j) { return 2 * ((j % 16) / 4) + j / 16; }
constexpr int quad_first_value(int k) { return 16 * (k % 2) + 4 * (k / 2); }

// Packs `rows` rows of cols values (a multiple of 32) of a packed type, row
// i at src + i * src_stride in the file's layout, into dst: rows *
// row_bytes(type, cols) bytes in the packed layout (dst does not overlap
// src). `rows` counts from a tile boundary: the start of a matrix.
void pack_rows(GgmlType type, const uint8_t* src, uint64_t src_stride, uint8_t* dst, int64_t rows, int64_t cols);

// Groups of 8 blocks in a row of cols values (the last one may be partial).
inline int64_t block_groups(int64_t cols) { return (cols / 32 + kGroupBlocks - 1) / kGroupBlocks; }

// The rows of the tile that holds row r of a matrix of `rows` rows.
inline int64_t tile_rows(int64_t r, int64_t rows) { return r < rows - rows % kTileRows ? kTileRows : 1; }

// Where value j (0..31) of block b sits in a token's int8 activations:
// 256 bytes a group of 8 blocks, in which quad k of the group's block b
// (its lane) is at 32k + 4b.
constexpr int64_t activation_position(int64_t b, int j) {
  return 256 * (b / kGroupBlocks) + 32 * quad_of(j) + 4 * (b % kGroupBlocks) + j % 4;
}

// Byte offsets from the start of a tile of T rows (rows of `blocks` blocks)
// of row r's value j of block b -- for MXFP4 the byte that holds it, in its
// low nibble for j < 16, else its high -- and of the block's scale.
int64_t packed_value_offset(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b, int j);
int64_t packed_scale_offset(GgmlType type, int64_t blocks, int64_t T, int64_t r, int64_t b);

// E8M0 scale e as the float 2^(e - 127) from its bits, as the vector kernels
// form it: e = 0 (2^-127, a denormal) becomes 0, a weight too small to count.
inline float e8m0_bits_to_fp32(uint8_t e) { return std::bit_cast<float>(uint32_t{e} << 23); }

}  // namespace tps
