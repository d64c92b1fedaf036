// AVX2 + FMA + F16C kernels (compiled with those flags only).
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
namespace avx2 {
// The vector kernels by subject, in this order (the later two use the
// first's helpers). Lanes, float rows, e^x and the SwiGLU:
#include "engine/kernels/simd_rows.inl"
// Matrix products over packed weight rows:
#include "engine/kernels/simd_matmul.inl"
// Attention over a run of KV cache positions:
#include "engine/kernels/simd_attention.inl"
}  // namespace avx2

const KernelSet kAvx2Kernels{Isa::avx2,  avx2::kQuantized, avx2::kFixed,     avx2::f32,        avx2::f16,
                             avx2::bf16, avx2::swiglu,     avx2::kAttendRun, avx2::kAttendTile};

}  // namespace tps
