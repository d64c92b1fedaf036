// The layout tps keeps quantized weight rows in, and the layout of the int8
// activations they are multiplied with. Rows are repacked once, at load, so
// that the integer kernels load whole vectors with no per-block shuffling:
//
//   GGUF row (B blocks):  [scale|values] [scale|values] ...   (34 / 17 bytes a block)
//   packed row:           [values of every block] [scales of every block]
//
// The bytes per row are unchanged, so a packed matrix has the file's shape,
// row size and slicing. Values go by pairs of blocks A, B (blocks 2p, 2p+1)
// so that one pair fills two 256-bit vectors of int8, lo = [A0..15 B0..15]
// and hi = [A16..31 B16..31]: the products of a pair then add into 8 int32
// lanes, 4 per block, and one float multiply-add with [sA x4 | sB x4]
// applies both scales.
//   Q8_0:  pair p at byte 64p: A0..15 B0..15 A16..31 B16..31 (int8).
//          A last, unpaired block keeps its natural order (32 bytes).
//          Scales: F16, block b at byte 32B + 2b.
//   MXFP4: block b's 16 bytes of nibbles, unchanged, at byte 16b (a pair is
//          32 bytes: the low nibbles give lo, the high nibbles give hi).
//          Scales: E8M0, block b at byte 16B + b.
// Activations (QuantizedActivations::quantize in matmul.h) follow the pair
// order, with an unpaired last block's B half zero.
#pragma once

#include <bit>
#include <cstdint>

#include "engine/ggml_types.h"

namespace tps {

// Types the integer kernels take, and so the types load_shard repacks.
inline bool is_packed_type(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::MXFP4; }

// Writes a GGUF row of cols values (a multiple of 32) of a packed type into
// dst in the packed layout (row_bytes(type, cols) bytes; dst != src).
void pack_row(GgmlType type, const uint8_t* src, uint8_t* dst, int64_t cols);

// Pairs of blocks in a row of cols values (the last one may be half empty).
inline int64_t block_pairs(int64_t cols) { return (cols / 32 + 1) / 2; }

// Where value j (0..31) of block b sits within a pair-ordered row of full
// pairs: 64 bytes per pair, halves of 16 interleaved A, B, A, B.
inline int64_t pair_offset(int64_t b, int j) {
  return 64 * (b / 2) + (j / 16) * 32 + (b % 2) * 16 + (j % 16);
}

// The first of block b's four lanes in its pair's eight (the per-lane
// scale vectors: [A x4 | B x4]).
inline int64_t block_lane(int64_t b) { return 8 * (b / 2) + 4 * (b % 2); }

// E8M0 scale e as the float 2^(e - 127) from its bits, as the vector kernels
// form it: e = 0 (2^-127, a denormal) becomes 0, a weight too small to count.
inline float e8m0_bits_to_fp32(uint8_t e) { return std::bit_cast<float>(uint32_t{e} << 23); }

}  // namespace tps
