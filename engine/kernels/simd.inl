// The vector kernels, written once and compiled twice: by avx2.cpp
// (AVX2 + FMA + F16C) and by avx512.cpp (adds AVX-512 VNNI, which turns
// the int8 multiply-add into one instruction). The matrix products take
// 256-bit vectors in both (no 512-bit form has been tried yet); attention
// takes 16 float lanes at a time (F32x16), one 512-bit vector with AVX-512.
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

// Lanes [0, g) all ones, the others zero.
inline __m256 lane_mask(int g) {
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// Token t's activations of group k: 256 bytes of q and of u (quad j at
// 32j), and the group's 8 lanes of d, offset and the sums.
struct XGroup {
  const int8_t* q;
  const uint8_t* u;
  const float *d, *offset, *sum, *sum_lo, *sum_hi;
};
inline XGroup x_group(const Activations& x, int t, int64_t k) {
  const int64_t f = t * x.d_stride() + 8 * k;
  return {x.q + t * x.q_stride() + 256 * k,
          x.u + t * x.q_stride() + 256 * k,
          x.d + f,
          x.offset + f,
          x.sum + f,
          x.sum_lo + f,
          x.sum_hi + f};
}

// VNNI: 8 int32 lanes += the products of unsigned bytes u and signed bytes
// s, four per lane, in one instruction. (AVX2 forms pairs of products in
// int16 first, then int32 lanes; each format says why its pairs fit.)
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
#endif

// A format reads a row's group of g blocks (g = 8 but in a row's last
// group) from its values and scales (kernels/packed_rows.h): half h of the
// values as the four quad vectors 4h..4h+3 (lane b = block b), the integer
// sums per block (or per half block) of those quads times a token's, the
// blocks' coefficients from the scales (once per row and group, for all the
// tokens), and accumulate, which applies them to a token's sums in float.
// In a last group, lanes g..7 of the vectors and scales are whatever bytes
// follow (kPackedOverread): their activations are zero, so their products
// are too, and the kernel zeroes their coefficients.

// Signed weights (Q8_0's values, IQ4's levels) times the signed activations.
struct SignedProducts {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  // VNNI: the activations plus 128 (u, unsigned) times w, less 128 x the
  // sum of w, which is formed once per half group for all the tokens of a
  // tile: a token's products cost their four multiply-adds and one
  // subtraction. Exact integer sums: at most 4 x 4 x 255 x 127 per lane.
  static __m256i correction(const __m256i (&w)[4]) {
    __m256i c = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) c = dot_u8s8(c, _mm256_set1_epi8(static_cast<char>(128)), w[i]);
    return c;
  }
  static __m256i half_sum(const __m256i (&w)[4], __m256i correction, const XGroup& x, int h) {
    const uint8_t* u = x.u + 128 * h;
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) sum = dot_u8s8(sum, load256(u + 32 * i), w[i]);
    return _mm256_sub_epi32(sum, correction);
  }
#else
  // |w| times x with w's sign makes them unsigned x signed, and |w| is
  // formed once for all the tokens of a tile (|x| would be a second load per
  // token). A pair of products is at most 2 x 128 x 127: one fits int16,
  // two not.
  static __m256i correction(const __m256i (&)[4]) { return _mm256_setzero_si256(); }
  static __m256i half_sum(const __m256i (&w)[4], __m256i, const XGroup& x, int h) {
    const int8_t* q = x.q + 128 * h;
    __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256i abs_w = _mm256_abs_epi8(w[i]), signed_x = _mm256_sign_epi8(load256(q + 32 * i), w[i]);
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_x), _mm256_set1_epi16(1)));
    }
    return sum;
  }
#endif
};

// A token's integer sums of a block's first 16 values and of its last 16.
struct HalfSums {
  __m256i lo, hi;
};
template <bool ByHalf>
struct SumOf {
  using type = __m256i;
};
template <>
struct SumOf<true> {
  using type = HalfSums;
};
// Unsigned codes (at most MaxCode) times the signed activations, one sum
// per block, or (ByHalf) one for each half block: quads 4h and 4h + 2 are
// a block's first 16 values, 4h + 1 and 4h + 3 its last 16.
template <int MaxCode, bool ByHalf>
struct UnsignedProducts {
  using Sum = typename SumOf<ByHalf>::type;
  static __m256i correction(const __m256i (&)[4]) { return _mm256_setzero_si256(); }
  // The products of vectors i and i + 2 (AVX2: a pair of products is at
  // most 2 x 63 x 127, so two pairs add up in int16 and, for codes up to 31,
  // four).
  static __m256i pair_sum(const __m256i (&w)[4], const int8_t* q, int i) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return dot_u8s8(dot_u8s8(_mm256_setzero_si256(), w[i], load256(q + 32 * i)), w[i + 2], load256(q + 32 * (i + 2)));
#else
    const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(w[i], load256(q + 32 * i)),
                                         _mm256_maddubs_epi16(w[i + 2], load256(q + 32 * (i + 2))));
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
#endif
  }
  static Sum half_sum(const __m256i (&w)[4], __m256i, const XGroup& x, int h) {
    const int8_t* q = x.q + 128 * h;
    if constexpr (ByHalf) {
      return {pair_sum(w, q, 0), pair_sum(w, q, 1)};
    } else {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
      __m256i sum = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) sum = dot_u8s8(sum, w[i], load256(q + 32 * i));
      return sum;
#else
      static_assert(MaxCode <= 31, "four pairs of products in int16");
      auto pair = [&](int i) { return _mm256_maddubs_epi16(w[i], load256(q + 32 * i)); };
      const __m256i sum16 = _mm256_add_epi16(_mm256_add_epi16(pair(0), pair(1)), _mm256_add_epi16(pair(2), pair(3)));
      return _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
#endif
    }
  }
};

inline __m256i add_sums(__m256i a, __m256i b) { return _mm256_add_epi32(a, b); }
inline HalfSums add_sums(const HalfSums& a, const HalfSums& b) {
  return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)};
}
// Opaque to the optimizer (see row_group).
inline void opaque(__m256i& v) { asm("" : "+x"(v)); }
inline void opaque(HalfSums& v) { asm("" : "+x"(v.lo), "+x"(v.hi)); }

// The codes of quads 4h..4h+3 from the bit planes (packed_rows.h): the low
// 4 bits from the nibbles (Nibbles), bits TwoBits..TwoBits+1 from the
// 2-bit plane, bit OneBit from the 1-bit plane (-1: none).
template <bool Nibbles, int TwoBits, int OneBit>
__attribute__((always_inline)) inline void plane_codes(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (Nibbles) {
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {  // byte vector m = 2h + i: quads 2m (low), 2m + 1 (high)
      const __m256i bytes = load256(values + 4 * g * (2 * h + i));
      w[2 * i] = _mm256_and_si256(bytes, low4);
      w[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
    }
  } else {
    for (auto& v : w) v = _mm256_setzero_si256();
  }
  if constexpr (TwoBits >= 0) {
    const __m256i v = load256(values + (Nibbles ? 16 * g : 0) + 4 * g * h);  // quads 4h + j at bits 2j
    const __m256i three = _mm256_set1_epi8(3);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      // A field shifted within its byte: 16-bit shifts carry nothing across
      // bytes once the field is masked.
      const __m256i field = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), three);
      w[j] = _mm256_or_si256(w[j], TwoBits ? _mm256_slli_epi16(field, TwoBits) : field);
    }
  }
  if constexpr (OneBit >= 0) {
    const __m256i v = load256(values + (Nibbles ? 16 * g : 0) + (TwoBits >= 0 ? 8 * g : 0));  // quad k at bit k
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int k = 4 * h + j;
      const __m256i bit = _mm256_and_si256(v, _mm256_set1_epi8(static_cast<char>(1 << k)));
      w[j] =
          _mm256_or_si256(w[j], k >= OneBit ? _mm256_srli_epi16(bit, k - OneBit) : _mm256_slli_epi16(bit, OneBit - k));
    }
  }
}

