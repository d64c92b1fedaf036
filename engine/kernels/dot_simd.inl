// The vector kernels, written once and compiled twice: by dot_avx2.cpp
// (AVX2 + FMA + F16C) and by dot_avx512.cpp (adds AVX-512 VNNI, which turns
// the int8 multiply-add into one instruction). 256-bit vectors in both (no
// 512-bit form has been measured: the development VM has no AVX-512).
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
inline __m256i load128_low(const void* p) {  // upper half zero
  return _mm256_zextsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// One pair of blocks of a weight row (kernels/packed_rows.h) as a format
// decodes it: bytes lo = [A0..15 B0..15], hi = [A16..31 B16..31] and the
// blocks' scales [sA x4 | sB x4]. The last pair (Tail) of a row with an odd
// number of blocks has no B: its B scale is zero (and so is the B half of
// the activations).
struct Pair {
  __m256i lo, hi;
  __m256 scale;
};

inline __m256i x_values(const Activations& x, int t, int64_t p, int half) {
  return load256(x.q + t * x.q_stride() + 64 * p + 32 * half);
}
inline __m256 x_scales(const Activations& x, int t, int64_t p) {
  return _mm256_loadu_ps(x.d + t * x.d_stride() + 8 * p);
}

// VNNI: 8 int32 lanes += the products of unsigned bytes u and signed bytes
// s, four per lane, in one instruction. (AVX2 forms pairs of products in
// int16 first, then int32 lanes; each format says why its pairs fit.)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
#endif

struct Q8_0Format {
  static constexpr int kPairBytes = 64;
  static constexpr float kFinalScale = 1.0f;
  // F16 scales hA hB -> hA x4 hB x4 for the conversion to 8 floats.
  const __m128i spread = _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);

  template <bool Tail>
  Pair pair(const uint8_t* row, int64_t blocks, int64_t p) const {
    const uint8_t* values = row + 64 * p;
    uint32_t h = 0;
    std::memcpy(&h, row + 32 * blocks + 4 * p, Tail ? 2 : 4);
    const __m256 scale = _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(h)), spread));
    if (Tail) return {load128_low(values), load128_low(values + 16), scale};
    return {load256(values), load256(values + 32), scale};
  }

  // The pair's w . x of token t, per lane, times the activation scales. Both
  // sides are signed: |x| times w with x's sign makes them unsigned x signed.
  static __m256 products(const Pair& w, const Activations& x, int t, int64_t p) {
    const int8_t* aq = x.aq + t * x.q_stride() + 64 * p;
    const __m256i lo = _mm256_sign_epi8(w.lo, x_values(x, t, p, 0));
    const __m256i hi = _mm256_sign_epi8(w.hi, x_values(x, t, p, 1));
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    const __m256i sum = dot_u8s8(dot_u8s8(_mm256_setzero_si256(), load256(aq), lo), load256(aq + 32), hi);
#else
    // A pair of products is at most 2 x 127 x 127: one fits int16, two not.
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(load256(aq), lo), ones),
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(load256(aq + 32), hi), ones));
#endif
    return _mm256_mul_ps(_mm256_cvtepi32_ps(sum), x_scales(x, t, p));
  }
};

// MXFP4 values are decoded, by table, to their doubled value plus 12: 0..24,
// unsigned, so they multiply the signed activations directly; the 12 x sum
// of each activation block that this adds is taken off again with the
// activations' offset plane.
struct Mxfp4Format {
  static constexpr int kPairBytes = 32;
  static constexpr float kFinalScale = 0.5f;  // undoes the doubling
  const __m256i table = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // E8M0 scales eA eB (in every 16-bit lane) -> int32 lanes eA x4 | eB x4.
  const __m256i spread = _mm256_setr_epi8(0, -1, -1, -1, 0, -1, -1, -1, 0, -1, -1, -1, 0, -1, -1, -1,
                                          1, -1, -1, -1, 1, -1, -1, -1, 1, -1, -1, -1, 1, -1, -1, -1);

  template <bool Tail>
  Pair pair(const uint8_t* row, int64_t blocks, int64_t p) const {
    const __m256i q = Tail ? load128_low(row + 32 * p) : load256(row + 32 * p);
    uint16_t e = 0;
    std::memcpy(&e, row + 16 * blocks + 2 * p, Tail ? 1 : 2);
    // 2^(e - 127) from the exponent bits (e8m0_bits_to_fp32).
    const __m256i bits = _mm256_slli_epi32(_mm256_shuffle_epi8(_mm256_set1_epi16(static_cast<short>(e)), spread), 23);
    return {_mm256_shuffle_epi8(table, _mm256_and_si256(q, nibble)),
            _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble)),
            _mm256_castsi256_ps(bits)};
  }

  static __m256 products(const Pair& w, const Activations& x, int t, int64_t p) {
    const __m256i xlo = x_values(x, t, p, 0), xhi = x_values(x, t, p, 1);
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    const __m256i sum = dot_u8s8(dot_u8s8(_mm256_setzero_si256(), w.lo, xlo), w.hi, xhi);
#else
    // A pair of products is at most 2 x 24 x 127: lo and hi add in int16.
    const __m256i sum = _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(w.lo, xlo), _mm256_maddubs_epi16(w.hi, xhi)),
        _mm256_set1_epi16(1));
