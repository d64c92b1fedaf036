// Decode and prefill attention over a run of KV cache positions
// (kernels/kv_format.h) with an online softmax, 16 float lanes at a time
// (F32x16): one 512-bit vector with AVX-512, two 256-bit ones with AVX2.
//
// Included after simd_rows.inl (its lanes and exp256), inside the ISA's
// namespace, by avx2.cpp and avx512.cpp only.

namespace {

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
inline F32x16 sub(F32x16 a, F32x16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline F32x16 max(F32x16 a, F32x16 b) { return {_mm512_maskz_max_ps(kEvery, a.v, b.v)}; }
// w's lanes where x's is above `bound`, else 0.
inline F32x16 where_above(F32x16 x, float bound, F32x16 w) {
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(bound), _CMP_GT_OQ), w.v)};
}
// exp256's operations (simd_rows.inl) on 16 lanes: each lane the same bits.
inline F32x16 exp16(F32x16 in) {
  const __m512 x =
      _mm512_maskz_min_ps(kEvery, _mm512_maskz_max_ps(kEvery, in.v, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_maskz_roundscale_ps(kEvery, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i pow2n = _mm512_maskz_slli_epi32(
      kEvery, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kEvery, n), _mm512_set1_epi32(127)), 23);
  return {_mm512_mul_ps(p, _mm512_castsi512_ps(pow2n))};
}
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
inline F32x16 sub(F32x16 a, F32x16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline F32x16 max(F32x16 a, F32x16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline F32x16 where_above(F32x16 x, float bound, F32x16 w) {
  const __m256 b = _mm256_set1_ps(bound);
  return {_mm256_and_ps(w.lo, _mm256_cmp_ps(x.lo, b, _CMP_GT_OQ)),
          _mm256_and_ps(w.hi, _mm256_cmp_ps(x.hi, b, _CMP_GT_OQ))};
}
inline F32x16 exp16(F32x16 x) { return {exp256(x.lo), exp256(x.hi)}; }
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
// become the weights e^(scale x score - max) (the others 0), state_max and
// state_sum the state's with them; returns e^(old max - new max), what the state's
// values are scaled by (0 for a state of no positions).
// 16 lanes at a time (lanes is a multiple of kKeyBlock), so the AVX-512
// set takes its exponentials 16 to an instruction.
inline float softmax_step(float* s, int first, int end, int lanes, float scale, float& state_max, float& state_sum) {
  for (int p = 0; p < first; ++p) s[p] = -INFINITY;
  for (int p = end; p < lanes; ++p) s[p] = -INFINITY;
  // The largest scaled score is the largest score scaled, to the bit (scale
  // > 0, and rounding keeps order): one pass finds it, the next scales.
  F32x16 top = F32x16::all(-INFINITY);
  for (int p = 0; p < lanes; p += 16) top = max(top, F32x16::load(s + p));
  const float m = std::max(state_max, top.largest() * scale), old = std::exp(state_max - m);
  const F32x16 sc = F32x16::all(scale), mv = F32x16::all(m);
  F32x16 total = F32x16::zero();
  for (int p = 0; p < lanes; p += 16) {
    const F32x16 x = mul(F32x16::load(s + p), sc);
    // exp of -inf is e^-87 here, not 0: the lanes outside the run are masked.
    const F32x16 w = where_above(x, -INFINITY, exp16(sub(x, mv)));
    w.store(s + p);
    total = add(total, w);
  }
  state_max = m, state_sum = state_sum * old + total.total();
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