// The IQ4 levels of 4-bit codes, by table (once per 128-bit lane).
inline void iq4_levels(__m256i (&w)[4]) {
  // clang-format off
  const __m256i table = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                         -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  // clang-format on
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) w[i] = _mm256_shuffle_epi8(table, w[i]);
}

// Lanes zeroed past g in a tail group.
template <bool Tail>
inline __m256 masked(__m256 v, int g) {
  return Tail ? _mm256_and_ps(v, lane_mask(g)) : v;
}

// 8 F16 (or BF16) at p, as floats; 8 unsigned or signed bytes at p, as
// floats; the F16 at p in every lane.
inline __m256 f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 bf16x8(const uint8_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline __m256 u8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 i8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 f16x1(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _mm256_set1_ps(half(h));
}

// Coefficients: value = a x level for every value of a block.
struct Scale {
  __m256 a;
  template <bool Tail>
  Scale masked_to(int g) const {
    return {masked<Tail>(a, g)};
  }
  __m256 accumulate(__m256 acc, __m256i sum, const XGroup& x) const {
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_loadu_ps(x.d)), a, acc);
  }
};
// value = a x code + b.
struct ScaleOffset {
  __m256 a, b;
  template <bool Tail>
  ScaleOffset masked_to(int g) const {
    return {masked<Tail>(a, g), masked<Tail>(b, g)};
  }
  __m256 accumulate(__m256 acc, __m256i sum, const XGroup& x) const {
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_loadu_ps(x.d)), a, acc);
    return _mm256_fmadd_ps(b, _mm256_loadu_ps(x.sum), acc);
  }
};
// value = a[h] x code + b[h] for the values of half h.
struct HalfScaleOffset {
  __m256 a[2], b[2];
  template <bool Tail>
  HalfScaleOffset masked_to(int g) const {
    return {{masked<Tail>(a[0], g), masked<Tail>(a[1], g)}, {masked<Tail>(b[0], g), masked<Tail>(b[1], g)}};
  }
  __m256 accumulate(__m256 acc, const HalfSums& sum, const XGroup& x) const {
    const __m256 d = _mm256_loadu_ps(x.d);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum.lo), d), a[0], acc);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum.hi), d), a[1], acc);
    acc = _mm256_fmadd_ps(b[0], _mm256_loadu_ps(x.sum_lo), acc);
    return _mm256_fmadd_ps(b[1], _mm256_loadu_ps(x.sum_hi), acc);
  }
};

struct Q8_0Format : SignedProducts {
  static constexpr int kValueBytes = 32;
  static constexpr float kFinalScale = 1.0f;
  using Sum = __m256i;
  static int scale_bytes(int g) { return 2 * g; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) w[i] = load256(values + 4 * g * (4 * h + i));
  }
  static Scale coefficients(const uint8_t* s, int) { return {f16x8(s)}; }
};

// MXFP4 values are decoded, by table, to their doubled value plus 12: 0..24,
// unsigned, so they multiply the signed activations directly; the 12 x sum
// of each activation block that this adds is taken off again with the
// activations' offset plane.
struct Mxfp4Format : UnsignedProducts<24, false> {
  static constexpr int kValueBytes = 16;
  static constexpr float kFinalScale = 0.5f;  // undoes the doubling
  static int scale_bytes(int g) { return g; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<true, -1, -1>(values, g, h, w);
    // clang-format off
    const __m256i table = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                           12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    // clang-format on
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) w[i] = _mm256_shuffle_epi8(table, w[i]);
  }
  // 2^(e - 127) from the exponent bits (e8m0_bits_to_fp32).
  struct Coefficients {
    __m256 a;
    template <bool Tail>
    Coefficients masked_to(int g) const {
      return {masked<Tail>(a, g)};
    }
    __m256 accumulate(__m256 acc, __m256i sum, const XGroup& x) const {
      return _mm256_fmadd_ps(_mm256_fmsub_ps(_mm256_cvtepi32_ps(sum), _mm256_loadu_ps(x.d), _mm256_loadu_ps(x.offset)),
                             a, acc);
    }
  };
  static Coefficients coefficients(const uint8_t* s, int) {
    const __m256i bits = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(bits, 23))};
  }
};

// IQ4_NL and IQ4_XS: table levels, signed, with a scale per block.
template <bool SuperBlock>
struct Iq4Format : SignedProducts {
  static constexpr int kValueBytes = 16;
  static constexpr float kFinalScale = 1.0f;
  using Sum = __m256i;
  static int scale_bytes(int g) { return SuperBlock ? 10 : 2 * g; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<true, -1, -1>(values, g, h, w);
    iq4_levels(w);
  }
  static Scale coefficients(const uint8_t* s, int) {
    if constexpr (SuperBlock) return {_mm256_mul_ps(f16x1(s), i8x8(s + 2))};  // d x the block's 6-bit scale
    return {f16x8(s)};
  }
};

// Codes with a scale per block and an offset: Q4_0 (code - 8), Q5_0
// (code - 16) with Offset; Q4_1, Q5_1 (Offset 0) with an F16 min per block.
template <int OneBit, int MaxCode, int Offset>
struct BlockLinearFormat : UnsignedProducts<MaxCode, false> {
  static constexpr int kValueBytes = 16 + (OneBit >= 0 ? 4 : 0);
  static constexpr float kFinalScale = 1.0f;
  static int scale_bytes(int g) { return Offset ? 2 * g : 4 * g; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<true, -1, OneBit>(values, g, h, w);
  }
  static ScaleOffset coefficients(const uint8_t* s, int g) {
    const __m256 a = f16x8(s);
    if constexpr (Offset) return {a, _mm256_mul_ps(a, _mm256_set1_ps(static_cast<float>(Offset)))};
    return {a, f16x8(s + 2 * g)};
  }
};

// Q4_K, Q5_K: d x scale per block, less dmin x min.
template <int OneBit>
struct K4Format : UnsignedProducts<31, false> {
  static constexpr int kValueBytes = 16 + (OneBit >= 0 ? 4 : 0);
  static constexpr float kFinalScale = 1.0f;
  static int scale_bytes(int) { return 20; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<true, -1, OneBit>(values, g, h, w);
  }
  static ScaleOffset coefficients(const uint8_t* s, int) {
    const __m256 neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), f16x1(s + 2));
    return {_mm256_mul_ps(f16x1(s), u8x8(s + 4)), _mm256_mul_ps(neg_dmin, u8x8(s + 12))};
  }
};

