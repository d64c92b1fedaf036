// One block of a ggml block format decoded to floats and encoded from
// them (the scalar references quant_blocks.h's row functions loop over),
// and the small helpers the encoders share.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/gguf/ggml_types.h"
#include "engine/gguf/quant_blocks.h"

namespace tps {

struct BlockCodec {
  void (*decode)(const uint8_t* block, float* values);
  void (*encode)(const float* values, uint8_t* block);
  void (*fields)(const uint8_t* block, uint8_t* codes, BlockFields& fields);  // nullptr: Q8_0, MXFP4
};

// The codec of a 32-element (Q4_0 .. MXFP4) or 256-element (K-quants,
// IQ4_XS) format; nullptr for any other type.
const BlockCodec* block32_codec(GgmlType type);
const BlockCodec* block256_codec(GgmlType type);

// The value of largest magnitude among x[0..n), with its sign (the first
// of equal magnitudes).
float signed_absmax(const float* x, int n);
// v rounded to the nearest integer, ties to even.
int nearest(float v);

// A block struct read from and written to unaligned bytes.
template <typename Block>
Block load_block(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);
  return b;
}
template <typename Block>
void store_block(const Block& b, uint8_t* p) {
  std::memcpy(p, &b, sizeof b);
}

}  // namespace tps
