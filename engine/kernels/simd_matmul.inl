// The matrix products over packed weight rows (kernels/packed_rows.h), one
// per block format, and their split-invariant variant. They take 256-bit
// vectors with AVX2 and AVX-512 alike (no 512-bit form has been tried yet);
// AVX-512 VNNI turns the int8 multiply-add into one instruction.
//
// Included after simd_rows.inl (its lanes), inside the ISA's namespace, by
// avx2.cpp and avx512.cpp only.

namespace {

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

// 8 unsigned or signed bytes at p, as floats; the F16 at p in every lane.
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

}  // namespace