// Q6_K (code - 32), Q3_K (code - 4): d x a signed scale per half block.
template <bool Nibbles, int TwoBits, int OneBit, int MaxCode, int Offset>
struct KHalfFormat : UnsignedProducts<MaxCode, true> {
  static constexpr int kValueBytes = (Nibbles ? 16 : 0) + 8 + (OneBit >= 0 ? 4 : 0);
  static constexpr float kFinalScale = 1.0f;
  static int scale_bytes(int) { return 18; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<Nibbles, TwoBits, OneBit>(values, g, h, w);
  }
  static HalfScaleOffset coefficients(const uint8_t* s, int) {
    const __m256 d = f16x1(s), offset = _mm256_set1_ps(static_cast<float>(Offset));
    const __m256 a0 = _mm256_mul_ps(d, i8x8(s + 2)), a1 = _mm256_mul_ps(d, i8x8(s + 10));
    return {{a0, a1}, {_mm256_mul_ps(a0, offset), _mm256_mul_ps(a1, offset)}};
  }
};

// Q2_K: d x scale per half block, less dmin x min.
struct Q2_KFormat : UnsignedProducts<3, true> {
  static constexpr int kValueBytes = 8;
  static constexpr float kFinalScale = 1.0f;
  static int scale_bytes(int) { return 36; }
  static void decode(const uint8_t* values, int g, int h, __m256i (&w)[4]) {
    plane_codes<false, 0, -1>(values, g, h, w);
  }
  static HalfScaleOffset coefficients(const uint8_t* s, int) {
    const __m256 d = f16x1(s), neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), f16x1(s + 2));
    return {{_mm256_mul_ps(d, u8x8(s + 4)), _mm256_mul_ps(d, u8x8(s + 12))},
            {_mm256_mul_ps(neg_dmin, u8x8(s + 20)), _mm256_mul_ps(neg_dmin, u8x8(s + 28))}};
  }
};

// How a tile gathers each (row, token) result from its blocks' products
// (a block's product: its integer sums times its coefficients, in float).
// FloatSums adds them in float, lane by lane (block b of every group in
// lane b), and the lanes at the end: a result that depends on where the
// matrix's columns start. FixedSums rounds each block's product, times the
// token's multiplier (2^32 x the format's final scale x the token's scale),
// to an integer and adds it in int64: exact, so the total is the same in any
// order and for any cut of a row's blocks between matrices or ranks
// (matmul.h, matmul_rows_fixed). Rounding by adding 1.5 x 2^52 in double
// holds for products below 2^51, so a block's product of 2^19 or more (or
// not a number) sets the call's `bad` lanes instead.
struct FloatSums {
  using Acc = __m256;
  using Out = float;
  struct Context {
    const float* scale = nullptr;  // unused
  };
  static Acc zero() { return _mm256_setzero_ps(); }
  template <typename Coef, typename Sum>
  static Acc add(Acc acc, const Coef& coef, const Sum& sum, const XGroup& x, Context&, const __m256d&) {
    return coef.accumulate(acc, sum, x);
  }
  template <typename Format>
  static __m256d multiplier(const Context&, int) {
    return _mm256_setzero_pd();
  }
  template <typename Format>
  static float result(Acc acc, int64_t) {
    return hsum(acc) * Format::kFinalScale;
  }
};
struct FixedSums {
  using Acc = __m256i;
  using Out = int64_t;
  struct Context {
    const float* scale;  // per token of the call; nullptr: 1
    __m256 bad = _mm256_setzero_ps();
  };
  static constexpr double kRound = 0x1.8p52;
  static Acc zero() { return _mm256_setzero_si256(); }
  template <typename Coef, typename Sum>
  static Acc add(Acc acc, const Coef& coef, const Sum& sum, const XGroup& x, Context& c, const __m256d& multiplier) {
    const __m256 p = coef.accumulate(_mm256_setzero_ps(), sum, x);
    const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), p);
    c.bad = _mm256_or_ps(c.bad, _mm256_cmp_ps(magnitude, _mm256_set1_ps(0x1p19f), _CMP_NLT_UQ));
    const __m256d round = _mm256_set1_pd(kRound);
    const __m256d lo = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(p)), multiplier, round);
    const __m256d hi = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)), multiplier, round);
    return _mm256_add_epi64(acc, _mm256_add_epi64(_mm256_castpd_si256(lo), _mm256_castpd_si256(hi)));
  }
  // Each of the 4 lanes took kRound's bits twice per group.
  template <typename Format>
  static int64_t result(Acc acc, int64_t groups) {
    alignas(32) uint64_t lane[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane), acc);
    uint64_t round_bits;
    std::memcpy(&round_bits, &kRound, 8);
    return static_cast<int64_t>(lane[0] + lane[1] + lane[2] + lane[3] - 8 * static_cast<uint64_t>(groups) * round_bits);
  }
  template <typename Format>
  static __m256d multiplier(const Context& c, int t) {
    return _mm256_set1_pd(0x1p32 * Format::kFinalScale * (c.scale ? c.scale[t] : 1.0f));
  }
};

// One row's group k of g blocks (values and scales at v, s) x N tokens:
// the row's group is decoded once for the N tokens. Every (row, token)
// result goes through the same operations in the same order whatever the
// tile's shape.
template <int N, bool Tail, typename Format, typename Sums>
__attribute__((always_inline)) inline void row_group(const uint8_t* v, const uint8_t* s, int g, const Activations& x,
                                                     int t0, int64_t k, typename Sums::Acc (&acc)[N],
                                                     typename Sums::Context& context, const __m256d (&m)[N]) {
  XGroup xg[N];
  typename Format::Sum sum[N];
#pragma GCC unroll 8
  for (int t = 0; t < N; ++t) xg[t] = x_group(x, t0 + t, k);
  if constexpr (N == 1) {
    // Opaque to the optimizer, so that the token's activations stay memory
    // operands of the products: hoisted out of the loop over a tile's rows,
    // GCC kept them in registers and spilled the tile's other values
    // (decode 10-20% slower in L2).
    asm("" : "+r"(xg[0].q), "+r"(xg[0].u), "+r"(xg[0].d), "+r"(xg[0].offset));
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256i w[4];
    Format::decode(v, g, h, w);
    const __m256i c = Format::correction(w);
#pragma GCC unroll 8
    for (int t = 0; t < N; ++t) {
      auto part = Format::half_sum(w, c, xg[t], h);
      // Opaque too, so that GCC cannot reassociate the integer sums of a
      // batch tile's two halves: it built each token's sum of the 8 Q8_0
      // products as one tree, held them all live and spilled 52 vectors a
      // group (Q8_0 batches ~15% faster with this; decode is left as it
      // was).
      if constexpr (N > 1) opaque(part);
      sum[t] = h ? add_sums(sum[t], part) : part;
    }
  }
  const auto coef = Format::coefficients(s, g).template masked_to<Tail>(g);
#pragma GCC unroll 8
  for (int t = 0; t < N; ++t) acc[t] = Sums::add(acc[t], coef, sum[t], xg[t], context, m[t]);
}

// How far ahead of a decode tile its stream is fetched: the weights are
// read once, one tile after another (packed_rows.h), and without it loads
// wait on memory with the integer units idle. 2 KiB was as fast as or
// faster than 1, 3, 4 and 8 KiB and than fetching into L2 16 or 48 KiB
// ahead (bench_kernels; bench/results/2026-11-26-diary.md, "Tried and not kept").
constexpr int64_t kPrefetchBytes = 2048;

// The most tokens a matrix product streams its weights for as decode does
// (see quantized_matmul).
constexpr int kStreamTokens = 16;
// Tokens a streaming tile of 4 rows takes at once: 4 x 4 accumulators fit
// AVX-512VL's 32 vector registers, 4 x 2 AVX2's 16.
#if defined(__AVX512VL__)
constexpr int kStreamTile = 4;
#else
constexpr int kStreamTile = 2;
#endif

