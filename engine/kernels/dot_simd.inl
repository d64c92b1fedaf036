// The vector dot products, written once and compiled twice: by dot_avx2.cpp
// (AVX2 + FMA + F16C) and by dot_avx512.cpp (adds AVX-512 VNNI, which turns
// the int8 multiply-add into one instruction). 256-bit vectors in both:
// decode is bound by memory bandwidth, not vector width.
//
// Included inside a namespace of its own by those two files only, after
// <immintrin.h> and <cstring>.

namespace {

// 8 int32 lanes += sums of 4 products of signed int8 w and x.
inline __m256i dot_i8(__m256i acc, __m256i w, __m256i x) {
  const __m256i ax = _mm256_sign_epi8(x, x);  // |x|, as unsigned
  const __m256i sw = _mm256_sign_epi8(w, x);  // w with x's sign
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, ax, sw);
#else
  // |x| <= 128 and |w| <= 127: pair sums fit int16 (<= 32512).
  const __m256i pairs = _mm256_maddubs_epi16(ax, sw);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half(uint16_t h) { return _cvtsh_ss(h); }

// Two blocks per step into two accumulators: one FMA chain per block would
// make the loop wait on FMA latency rather than on memory.
template <typename Block>
float quantized_dot(const uint8_t* w, const BlockQ8_0* x, int64_t n, Block block) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int64_t blocks = n / 32;
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    acc0 = block(w, x, b, acc0);
    acc1 = block(w, x, b + 1, acc1);
  }
  if (b < blocks) acc0 = block(w, x, b, acc0);
  return hsum(_mm256_add_ps(acc0, acc1));
}

float q8_0(const uint8_t* w, const BlockQ8_0* x, int64_t n) {
  return quantized_dot(w, x, n, [](const uint8_t* w, const BlockQ8_0* x, int64_t b, __m256 acc) {
    const uint8_t* wb = w + b * sizeof(BlockQ8_0);
    uint16_t dw;
    std::memcpy(&dw, wb, 2);
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i s = dot_i8(_mm256_setzero_si256(), wq, xq);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half(dw) * half(x[b].d)), acc);
  });
}

float mxfp4(const uint8_t* w, const BlockQ8_0* x, int64_t n) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4DoubledValues));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  return quantized_dot(w, x, n, [&](const uint8_t* w, const BlockQ8_0* x, int64_t b, __m256 acc) {
    const uint8_t* wb = w + b * sizeof(BlockMxfp4);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 1));
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, nibble));  // elements 0..15
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), nibble));
    const __m256i wq = _mm256_set_m128i(hi, lo);
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i s = dot_i8(_mm256_setzero_si256(), wq, xq);
    // The table is doubled: scale 2^(e - 128).
    const float d = kE8m0Half[wb[0]] * half(x[b].d);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d), acc);
  });
}

// Four rows at once: per block the activation is loaded, its |x| formed and
// its scale converted once. Each row keeps two accumulators, even and odd
// blocks, exactly as quantized_dot does, so a row gives bit-identical sums
// whether it is computed alone or in a group of four (results must not
// depend on how rows are split between threads).
template <typename Weights>
void quantized_x4(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out,
                  size_t block_bytes, Weights weights) {
  __m256 acc[4][2];
  for (auto& a : acc) a[0] = a[1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const float dx = half(x[b].d);
    for (int r = 0; r < 4; ++r) {
      const uint8_t* wb = w + r * row_bytes + b * block_bytes;
      float scale;
      const __m256i wq = weights(wb, scale);
      const __m256i s = dot_i8(_mm256_setzero_si256(), wq, xq);
      __m256& a = acc[r][b & 1];
      a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale * dx), a);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
}

void q8_0_x4(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out) {
  quantized_x4(w, row_bytes, x, n, out, sizeof(BlockQ8_0), [](const uint8_t* wb, float& scale) {
    uint16_t dw;
    std::memcpy(&dw, wb, 2);
    scale = half(dw);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb + 2));
  });
}

void mxfp4_x4(const uint8_t* w, uint64_t row_bytes, const BlockQ8_0* x, int64_t n, float* out) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4DoubledValues));
  const __m128i nibble = _mm_set1_epi8(0x0F);
  quantized_x4(w, row_bytes, x, n, out, sizeof(BlockMxfp4), [&](const uint8_t* wb, float& scale) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 1));
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, nibble));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), nibble));
    scale = kE8m0Half[wb[0]];
    return _mm256_set_m128i(hi, lo);
  });
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
  return float_dot<2>(
      w, x, n,
      [](const uint8_t* p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      },
      [](const uint8_t* p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return half(h);
      });
}

float bf16(const uint8_t* w, const float* x, int64_t n) {
  return float_dot<2>(
      w, x, n,
      [](const uint8_t* p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
      },
      [](const uint8_t* p) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_to_fp32(h);
      });
}

}  // namespace
