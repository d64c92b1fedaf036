// The kernels every matrix product in tps is made of. One set per
// instruction set; each set has one function per weight format:
//   quantized weights (Q8_0, MXFP4, packed as kernels/packed_rows.h says) x
//     activations quantized to int8: a tile of rows x tokens at once, the
//     int8 products on integer units (VNNI where the CPU has it);
//   float weights (F32, F16, BF16) x float activations, a row at a time;
// the experts' activation between their two products, elementwise; and
// attention over a KV cache a chunk of positions at a time
// (engine/cache/kv_pool.h).
// The scalar set is the reference every other set is tested against.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/quant_blocks.h"
#include "engine/kernels/attention_state.h"
#include "engine/kernels/kv_format.h"
#include "engine/kernels/packed_rows.h"

namespace tps {

enum class Isa { scalar, avx2, avx512 };
const char* isa_name(Isa isa);

// The most key blocks one attention run spans: a chunk of kv_pool.h's.
constexpr int kAttendRunBlocks = 16;

// T tokens' activations as the kernels take them: floats f [T][cols] and,
// for quantized weights, the same quantized to int8 by blocks of 32 (scale
// max|x| / 127), by groups of 8 blocks in the quad order of
// kernels/packed_rows.h (lanes past the last block zero), per token:
//   q  [groups][256]  the int8 values,
//   u  [groups][256]  the same plus 128, as unsigned bytes (VNNI multiplies
//                     unsigned by signed: Q8_0's signed weights take these),
//   d  [groups][8]    the blocks' scales (block 8k + b in lane b),
//   offset [groups][8]  12 x d x the sum of the block's q: what the MXFP4
//                     kernels' unsigned weights (value + 12) add, taken off;
//   sum, sum_lo, sum_hi [groups][8]  d x the sum of the block's q, of its
//                     first 16 and of its last 16: what the formats whose
//                     values are a x code + b (Q4_1's min, Q4_0's code - 8,
//                     ...) multiply b by.
struct Activations {
  const float* f = nullptr;
  const int8_t* q = nullptr;
  const uint8_t* u = nullptr;
  const float* d = nullptr;
  const float* offset = nullptr;
  const float *sum = nullptr, *sum_lo = nullptr, *sum_hi = nullptr;
  int64_t cols = 0;
  int tokens = 0;
  int64_t q_stride() const { return 256 * block_groups(cols); }  // bytes per token in q, u
  int64_t d_stride() const { return 8 * block_groups(cols); }    // floats per token in d, offset
};

// One instruction set's kernels: the matrix products, the experts'
// activation and attention's steps.
struct KernelSet {
  Isa isa;
  // y[t * y_stride + r - row_begin] = row r . token t for the rows
  // [row_begin, row_end) of a packed matrix (kernels/packed_rows.h) of
  // `rows` rows row_bytes long starting at w, and every token of x. A row's
  // result does not depend on which rows or tokens a call has, so that
  // results do not depend on how rows are split between threads.
  using QuantizedMatmul = void (*)(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin,
                                   int64_t row_end, const Activations& x, float* y, int64_t y_stride);
  std::array<QuantizedMatmul, kPackedTypeCount> quantized;  // by packed_index
  QuantizedMatmul matmul(GgmlType type) const { return quantized[packed_index(type)]; }
  // The same products as split-invariant sums (kernels/matmul.h,
  // matmul_rows_fixed): y[t * y_stride + r - row_begin] = the sum over the
  // row's 32-value blocks of round(p x final x scale[t] x 2^32), p the
  // block's product as the float kernel forms it, final the format's final
  // scale (MXFP4's 1/2), scale nullptr for 1 (each at most 1), added in
  // int64. False when a block's |p| reached 2^19 (or p is not a number):
  // the rounding holds below that.
  using FixedMatmul = bool (*)(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
                               const Activations& x, const float* scale, int64_t* y, int64_t y_stride);
  std::array<FixedMatmul, kPackedTypeCount> fixed;  // by packed_index
  FixedMatmul matmul_fixed(GgmlType type) const { return fixed[packed_index(type)]; }
  // One float row of n values . x.
  float (*f32)(const uint8_t* w, const float* x, int64_t n);
  float (*f16)(const uint8_t* w, const float* x, int64_t n);
  float (*bf16)(const uint8_t* w, const float* x, int64_t n);
  // out[i] = swiglu_oai(gate[i] + gate_bias[i], up[i] + up_bias[i], alpha,
  // limit) (layer_math.h) for i < n. The vector sets take exp from a
  // polynomial (within 2 ulp of expf) instead of libm's, 8 lanes at a time.
  void (*swiglu)(const float* gate, const float* up, const float* gate_bias, const float* up_bias, int64_t n,
                 float alpha, float limit, float* out);
  // Decode attention's one pass over a KV cache (kernels/kv_format.h; by
  // KvType), an online softmax: query heads [0, heads) (q
  // [heads][head_dim]) that share a kv head take a run of positions, the
  // lanes [first, first + count) of the key blocks kb[0], kb[1], ... in
  // order (first < kKeyBlock, first + count <= kAttendRunBlocks x
  // kKeyBlock), whose value rows are v[0..count). Each head's state, of the
  // positions it took before (kernels/attention_state.h): max[h] the
  // largest score, sum[h] the sum of e^(score - max[h]), acc[h * head_dim +
  // i] the values weighted by e^(score - max[h]); a score is scale x (q_h .
  // key). The scalar set takes the run a key block at a time, its sums in
  // the plain loop's order (dimensions, then positions). Quantized keys
  // (q8_0, q4_0) score the query quantized by kv_format.h's query_codes:
  // by blocks of 32 dimensions, the integer sum of the code products times
  // the two scales, the same bits in every set (the AVX-512 set's VNNI
  // products four dimensions an instruction). The vector sets take the
  // run's scores first, then one softmax step a head, then the values.
  using AttendRun = void (*)(const float* q, int heads, int head_dim, const uint8_t* const* kb, const uint8_t* const* v,
                             float scale, int first, int count, float* max, float* sum, float* acc);
  std::array<AttendRun, kKvTypeCount> attend_run;
  // attend_run for each of `tokens` queries q[t] ([heads][head_dim]) into
  // states[t], with each row's arithmetic attend_run's for its token alone
  // (the same bits), but the run's keys and values read and widened once
  // for all of them: prefill's tiles of tokens that all see a chunk
  // (engine/step/forward.cpp). The scalar set calls attend_run per token.
  using AttendTile = void (*)(const float* const* q, int tokens, int heads, int head_dim, const uint8_t* const* kb,
                              const uint8_t* const* v, float scale, int first, int count, const AttentionState* states);
  std::array<AttendTile, kKvTypeCount> attend_tile;
};

// The kernels of one instruction set (compiled in; the CPU must support it).
const KernelSet& kernel_set(Isa isa);
// The instruction sets this CPU runs, best last; scalar always.
std::vector<Isa> supported_isas();
// The best supported set, chosen once (TPS_ISA=scalar|avx2|avx512 overrides,
// for testing and comparison).
const KernelSet& best_kernel_set();

// Implemented in scalar.cpp, avx2.cpp, avx512.cpp.
extern const KernelSet kScalarKernels;
extern const KernelSet kAvx2Kernels;
extern const KernelSet kAvx512Kernels;

}  // namespace tps