// Rows r0..r0+R-1 of a tile of T rows, group k of g blocks (at `group`);
// Fetch: the first pass over weights that come from memory.
template <int R, int N, bool Tail, bool Fetch, typename Format, typename Sums>
__attribute__((always_inline)) inline void group_step(const uint8_t* group, int64_t T, int64_t r0, int g,
                                                      const Activations& x, int t0, int64_t k,
                                                      typename Sums::Acc (&acc)[R][N], typename Sums::Context& context,
                                                      const __m256d (&m)[N]) {
  constexpr int V = Format::kValueBytes;
  const int S = Format::scale_bytes(g);  // a row's
  const uint8_t* values = group + r0 * g * V;
  const uint8_t* scales = group + T * g * V + r0 * S;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if constexpr (Fetch) {
      // Each row fetches its own lines ahead, spread over the rows (a
      // tile's lines at once were slower for Q8_0's 17 a group).
      for (int off = 0; off < 8 * V; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(values + r * g * V + kPrefetchBytes + off), _MM_HINT_T0);
      if (r == R - 1) _mm_prefetch(reinterpret_cast<const char*>(scales + kPrefetchBytes), _MM_HINT_T0);
    }
    row_group<N, Tail, Format, Sums>(values + r * g * V, scales + r * S, g, x, t0, k, acc[r], context, m);
  }
}

// Rows r0..r0+R-1 of the tile of T rows at `tile` x tokens t0..t0+N-1, into
// y[(t0 + t) * y_stride + r].
template <int R, int N, typename Format, typename Sums, bool Fetch = false>
void tile(const uint8_t* tile, int64_t T, int64_t r0, const Activations& x, int t0, typename Sums::Out* y,
          int64_t y_stride, typename Sums::Context& context) {
  const int64_t blocks = x.cols / 32, full = blocks / kGroupBlocks;
  const int tail = static_cast<int>(blocks % kGroupBlocks);
  const int64_t group_bytes = T * (kGroupBlocks * Format::kValueBytes + Format::scale_bytes(kGroupBlocks));
  typename Sums::Acc acc[R][N];
  for (auto& row : acc)
    for (auto& a : row) a = Sums::zero();
  __m256d m[N];
  for (int t = 0; t < N; ++t) m[t] = Sums::template multiplier<Format>(context, t0 + t);
  for (int64_t k = 0; k < full; ++k)
    group_step<R, N, false, Fetch, Format, Sums>(tile + k * group_bytes, T, r0, kGroupBlocks, x, t0, k, acc, context,
                                                 m);
  if (tail)
    group_step<R, N, true, Fetch, Format, Sums>(tile + full * group_bytes, T, r0, tail, x, t0, full, acc, context, m);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < N; ++t)
      y[(t0 + t) * y_stride + r] = Sums::template result<Format>(acc[r][t], full + (tail ? 1 : 0));
}

// Tiles over the rows and all tokens. Decode and a step of a few
// sequences' next tokens (up to kStreamTokens) go a whole tile of four rows
// at a time, streaming the weights once with prefetching: the tile x two
// tokens (one for a last odd token), the first pair fetching ahead, the
// others finding the tile's weights in L1. A larger batch (a prompt) goes
// by panels of 16 rows: for each tile of four tokens (then 3 or 2), each row
// of the panel in turn, so that the panel's weights and the tile's
// activations both stay in L2 while they meet (a row against every token
// would stream the whole batch's activations from L3 for every row). The
// shapes were chosen by measurement (bench/results/2026-11-26-diary.md, "Tried
// and not kept").
template <typename Format, typename Sums>
void products(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
              const Activations& x, typename Sums::Out* y, int64_t y_stride, typename Sums::Context& context) {
  constexpr int64_t kPanel = 16;
  // Row `row` alone, within its tile.
  auto one_row = [&]<int N>(int64_t row, int t) {
    const int64_t T = tile_rows(row, rows), r = row % T;
    tile<1, N, Format, Sums>(w + (row - r) * row_bytes, T, r, x, t, y + (row - row_begin), y_stride, context);
  };
  if (x.tokens <= kStreamTokens) {
    for (int64_t row = row_begin; row < row_end;) {
      if (row % kTileRows == 0 && row + kTileRows <= row_end && tile_rows(row, rows) == kTileRows) {
        const uint8_t* t = w + row * row_bytes;
        typename Sums::Out* out = y + (row - row_begin);
        // The tile's tokens by kStreamTile, then 2, then 1; the first pass
        // fetches ahead.
        auto pass = [&]<int N>(int t0) {
          t0 == 0 ? tile<kTileRows, N, Format, Sums, true>(t, kTileRows, 0, x, 0, out, y_stride, context)
                  : tile<kTileRows, N, Format, Sums>(t, kTileRows, 0, x, t0, out, y_stride, context);
        };
        int t0 = 0;
        for (; t0 + kStreamTile <= x.tokens; t0 += kStreamTile) pass.template operator()<kStreamTile>(t0);
        for (; t0 + 2 <= x.tokens; t0 += 2) pass.template operator()<2>(t0);
        if (t0 < x.tokens) pass.template operator()<1>(t0);
        row += kTileRows;
      } else {
        for (int t = 0; t < x.tokens; ++t) one_row.template operator()<1>(row, t);
        ++row;
      }
    }
    return;
  }
  for (int64_t p0 = row_begin; p0 < row_end; p0 += kPanel) {
    const int64_t p1 = std::min(row_end, p0 + kPanel);
    auto panel = [&]<int N>(int t) {
      for (int64_t row = p0; row < p1; ++row) one_row.template operator()<N>(row, t);
    };
    // Tiles of 4 tokens, the rest (of 2 or more tokens) in tiles of 3 or 2:
    // a lone token's tile decodes each weight group for one token.
    int fours = x.tokens / 4, rest = x.tokens % 4, t = 0;
    if (rest == 1) --fours, rest = 5;  // 3 + 2
    for (; t < 4 * fours; t += 4) panel.template operator()<4>(t);
    if (rest >= 3) panel.template operator()<3>(t), t += 3, rest -= 3;
    if (rest == 2) panel.template operator()<2>(t);
  }
}

template <typename Format>
void quantized_matmul(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
                      const Activations& x, float* y, int64_t y_stride) {
  FloatSums::Context context;
  products<Format, FloatSums>(w, row_bytes, rows, row_begin, row_end, x, y, y_stride, context);
}

template <typename Format>
bool fixed_matmul(const uint8_t* w, uint64_t row_bytes, int64_t rows, int64_t row_begin, int64_t row_end,
                  const Activations& x, const float* scale, int64_t* y, int64_t y_stride) {
  FixedSums::Context context{scale};
  products<Format, FixedSums>(w, row_bytes, rows, row_begin, row_end, x, y, y_stride, context);
  return _mm256_movemask_ps(context.bad) == 0;
}

// The kernels of kPackedTypes, in its order.
using Formats = std::tuple<Q8_0Format, Mxfp4Format, BlockLinearFormat<-1, 15, -8>, BlockLinearFormat<-1, 15, 0>,
                           BlockLinearFormat<4, 31, -16>, BlockLinearFormat<4, 31, 0>, Iq4Format<false>, Q2_KFormat,
                           KHalfFormat<false, 0, 2, 7, -4>, K4Format<-1>, K4Format<4>,
                           KHalfFormat<true, 4, -1, 63, -32>, Iq4Format<true>>;
