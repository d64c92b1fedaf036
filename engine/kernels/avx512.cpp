// AVX-512 (VNNI, VL, BW) kernels (compiled with those flags only).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "engine/kernels/kernel_set.h"
#include "engine/kernels/layer_math.h"

namespace tps {
namespace avx512 {
// The vector kernels by subject, in this order (the later two use the
// first's helpers). Lanes, float rows, e^x and the SwiGLU:
#include "engine/kernels/simd_rows.inl"
// Matrix products over packed weight rows:
#include "engine/kernels/simd_matmul.inl"
// Attention over a run of KV cache positions:
#include "engine/kernels/simd_attention.inl"
}  // namespace avx512

const KernelSet kAvx512Kernels{Isa::avx512,  avx512::kQuantized, avx512::kFixed,     avx512::f32,        avx512::f16,
                               avx512::bf16, avx512::swiglu,     avx512::kAttendRun, avx512::kAttendTile};

}  // namespace tps
