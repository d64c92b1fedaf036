// Row dot products: the kernels every matrix product in tps is made of.
// One set per instruction set; each set has one function per weight format:
//   quantized weights (Q8_0, MXFP4) x activations quantized to Q8_0 blocks
//     (the int8 products run on integer units -- VNNI where the CPU has it),
//   float weights (F32, F16, BF16) x float activations.
// n is the row length in elements (a multiple of 32 for quantized formats).
// The scalar set is the reference every other set is tested against.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/quant_blocks.h"

namespace tps {

enum class Isa { scalar, avx2, avx512 };
const char* isa_name(Isa isa);

struct DotKernels {
  Isa isa;
  float (*q8_0)(const uint8_t* w, const BlockQ8_0* x, int64_t n);
  float (*mxfp4)(const uint8_t* w, const BlockQ8_0* x, int64_t n);
  // Four consecutive rows (row_bytes apart) against one activation row: the
  // activation block is loaded and prepared once for the four, and the four
  // accumulators run independently. out[r] = row r . x.
  void (*q8_0_x4)(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out);
  void (*mxfp4_x4)(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out);
  float (*f32)(const uint8_t* w, const float* x, int64_t n);
  float (*f16)(const uint8_t* w, const float* x, int64_t n);
  float (*bf16)(const uint8_t* w, const float* x, int64_t n);
};

// The kernels of one instruction set (compiled in; the CPU must support it).
const DotKernels& dot_kernels(Isa isa);
// The instruction sets this CPU runs, best last; scalar always.
std::vector<Isa> supported_isas();
// The best supported set, chosen once (TPS_ISA=scalar|avx2|avx512 overrides,
// for testing and comparison).
const DotKernels& best_dot_kernels();

// Implemented in dot_scalar.cpp, dot_avx2.cpp, dot_avx512.cpp.
extern const DotKernels kDotScalar;
extern const DotKernels kDotAvx2;
extern const DotKernels kDotAvx512;

}  // namespace tps