static_assert(std::tuple_size_v<Formats> == kPackedTypeCount);
template <size_t... I>
constexpr std::array<KernelSet::QuantizedMatmul, kPackedTypeCount> quantized_kernels(std::index_sequence<I...>) {
  return {quantized_matmul<std::tuple_element_t<I, Formats>>...};
}
template <size_t... I>
constexpr std::array<KernelSet::FixedMatmul, kPackedTypeCount> fixed_kernels(std::index_sequence<I...>) {
  return {fixed_matmul<std::tuple_element_t<I, Formats>>...};
}
constexpr std::array<KernelSet::QuantizedMatmul, kPackedTypeCount> kQuantized =
    quantized_kernels(std::make_index_sequence<kPackedTypeCount>());
constexpr std::array<KernelSet::FixedMatmul, kPackedTypeCount> kFixed =
    fixed_kernels(std::make_index_sequence<kPackedTypeCount>());

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

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Sixteen float lanes: a key block's lanes of one dimension (kKeyBlock),
// or sixteen dimensions of a values row. The attention kernels below are
// written over it once: one 512-bit vector in the AVX-512 set, two 256-bit
// ones in the AVX2 set (the same operations lane for lane).
static_assert(kKeyBlock == 16, "a key block's dimension is sixteen lanes");
#ifdef __AVX512F__
// The conversions in their zero-masked forms with every lane: GCC 12 takes
// the plain forms' undefined pass-through for an uninitialized read
// (-Wmaybe-uninitialized, its bug 105593).
constexpr __mmask16 kEvery = 0xFFFF;
struct F32x16 {
  __m512 v;
  static F32x16 zero() { return {_mm512_setzero_ps()}; }
  static F32x16 all(float x) { return {_mm512_set1_ps(x)}; }
  static F32x16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static F32x16 halves(const uint8_t* p) { return {_mm512_maskz_cvtph_ps(kEvery, load256(p))}; }
  static F32x16 bfloats(const uint8_t* p) {
    return {_mm512_castsi512_ps(_mm512_maskz_slli_epi32(kEvery, _mm512_maskz_cvtepu16_epi32(kEvery, load256(p)), 16))};
  }
  static F32x16 bytes(__m128i b) { return {_mm512_maskz_cvtepi32_ps(kEvery, _mm512_maskz_cvtepi8_epi32(kEvery, b))}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  F32x16 abs() const { return {_mm512_abs_ps(v)}; }
  F32x16 rounded() const {
    return {_mm512_maskz_roundscale_ps(kEvery, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  // The lanes folded by op in halves, quarters, ... (GCC 12's
  // _mm512_castps512_ps256 takes the same undefined pass-through).
  template <typename Op>
  float fold(Op op) const {
    __m512 x = op(v, _mm512_maskz_shuffle_f32x4(kEvery, v, v, 0x4E));
    x = op(x, _mm512_maskz_shuffle_f32x4(kEvery, x, x, 0xB1));
    x = op(x, _mm512_maskz_permute_ps(kEvery, x, 0x4E));
    return _mm512_cvtss_f32(op(x, _mm512_maskz_permute_ps(kEvery, x, 0xB1)));
  }
  float largest() const {
    return fold([](__m512 a, __m512 b) { return _mm512_maskz_max_ps(kEvery, a, b); });
  }
  float total() const {
    return fold([](__m512 a, __m512 b) { return _mm512_maskz_add_ps(kEvery, a, b); });
  }
  bool finite() const { return _mm512_cmp_ps_mask(abs().v, _mm512_set1_ps(INFINITY), _CMP_LT_OQ) == kEvery; }
};
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline F32x16 mul(F32x16 a, F32x16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline F32x16 add(F32x16 a, F32x16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline F32x16 max(F32x16 a, F32x16 b) { return {_mm512_maskz_max_ps(kEvery, a.v, b.v)}; }
// Query rows one pass over a run takes: 8 rows' accumulators and a key
// vector fit the 32 vector registers, so a kv head's 8 query heads (gpt-oss)
// read and widen its keys and values once.
constexpr int kAttendRows = 8;
#else
struct F32x16 {
  __m256 lo, hi;
  static F32x16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static F32x16 all(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static F32x16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static F32x16 halves(const uint8_t* p) { return {f16x8(p), f16x8(p + 16)}; }
  static F32x16 bfloats(const uint8_t* p) { return {bf16x8(p), bf16x8(p + 16)}; }
  static F32x16 bytes(__m128i b) {
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, lo), _mm256_storeu_ps(p + 8, hi); }
  F32x16 abs() const {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    return {_mm256_and_ps(lo, magnitude), _mm256_and_ps(hi, magnitude)};
  }
  F32x16 rounded() const {
    return {_mm256_round_ps(lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
            _mm256_round_ps(hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  float largest() const { return hmax(_mm256_max_ps(lo, hi)); }
  float total() const { return hsum(_mm256_add_ps(lo, hi)); }
  bool finite() const {
    const F32x16 a = abs();
    const __m256 inf = _mm256_set1_ps(INFINITY);
    return _mm256_movemask_ps(
               _mm256_and_ps(_mm256_cmp_ps(a.lo, inf, _CMP_LT_OQ), _mm256_cmp_ps(a.hi, inf, _CMP_LT_OQ))) == 0xFF;
  }
};
inline F32x16 fmadd(F32x16 a, F32x16 b, F32x16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline F32x16 mul(F32x16 a, F32x16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline F32x16 add(F32x16 a, F32x16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline F32x16 max(F32x16 a, F32x16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
// 4 rows' accumulators (8 vectors) leave room in the 16 vector registers
// for the keys and the query element.
constexpr int kAttendRows = 4;
#endif

// Sixteen elements of a KV cache of type T at p (kernels/kv_format.h): a
// key block's lanes of one dimension, or sixteen dimensions of a values row
// from a multiple of 16; for the quantized types their codes (q4_0's 8
// bytes of low and high nibbles, less 8), the values key_code gives.
template <KvType T>
inline F32x16 sixteen(const uint8_t* p) {
  if constexpr (T == KvType::f32) return F32x16::load(reinterpret_cast<const float*>(p));
  if constexpr (T == KvType::f16) return F32x16::halves(p);
  if constexpr (T == KvType::bf16) return F32x16::bfloats(p);
  if constexpr (T == KvType::q8_0) return F32x16::bytes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if constexpr (T == KvType::q4_0) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i nibbles = _mm_and_si128(_mm_unpacklo_epi64(b, _mm_srli_epi16(b, 4)), _mm_set1_epi8(0x0F));
    return F32x16::bytes(_mm_sub_epi8(nibbles, _mm_set1_epi8(8)));
  }
}
// Bytes of sixteen elements of T.
template <KvType T>
constexpr int kSixteenBytes = T == KvType::q4_0 ? 8 : 16 * kv_element_bytes(T);

// The cache's pieces a run reads are small (a kv head's key block and its
// 16 value rows, 1-2 KiB each) and scattered over the pool: too short for
// the hardware's prefetchers to ramp up, so their lines are asked for one
// key block ahead.
inline void prefetch_bytes(const uint8_t* p, uint64_t n) {
  for (uint64_t i = 0; i < n; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + n - 1), _MM_HINT_T0);
}

// Whether quantized keys of type T are scored by VNNI's integer products
// (four dimensions an instruction) rather than by float multiply-adds over
// their codes; both give the same exact sums.
#ifdef __AVX512VNNI__
template <KvType T>
constexpr bool kIntegerKeys = kv_quantized(T);
// dpbusd multiplies unsigned bytes by signed ones: the keys' codes come in
// as code + kKeyBias (q8_0's with the sign bit flipped, q4_0's nibbles as
// stored), the query's as they are, and the query's codes' sum times the
// bias is taken off.
template <KvType T>
constexpr int kKeyBias = T == KvType::q8_0 ? 128 : 8;

// Dimensions [i, i + n) of a quantized key block's 16 lanes (n <= 4; the
// others zero bytes) from the codes of dimension i at p, as dpbusd takes
// them: lane j's four codes + kKeyBias in its 32 bits.
template <KvType T>
inline __m512i key_quad(const uint8_t* p, int n) {
  __m512i x;
  if constexpr (T == KvType::q8_0) {
    x = n >= 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8((__mmask64{1} << (16 * n)) - 1, p);
    x = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i y = n >= 4 ? load256(p) : _mm256_maskz_loadu_epi8((__mmask32{1} << (8 * n)) - 1, p);
    // Dimension d's 8 bytes into both halves of 128-bit lane d, then the
    // low nibbles (lanes 0..7) in the low half, the high in the high.
    x = _mm512_maskz_permutexvar_epi64(0xFF, _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3),
                                       _mm512_maskz_broadcast_i64x4(0xFF, y));
    x = _mm512_and_si512(_mm512_maskz_srlv_epi64(0xFF, x, _mm512_setr_epi64(0, 4, 0, 4, 0, 4, 0, 4)),
                         _mm512_set1_epi8(0x0F));
  }
  // [dimension][lane] to [lane][dimension]: 4 x 4 words across the 128-bit
  // lanes, then 4 x 4 bytes within each.
  x = _mm512_maskz_permutexvar_epi32(kEvery, _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                     x);
  return _mm512_shuffle_epi8(x, _mm512_set4_epi32(0x0F0B0703, 0x0E0A0602, 0x0D090501, 0x0C080400));
}
#else
template <KvType T>
constexpr bool kIntegerKeys = false;
#endif

// A key block as the cache holds it: dimension i's 16 lanes widened (the
// codes, for the quantized types), dimensions [i, i + 4) as integer
// products take them, and block b of 32 dimensions' scales.
template <KvType T>
struct CacheKeys {
  const uint8_t* kb;
  int head_dim;
  F32x16 load(int i) const { return sixteen<T>(kb + int64_t{kSixteenBytes<T>} * i); }
#ifdef __AVX512VNNI__
  __m512i quad(int i) const { return key_quad<T>(kb + int64_t{kSixteenBytes<T>} * i, std::min(4, head_dim - i)); }
#endif
  F32x16 scales(int b) const { return F32x16::halves(kb + kv_key_code_bytes(T, head_dim) + 32 * b); }
  void prefetch() const { prefetch_bytes(kb, kv_key_block_bytes(T, head_dim)); }
};

// The same block widened once for a tile's many query rows: k[i][16]
// floats, or quads[i / 4][64] bytes for integer products, and scale[b][16]:
// what CacheKeys gives, so the same bits.
struct WideKeys {
  const float* k;
  const uint8_t* quads;
  const float* scale;
  F32x16 load(int i) const { return F32x16::load(k + 16 * i); }
#ifdef __AVX512VNNI__
  __m512i quad(int i) const { return _mm512_loadu_si512(quads + 16 * i); }
#endif
  F32x16 scales(int b) const { return F32x16::load(scale + 16 * b); }
  void prefetch() const {}
};

// H query rows' scores of a key block's 16 lanes, unscaled, into s[h][0..16):
// H chains of multiply-adds of 16 lanes over the dimensions (two vectors
// each in the AVX2 set), enough to hide their latency. Quantized codes by
// blocks of 32 dimensions, each block's sums times its scales (as the
// scalar kernel). A row's chains do not depend on the others: its scores
// are the same bits in any group.
// A query element comes in by set1, not broadcast_ss from its address: with
// that builtin GCC 12 kept the accumulators on the stack, storing all of
// them every dimension (prefill's tiled attention 1.5x slower).
template <int H, typename Keys>
void score_rows(const float* const* q, int head_dim, const Keys& keys, float* const* s) {
  F32x16 acc[H];
  for (F32x16& a : acc) a = F32x16::zero();
  for (int i = 0; i < head_dim; ++i) {
    const F32x16 k = keys.load(i);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) acc[h] = fmadd(F32x16::all(q[h][i]), k, acc[h]);
  }
  for (int h = 0; h < H; ++h) acc[h].store(s[h]);
}

// H query rows quantized for quantized keys, by blocks of 32 dimensions
// (kv_format.h's query_codes): each block's scale, and the codes as the
// score loop takes them -- for integer products four to a 32-bit word, with
// -kKeyBias x the block's codes' sum; otherwise as floats.
template <int H>
struct QueryCodes {
  static constexpr int kBlocks = kMaxHeadDim / kKvScaleBlock;
  float scale[H][kBlocks];
#ifdef __AVX512VNNI__
  int32_t quad[H][kMaxHeadDim / 4];
  int32_t offset[H][kBlocks];
#else
  float code[H][kMaxHeadDim];
#endif
};

// query_codes for H rows, 16 lanes at a time: the same codes and scales.
// The codes of a short last block's missing dimensions are 0.
template <KvType T, int H>
void quantize_rows(const float* const* q, int head_dim, QueryCodes<H>& c) {
  for (int h = 0; h < H; ++h)
    for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
      const int i0 = b * kKvScaleBlock, n = std::min(kKvScaleBlock, head_dim - i0);
      alignas(64) float padded[kKvScaleBlock] = {};
      const float* x = q[h] + i0;
      if (n < kKvScaleBlock) x = static_cast<const float*>(std::memcpy(padded, x, n * sizeof(float)));
      const F32x16 lo = F32x16::load(x), hi = F32x16::load(x + 16);
      F32x16 code_lo = F32x16::zero(), code_hi = F32x16::zero();
      float d = NAN;
      if (lo.finite() && hi.finite()) {
        d = max(lo.abs(), hi.abs()).largest() / 127.0f;
        float inverse = d != 0 ? 1.0f / d : 0.0f;
        if (inverse > FLT_MAX) d = 0, inverse = 0;
        code_lo = mul(lo, F32x16::all(inverse)).rounded(), code_hi = mul(hi, F32x16::all(inverse)).rounded();
      }
      c.scale[h][b] = d;
#ifdef __AVX512VNNI__
      int8_t* codes = reinterpret_cast<int8_t*>(c.quad[h]) + i0;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes),
                       _mm512_maskz_cvtsepi32_epi8(kEvery, _mm512_maskz_cvtps_epi32(kEvery, code_lo.v)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16),
                       _mm512_maskz_cvtsepi32_epi8(kEvery, _mm512_maskz_cvtps_epi32(kEvery, code_hi.v)));
      c.offset[h][b] = -kKeyBias<T> * static_cast<int32_t>(add(code_lo, code_hi).total());
#else
      code_lo.store(c.code[h] + i0), code_hi.store(c.code[h] + i0 + 16);
#endif
    }
}

// H quantized query rows' scores of a quantized key block's 16 lanes,
// unscaled, into s[h][0..16): per block of 32 dimensions the integer sum of
// the query's and the keys' code products -- exact, so the same in every
// set -- times the key's scale times the query's, added in H chains. With
// VNNI four dimensions a dpbusd; otherwise float multiply-adds over the
// codes, exact below 2^24.
template <KvType T, int H, typename Keys>
void score_codes(const QueryCodes<H>& q, int head_dim, const Keys& keys, float* const* s) {
  F32x16 acc[H];
  for (F32x16& a : acc) a = F32x16::zero();
  for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
    const int end = std::min(head_dim, (b + 1) * kKvScaleBlock);
    F32x16 part[H];
#ifdef __AVX512VNNI__
    __m512i sum[H];
    for (int h = 0; h < H; ++h) sum[h] = _mm512_set1_epi32(q.offset[h][b]);
    for (int i = b * kKvScaleBlock; i < end; i += 4) {
      const __m512i k = keys.quad(i);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) sum[h] = _mm512_dpbusd_epi32(sum[h], k, _mm512_set1_epi32(q.quad[h][i / 4]));
    }
    for (int h = 0; h < H; ++h) part[h] = {_mm512_maskz_cvtepi32_ps(kEvery, sum[h])};
#else
    for (F32x16& a : part) a = F32x16::zero();
    for (int i = b * kKvScaleBlock; i < end; ++i) {
      const F32x16 k = keys.load(i);
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) part[h] = fmadd(F32x16::all(q.code[h][i]), k, part[h]);
    }
#endif
    const F32x16 d = keys.scales(b);
    for (int h = 0; h < H; ++h) acc[h] = fmadd(part[h], mul(d, F32x16::all(q.scale[h][b])), acc[h]);
  }
  for (int h = 0; h < H; ++h) acc[h].store(s[h]);
}

// The value rows v[0..count) of a run as the cache holds them: dimensions
// [i, i + 16) of row j widened (the codes, for the quantized types; i a
// multiple of 16), block b of 32 dimensions' scale, and one element.
template <KvType T>
struct CacheValues {
  const uint8_t* const* v;
  int head_dim;
  F32x16 load(int j, int i) const { return sixteen<T>(v[j] + int64_t{kSixteenBytes<T>} * (i / 16)); }
  float scale(int j, int b) const {
    uint16_t h;
    std::memcpy(&h, v[j] + kv_value_code_bytes(T, head_dim) + 2 * b, 2);
    return half(h);
  }
  float at(int j, int i) const { return value_at(T, v[j], head_dim, i); }
  void prefetch(int j) const { prefetch_bytes(v[j], kv_value_bytes(T, head_dim)); }
};

// The same rows widened once into floats (rows of `stride`, the dimensions
// past the last multiple of 16 left to the cache): the floats CacheValues
// gives, so the same bits.
template <KvType T>
struct WideValues {
  const float* rows;
  const float* scales;  // [count][blocks]
  int stride, blocks;
  CacheValues<T> cache;
  F32x16 load(int j, int i) const { return F32x16::load(rows + int64_t{j} * stride + i); }
  float scale(int j, int b) const { return scales[j * blocks + b]; }
  float at(int j, int i) const { return cache.at(j, i); }
  void prefetch(int) const {}
};

// One row's step of the online softmax over a run's lanes: s[0, lanes) its
// unscaled scores, of which [first, end) are the run's positions. They
// become the weights e^(scale x score - max) (the others 0), max and sum
// the state's with them; returns e^(old max - new max), what the state's
// values are scaled by (0 for a state of no positions).
inline float softmax_step(float* s, int first, int end, int lanes, float scale, float& max, float& sum) {
  for (int p = 0; p < first; ++p) s[p] = -INFINITY;
  for (int p = end; p < lanes; ++p) s[p] = -INFINITY;
  const __m256 sc = _mm256_set1_ps(scale), low = _mm256_set1_ps(-INFINITY);
  __m256 top = low;
  for (int p = 0; p < lanes; p += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + p), sc);
    _mm256_storeu_ps(s + p, x);
    top = _mm256_max_ps(top, x);
  }
  const float m = std::max(max, hmax(top)), old = std::exp(max - m);
  const __m256 mv = _mm256_set1_ps(m);
  __m256 total = _mm256_setzero_ps();
  for (int p = 0; p < lanes; p += 8) {
    const __m256 x = _mm256_loadu_ps(s + p);
    // exp256 of -inf is e^-87, not 0: the lanes outside the run are masked.
    const __m256 w = _mm256_and_ps(exp256(_mm256_sub_ps(x, mv)), _mm256_cmp_ps(x, low, _CMP_GT_OQ));
    _mm256_storeu_ps(s + p, w);
    total = _mm256_add_ps(total, w);
  }
  max = m, sum = sum * old + hsum(total);
  return old;
}

// Dimensions [i0, i0 + 16) of H rows' weighted values: each row's acc times
// old[h], plus w[h][j] x v[j] for j < n in position order, in H chains of
// 16 lanes. Each value vector is read and widened once for the H rows. For
// the quantized types w holds each weight times its row's scale of these
// dimensions, v the codes.
template <int H, typename Values>
void add_values(const float* const* w, const float* old, const Values& v, int n, int i0, float* const* acc) {
  F32x16 a[H];
  for (int h = 0; h < H; ++h) a[h] = mul(F32x16::load(acc[h] + i0), F32x16::all(old[h]));
  for (int j = 0; j < n; ++j) {
    const F32x16 x = v.load(j, i0);
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) a[h] = fmadd(F32x16::all(w[h][j]), x, a[h]);
  }
  for (int h = 0; h < H; ++h) a[h].store(acc[h] + i0);
}

// H query rows' states, each the online softmax of its own query.
template <int H>
struct Rows {
  const float* q[H];
  float *max[H], *sum[H], *acc[H];
};

// The positions [first, end) of a run's lanes (its key blocks' lanes in
// order, key block b = keys(b)), whose value rows are v[0, end - first),
// added to H rows' states: all the run's scores first, then one softmax
// step per row, then the values -- the state's max, rescale and sums once
// a run, not once a key block, and each key and value vector widened once
// for the H rows. The sums' order does not depend on H or on which rows
// share a call: a row's bits are the same alone.
template <KvType T, int H, typename KeysOf, typename Values>
void attend_rows(const Rows<H>& rows, int head_dim, KeysOf keys, const Values& v, float scale, int first, int end) {
  const int lanes = (end + kKeyBlock - 1) / kKeyBlock * kKeyBlock, count = end - first;
  alignas(32) float s[H][kAttendRunBlocks * kKeyBlock];
  [[maybe_unused]] std::conditional_t<kv_quantized(T), QueryCodes<H>, std::monostate> codes;
  if constexpr (kv_quantized(T)) quantize_rows<T, H>(rows.q, head_dim, codes);
  for (int b = 0; b * kKeyBlock < end; ++b) {
    if ((b + 1) * kKeyBlock < end) keys(b + 1).prefetch();
    for (int j = std::max(first, b * kKeyBlock); j < std::min(end, (b + 1) * kKeyBlock); ++j) v.prefetch(j - first);
    float* out[H];
    for (int h = 0; h < H; ++h) out[h] = s[h] + b * kKeyBlock;
    if constexpr (kv_quantized(T))
      score_codes<T, H>(codes, head_dim, keys(b), out);
    else
      score_rows<H>(rows.q, head_dim, keys(b), out);
  }
  float old[H];
  for (int h = 0; h < H; ++h) old[h] = softmax_step(s[h], first, end, lanes, scale, *rows.max[h], *rows.sum[h]);
  const float* w[H];
  for (int h = 0; h < H; ++h) w[h] = s[h] + first;
  // Dimensions [lo, hi) with weights ws: by 16, then one at a time.
  auto add = [&](const float* const* ws, int lo, int hi) {
    int i = lo;
    for (; i + 16 <= hi; i += 16) add_values<H>(ws, old, v, count, i, rows.acc);
    for (; i < hi; ++i)
      for (int h = 0; h < H; ++h) {
        float a = rows.acc[h][i] * old[h];
        for (int j = 0; j < count; ++j) a += w[h][j] * v.at(j, i);
        rows.acc[h][i] = a;
      }
  };
  if constexpr (kv_quantized(T)) {
    // A block of 32 dimensions at a time, its rows' scales in the weights.
    alignas(32) float ws[H][kAttendRunBlocks * kKeyBlock], scales[kAttendRunBlocks * kKeyBlock];
    const float* wsp[H];
    for (int h = 0; h < H; ++h) wsp[h] = ws[h];
    for (int b = 0; b * kKvScaleBlock < head_dim; ++b) {
      for (int j = 0; j < count; ++j) scales[j] = v.scale(j, b);
      for (int h = 0; h < H; ++h)
        for (int j = 0; j < count; ++j) ws[h][j] = w[h][j] * scales[j];
      add(wsp, b * kKvScaleBlock, std::min(head_dim, (b + 1) * kKvScaleBlock));
    }
  } else {
    add(w, 0, head_dim);
  }
}

// group(r, std::integral_constant<int, H>{}) for rows [r, r + H) of
// `count`: H = kAttendRows while that many remain, then halves of it.
template <int H = kAttendRows, typename Group>
void in_groups(int count, Group group, int r = 0) {
  for (; r + H <= count; r += H) group(r, std::integral_constant<int, H>{});
  if constexpr (H > 1) in_groups<H / 2>(count, group, r);
}

// Heads kAttendRows at a time over the run, its keys and values read from
// the cache.
template <KvType T>
void attend_run(const float* q, int heads, int head_dim, const uint8_t* const* kb, const uint8_t* const* v, float scale,
                int first, int count, float* max, float* sum, float* acc) {
  const CacheValues<T> values{v, head_dim};
  in_groups(heads, [&](int h0, auto group) {
    constexpr int H = decltype(group)::value;
    Rows<H> rows;
    for (int h = 0; h < H; ++h)
      rows.q[h] = q + (h0 + h) * head_dim, rows.max[h] = max + h0 + h, rows.sum[h] = sum + h0 + h,
      rows.acc[h] = acc + int64_t{h0 + h} * head_dim;
    attend_rows<T, H>(
        rows, head_dim,
        [&](int b) {
          return CacheKeys<T>{kb[b], head_dim};
        },
        values, scale, first, first + count);
  });
}

// The widest head a tile widens its run for (the buffers' size, on the
// stack: gpt-oss's 64); wider ones take attend_run a token at a time.
constexpr int kWideDims = 64;

// A key block's keys widened (kernels/kv_format.h): k[i][16], or for
// integer products quads[i / 4][64], and for the quantized types
// scale[b][16] of each 32 dimensions.
template <KvType T>
void widen_keys(const uint8_t* kb, int head_dim, float* k, uint8_t* quads, float* scale) {
  const CacheKeys<T> keys{kb, head_dim};
  if constexpr (kIntegerKeys<T>)
    for (int i = 0; i < head_dim; i += 4) _mm512_storeu_si512(quads + 16 * i, keys.quad(i));
  else
    for (int i = 0; i < head_dim; ++i) keys.load(i).store(k + 16 * i);
  if constexpr (kv_quantized(T))
    for (int b = 0; b * kKvScaleBlock < head_dim; ++b) keys.scales(b).store(scale + 16 * b);
}

// The value rows' whole groups of 16 dimensions widened into rows of
// `stride`, and for the quantized types each row's scales [blocks].
template <KvType T>
void widen_values(const CacheValues<T>& v, int count, int stride, int blocks, float* rows, float* scales) {
  for (int j = 0; j < count; ++j) {
    for (int i = 0; i + 16 <= v.head_dim; i += 16) v.load(j, i).store(rows + int64_t{j} * stride + i);
    if constexpr (kv_quantized(T))
      for (int b = 0; b < blocks; ++b) scales[j * blocks + b] = v.scale(j, b);
  }
}

// attend_run for each of `tokens` queries q[t] with states[t], the run
// widened once for all of them: its keys, then its values, are read and
// widened once, and the tokens' heads take them kAttendRows rows at a time
// from the floats. Each row's arithmetic is attend_run's for its token alone.
template <KvType T>
void attend_tile(const float* const* q, int tokens, int heads, int head_dim, const uint8_t* const* kb,
                 const uint8_t* const* v, float scale, int first, int count, const AttentionState* states) {
  if (head_dim > kWideDims) {
    for (int t = 0; t < tokens; ++t)
      attend_run<T>(q[t], heads, head_dim, kb, v, scale, first, count, states[t].max, states[t].sum, states[t].acc);
    return;
  }
  constexpr int kBlocks = kWideDims / kKvScaleBlock, kLanes = kAttendRunBlocks * kKeyBlock;
  float k[kLanes * kWideDims], k_scale[kLanes * kBlocks], rows[kLanes * kWideDims], row_scales[kLanes * kBlocks];
  uint8_t quads[kLanes * kWideDims];
  const int blocks = (head_dim + kKvScaleBlock - 1) / kKvScaleBlock;
  const int64_t key_floats = int64_t{kKeyBlock} * head_dim, scale_floats = kKeyBlock * blocks,
                quad_bytes = int64_t{kKeyBlock} * ((head_dim + 3) / 4 * 4);
  for (int b = 0; b * kKeyBlock < first + count; ++b)
    widen_keys<T>(kb[b], head_dim, k + b * key_floats, quads + b * quad_bytes, k_scale + b * scale_floats);
  const CacheValues<T> cache{v, head_dim};
  widen_values<T>(cache, count, head_dim, blocks, rows, row_scales);
  const WideValues<T> values{rows, row_scales, head_dim, blocks, cache};
  in_groups(tokens * heads, [&](int r0, auto group) {
    constexpr int H = decltype(group)::value;
    Rows<H> rs;
    for (int h = 0; h < H; ++h) {
      const int r = r0 + h, head = r % heads;
      const AttentionState& st = states[r / heads];
      rs.q[h] = q[r / heads] + head * head_dim, rs.max[h] = st.max + head, rs.sum[h] = st.sum + head,
      rs.acc[h] = st.acc + int64_t{head} * head_dim;
    }
    attend_rows<T, H>(
        rs, head_dim,
        [&](int b) {
          return WideKeys{k + b * key_floats, quads + b * quad_bytes, k_scale + b * scale_floats};
        },
        values, scale, first, first + count);
  });
}

// The attention kernels by KvType.
constexpr std::array<KernelSet::AttendRun, kKvTypeCount> kAttendRun = {
    attend_run<KvType::f32>, attend_run<KvType::f16>, attend_run<KvType::bf16>, attend_run<KvType::q8_0>,
    attend_run<KvType::q4_0>};
constexpr std::array<KernelSet::AttendTile, kKvTypeCount> kAttendTile = {
    attend_tile<KvType::f32>, attend_tile<KvType::f16>, attend_tile<KvType::bf16>, attend_tile<KvType::q8_0>,
    attend_tile<KvType::q4_0>};

}  // namespace