#endif
    return _mm256_fmsub_ps(_mm256_cvtepi32_ps(sum), x_scales(x, t, p),
                           _mm256_loadu_ps(x.offset + t * x.d_stride() + 8 * p));
  }
};

// R rows x N tokens: each pair of weight blocks is decoded once for the N
// tokens. Every (row, token) result goes through the same operations in the
// same order whatever R and N are.
template <int R, int N, bool Tail, typename Format>
inline void tile_step(const Format& f, const uint8_t* w, uint64_t row_bytes, int64_t blocks,
                      const Activations& x, int t0, int64_t p, __m256 (&acc)[R][N]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // Decode streams the weights once: fetch the same place four tiles
    // ahead, or loads wait on memory with the integer units idle (one core
    // streamed Q8_0 at 9.0 GB/s without this, 13.8 with it: PERFORMANCE.md).
    if constexpr (N == 1)
      _mm_prefetch(reinterpret_cast<const char*>(w + (r + 4 * R) * row_bytes + Format::kPairBytes * p),
                   _MM_HINT_T0);
    const Pair pw = f.template pair<Tail>(w + r * row_bytes, blocks, p);
#pragma GCC unroll 8
    for (int t = 0; t < N; ++t)
      acc[r][t] = _mm256_fmadd_ps(Format::products(pw, x, t0 + t, p), pw.scale, acc[r][t]);
  }
}

template <int R, int N, typename Format>
void tile(const Format& f, const uint8_t* w, uint64_t row_bytes, const Activations& x, int t0,
          float* y, int64_t y_stride) {
  const int64_t blocks = x.cols / 32, full = blocks / 2;
  __m256 acc[R][N];
  for (auto& row : acc)
    for (auto& a : row) a = _mm256_setzero_ps();
  for (int64_t p = 0; p < full; ++p) tile_step<R, N, false>(f, w, row_bytes, blocks, x, t0, p, acc);
  if (blocks % 2) tile_step<R, N, true>(f, w, row_bytes, blocks, x, t0, full, acc);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t) y[(t0 + t) * y_stride + r] = hsum(acc[r][t]) * Format::kFinalScale;
}

// Tiles over all rows and tokens. Decode (one token) goes four rows at a
// time. A batch goes by panels of 16 rows: for each tile of four tokens
// (then 2, 1), each row of the panel in turn, so that the panel's weights
// and the tile's activations both stay in L2 while they meet (a row against
// every token would stream the whole batch's activations from L3 for every
// row). The shapes were chosen by measurement (docs/PERFORMANCE.md).
template <typename Format>
void quantized_matmul(const uint8_t* w, uint64_t row_bytes, int64_t rows, const Activations& x,
                      float* y, int64_t y_stride) {
  constexpr int64_t kDecodeRows = 4, kPanel = 16;
  const Format f;
  if (x.tokens == 1) {
    int64_t r = 0;
    for (; r + kDecodeRows <= rows; r += kDecodeRows)
      tile<kDecodeRows, 1>(f, w + r * row_bytes, row_bytes, x, 0, y + r, y_stride);
    for (; r < rows; ++r) tile<1, 1>(f, w + r * row_bytes, row_bytes, x, 0, y + r, y_stride);
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += kPanel) {
    const int64_t r1 = std::min(rows, r0 + kPanel);
    auto panel = [&]<int N>(int t) {
      for (int64_t r = r0; r < r1; ++r) tile<1, N>(f, w + r * row_bytes, row_bytes, x, t, y + r, y_stride);
    };
    int t = 0;
    for (; t + 4 <= x.tokens; t += 4) panel.template operator()<4>(t);
    if (t + 2 <= x.tokens) panel.template operator()<2>(t), t += 2;
    if (t < x.tokens) panel.template operator()<1>(t);
  }
}

void q8_0(const uint8_t* w, uint64_t row_bytes, int64_t rows, const Activations& x, float* y,
          int64_t y_stride) {
  quantized_matmul<Q8_0Format>(w, row_bytes, rows, x, y, y_stride);
}

void mxfp4(const uint8_t* w, uint64_t row_bytes, int64_t rows, const Activations& x, float* y,
           int64_t y_stride) {
  quantized_matmul<Mxfp4Format>(w, row_bytes, rows, x, y, y_stride);
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
