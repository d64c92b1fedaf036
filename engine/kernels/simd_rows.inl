// The vector kernels' shared lanes and their float rows: horizontal sums,
// 8 F16/BF16 as floats, the dot products of float weight rows (f32, f16,
// bf16), e^x and the experts' clamped SwiGLU. The first of three files
// written once and compiled twice: by avx2.cpp (AVX2 + FMA + F16C) and by
// avx512.cpp (adds AVX-512 VNNI); simd_matmul.inl and simd_attention.inl
// come after it and use its helpers.
//
// Included inside a namespace of its own by those two files only, after
// <immintrin.h> and <cstring>.

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 8 F16 (or BF16) at p, as floats.
inline __m256 f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 bf16x8(const uint8_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

// Float weights: Load turns 8 weights at p into 8 floats.
template <int Bytes, typename Load, typename Scalar>
float float_dot(const uint8_t* w, const float* x, int64_t n, Load load, Scalar scalar) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load(w + i * Bytes), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load(w + (i + 8) * Bytes), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load(w + i * Bytes), _mm256_loadu_ps(x + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += scalar(w + i * Bytes) * x[i];
  return sum;
}

float f32(const uint8_t* w, const float* x, int64_t n) {
  return float_dot<4>(
      w, x, n, [](const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); },
      [](const uint8_t* p) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      });
}

float f16(const uint8_t* w, const float* x, int64_t n) {
  return float_dot<2>(w, x, n, f16x8, [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half(h);
  });
}

float bf16(const uint8_t* w, const float* x, int64_t n) {
  return float_dot<2>(w, x, n, bf16x8, [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16_to_fp32(h);
  });
}

// e^x for x in [-87, 88] (clamped there: below, e^x is 0 or denormal and
// 2^n below can not hold it; above, it overflows), within 2 ulp: x = n ln 2
// + r with |r| <= ln2 / 2, e^r from a degree-7 polynomial (Cephes expf's
// coefficients), 2^n put into the exponent bits.
inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln 2 in two parts, the first exact in few bits, so n * it is exact.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// swiglu_oai's operations in its order, 8 features at a time; the last n % 8
// by the scalar function.
void swiglu(const float* gate, const float* up, const float* gate_bias, const float* up_bias, int64_t n, float alpha,
            float limit, float* out) {
  const __m256 lim = _mm256_set1_ps(limit), neg_lim = _mm256_set1_ps(-limit);
  const __m256 neg_alpha = _mm256_set1_ps(-alpha), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // min/max return their second operand for a NaN first, as fmin/fmax.
    const __m256 g = _mm256_min_ps(_mm256_add_ps(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(gate_bias + i)), lim);
    const __m256 u = _mm256_max_ps(
        _mm256_min_ps(_mm256_add_ps(_mm256_loadu_ps(up + i), _mm256_loadu_ps(up_bias + i)), lim), neg_lim);
    const __m256 sig = _mm256_div_ps(g, _mm256_add_ps(one, exp256(_mm256_mul_ps(neg_alpha, g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(sig, _mm256_add_ps(u, one)));
  }
  for (; i < n; ++i) out[i] = swiglu_oai(gate[i] + gate_bias[i], up[i] + up_bias[i], alpha, limit);
}

}  // namespace
