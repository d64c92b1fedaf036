// The GGUF reader and writer: round trips of every value type and tensor
// type, and malformed files -- each a one-line InputError naming the field,
// never a crash and never an allocation of a claimed size.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/gguf_reader.h"
#include "engine/gguf_writer.h"
#include "engine/quant_blocks.h"
#include "runtime/error.h"

namespace tps {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / cat("tps-gguf-", getpid(), "-", name)).string();
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A small valid file: every scalar type, arrays, and tensors of several types.
std::vector<uint8_t> sample_file() {
  std::string path = temp_path("sample.gguf");
  {
    GgufWriter w(path);
    w.add_u8("t.u8", 200);
    w.add_i8("t.i8", -5);
    w.add_u16("t.u16", 60000);
    w.add_i16("t.i16", -300);
    w.add_u32("t.u32", 4000000000u);
    w.add_i32("t.i32", -7);
    w.add_u64("t.u64", 1ull << 40);
    w.add_i64("t.i64", -(1ll << 40));
    w.add_f32("t.f32", 1.5f);
    w.add_f64("t.f64", 0.25);
    w.add_bool("t.bool", true);
    w.add_string("t.str", "héllo");
    w.add_string_array("t.strs", {"a", "", "ccc"});
    w.add_i32_array("t.i32s", {1, -2, 3});
    w.add_tensor("f32", GgmlType::F32, {8, 2});
    w.add_tensor("q8", GgmlType::Q8_0, {64});
    w.add_tensor("mx", GgmlType::MXFP4, {32, 3});
    w.begin_data();
    std::vector<float> f(16);
    for (int i = 0; i < 16; ++i) f[i] = static_cast<float>(i) - 3;
    w.write_tensor_data("f32", f.data(), 32);  // in two pieces
    w.write_tensor_data("f32", f.data() + 8, 32);
    std::vector<uint8_t> q8(68, 1), mx(51, 0x21);
    w.write_tensor_data("q8", q8.data(), q8.size());
    w.write_tensor_data("mx", mx.data(), mx.size());
    w.finish();
  }
  std::vector<uint8_t> bytes = slurp(path);
  std::filesystem::remove(path);
  return bytes;
}

TEST(Gguf, RoundTripOfEveryType) {
  std::vector<uint8_t> bytes = sample_file();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "sample.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_u32("t.u8"), 200u);
  EXPECT_EQ(f.get_u32("t.u16"), 60000u);
  EXPECT_EQ(f.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_u64("t.u64"), 1ull << 40);
  EXPECT_THROW(f.get_u32("t.u64"), InputError);  // does not fit
  EXPECT_THROW(f.get_u32("t.i32"), InputError);  // negative
  EXPECT_FLOAT_EQ(f.get_f32("t.f32"), 1.5f);
  EXPECT_FLOAT_EQ(f.get_f32("t.f64"), 0.25f);
  EXPECT_EQ(f.find_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), "héllo");
  EXPECT_EQ(f.get_string_array("t.strs"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_i32_array("t.i32s"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.value_text(*f.find("t.i8")), "-5");
  EXPECT_EQ(f.value_text(*f.find("t.strs")), "[string x 3: \"a\", \"\", \"ccc\"]");
  EXPECT_FALSE(f.find_u32("no.such.key"));
  try {
    f.get_string("t.u32");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "sample.gguf: metadata key 't.u32' has type u32, expected string");
  }
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorView& t = f.tensor("f32");
  EXPECT_EQ(t.ne[0], 8u);
  EXPECT_EQ(t.ne[1], 2u);
  EXPECT_EQ(t.bytes, 64u);
  EXPECT_EQ(t.offset % 32, 0u);
  float v[16];
  std::memcpy(v, t.data, 64);
  EXPECT_EQ(v[15], 12.0f);
  EXPECT_EQ(f.tensor("q8").row_bytes, 68u);
  EXPECT_EQ(f.tensor("mx").rows(), 3u);
  EXPECT_THROW(f.tensor("absent"), InputError);
}

// Parses bytes and returns the error message ("" if it parsed).
std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "bad.gguf");
    for (const MetaEntry& e : f.metadata()) f.value_text(e, 1000);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& fragment) {
  std::string err = parse_error(bytes);
  EXPECT_NE(err.find(fragment), std::string::npos) << "got: '" << err << "'";
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST(Gguf, EveryTruncationIsAClearError) {
  std::vector<uint8_t> good = sample_file();
  // Every prefix shorter than the end of the last tensor fails, naming a field.
  for (size_t n = 0; n + 32 < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    std::string err = parse_error(cut);
    ASSERT_FALSE(err.empty()) << "a file cut at " << n << " bytes parsed";
    EXPECT_EQ(err.rfind("bad.gguf: ", 0), 0u) << err;
  }
}

// Byte offsets inside the sample file, found by searching for known bytes.
size_t find_bytes(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  EXPECT_NE(it, b.end()) << s;
  return static_cast<size_t>(it - b.begin());
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

TEST(Gguf, MalformedHeaders) {
  std::vector<uint8_t> good = sample_file();
  auto bad = good;
  bad[0] = 'X';
  expect_error(bad, "not a GGUF file");
  for (uint32_t version : {0u, 1u, 4u}) {
    bad = good;
    poke(bad, 4, version);
    expect_error(bad, cat("GGUF version ", version, " is not supported"));
  }
  bad = good;
  poke<uint64_t>(bad, 8, 1ull << 60);
  expect_error(bad, "tensor count 1152921504606846976 cannot fit");
  bad = good;
  poke<uint64_t>(bad, 16, ~0ull);
  expect_error(bad, "metadata count 18446744073709551615 cannot fit");
}

TEST(Gguf, MalformedMetadata) {
  std::vector<uint8_t> good = sample_file();
  size_t key = find_bytes(good, "t.str") - 8;  // the key's length field
  auto bad = good;
  poke<uint64_t>(bad, key, 1ull << 62);
  expect_error(bad, "metadata entry 11 key length 4611686018427387904 is larger than");
  bad = good;
  poke<uint32_t>(bad, key + 8 + 5, 13);  // value type
  expect_error(bad, "metadata key 't.str': unknown value type 13");
  bad = good;
  poke<uint64_t>(bad, key + 8 + 5 + 4, 1ull << 40);  // string length
  expect_error(bad, "metadata key 't.str' length 1099511627776 is larger than");

  size_t arr = find_bytes(good, "t.strs") + 6;  // value type, element type, count
  bad = good;
  poke<uint32_t>(bad, arr + 4, 9);
  expect_error(bad, "metadata key 't.strs': nested arrays are not supported");
  bad = good;
  poke<uint32_t>(bad, arr + 4, 77);
  expect_error(bad, "metadata key 't.strs': unknown array element type 77");
  bad = good;
  poke<uint64_t>(bad, arr + 8, 1ull << 61);
  expect_error(bad, "metadata key 't.strs' array length 2305843009213693952 cannot fit");

  bad = good;  // make two keys equal: "t.u16" -> "t.u8\0"? rename t.i16 to t.u16
  size_t i16 = find_bytes(good, "t.i16");
  bad[i16 + 2] = 'u';
  expect_error(bad, "metadata key 't.u16' appears twice");

  bad = good;
  size_t b = find_bytes(good, "t.bool") + 6 + 4;
  bad[b] = 2;
  expect_error(bad, "metadata key 't.bool': bool value 2");
}

TEST(Gguf, MalformedTensorInfos) {
  std::vector<uint8_t> good = sample_file();
  size_t info = find_bytes(good, "q8\x01") + 2;  // after the name: n_dims, dims, type, offset
  auto bad = good;
  poke<uint32_t>(bad, info, 0);
  expect_error(bad, "tensor 'q8' has 0 dimensions (expected 1 to 4)");
  bad = good;
  poke<uint32_t>(bad, info, 5);
  expect_error(bad, "tensor 'q8' has 5 dimensions");
  bad = good;
  poke<uint64_t>(bad, info + 4, 0);
  expect_error(bad, "tensor 'q8' dimension 0 is 0");
  bad = good;
  poke<uint64_t>(bad, info + 4, 48);
  expect_error(bad, "tensor 'q8' dimension 0 (48) is not a multiple of the Q8_0 block size 32");
  bad = good;
  poke<uint32_t>(bad, info + 12, 4);  // a retired type id
  expect_error(bad, "tensor 'q8' has unknown or retired type id 4");
  bad = good;
  poke<uint32_t>(bad, info + 12, 1000);
  expect_error(bad, "tensor 'q8' has unknown or retired type id 1000");
  bad = good;
  poke<uint64_t>(bad, info + 16, 8);
  expect_error(bad, "tensor 'q8' offset 8 is not a multiple of the alignment 32");
  bad = good;
  poke<uint64_t>(bad, info + 16, 1ull << 40);
  expect_error(bad, "tensor 'q8' data [1099511627776, ");
  bad = good;
  poke<uint64_t>(bad, info + 16, 0);  // on top of 'f32'
  expect_error(bad, "overlaps tensor");

  size_t f32 = find_bytes(good, "f32\x02") + 3;  // a 2-D tensor: make its shape overflow
  bad = good;
  poke<uint64_t>(bad, f32 + 4, 1ull << 40);
  poke<uint64_t>(bad, f32 + 12, 1ull << 40);
  expect_error(bad, "tensor 'f32' shape overflows 64 bits");

  bad = good;  // rename 'mx' to 'q8'
  size_t mx = find_bytes(good, "mx\x02");
  bad[mx] = 'q', bad[mx + 1] = '8';
  expect_error(bad, "tensor 'q8' appears twice");
}

TEST(Gguf, AlignmentKey) {
  for (uint32_t alignment : {64u, 4096u}) {
    std::string path = temp_path("aligned.gguf");
    GgufWriter w(path, alignment);
    w.add_tensor("a", GgmlType::F32, {3});
    w.add_tensor("b", GgmlType::F32, {5});
    w.begin_data();
    float x[5] = {1, 2, 3, 4, 5};
    w.write_tensor_data("a", x, 12);
    w.write_tensor_data("b", x, 20);
    w.finish();
    GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.tensor("b").offset % alignment, 0u);
    std::filesystem::remove(path);
  }
  std::string path = temp_path("badalign.gguf");
  for (auto [value, fragment] : std::vector<std::pair<uint32_t, std::string>>{
           {0, "general.alignment is 0 (expected a power of two)"},
           {3, "general.alignment is 3 (expected a power of two)"}}) {
    {
      GgufWriter w(path);
      w.add_u32("general.alignment", value);
      w.finish();
    }
    std::vector<uint8_t> b = slurp(path);
    expect_error(b, fragment);
  }
  {
    GgufWriter w(path);
    w.add_string("general.alignment", "32");
    w.finish();
  }
  expect_error(slurp(path), "metadata key 'general.alignment' has type string, expected u32");
  std::filesystem::remove(path);
}

TEST(Gguf, MissingFileAndNotAFile) {
  try {
    GgufFile::open("/no/such/model.gguf");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/model.gguf: cannot open"), std::string::npos);
  }
  EXPECT_THROW(GgufFile::open("/tmp"), InputError);
}

TEST(Gguf, WriterNeverLeavesAHalfFile) {
  std::string path = temp_path("half.gguf");
  {
    GgufWriter w(path);
    w.add_tensor("a", GgmlType::F32, {4});
    w.begin_data();
    float x[2] = {1, 2};
    w.write_tensor_data("a", x, 8);
    EXPECT_THROW(w.finish(), Error);  // incomplete tensor
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos) << entry.path();
}

TEST(QuantBlocks, HalfAndBfloatConversions) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest denormal
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7C00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Every half round-trips through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaNs
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << h;
  }
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie to even
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
}

TEST(QuantBlocks, Mxfp4LayoutAndScale) {
  BlockMxfp4 b{};
  b.e = 128;  // 2^1
  b.qs[0] = 0x71;  // element 0: code 1 (0.5), element 16: code 7 (6)
  b.qs[15] = 0xF9;  // element 15: code 9 (-0.5), element 31: code 15 (-6)
  float out[32];
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<uint8_t*>(&b), out, 32);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[16], 12.0f);
  EXPECT_EQ(out[15], -1.0f);
  EXPECT_EQ(out[31], -12.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(e8m0_to_fp32(127), 1.0f);
  EXPECT_EQ(e8m0_to_fp32(0), std::ldexp(1.0f, -127));
  // Quantizing values that are exactly representable gives them back.
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = 0.25f * kMxfp4DoubledValues[i % 16];
  BlockMxfp4 q;
  quantize_row_mxfp4(x, &q, 32);
  dequantize_row(GgmlType::MXFP4, reinterpret_cast<uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], x[i]) << i;
}

TEST(QuantBlocks, Q8_0) {
  float x[32], out[32];
  for (int i = 0; i < 32; ++i) x[i] = (i - 16) * 0.1f;
  BlockQ8_0 q;
  quantize_row_q8_0(x, &q, 32);
  EXPECT_EQ(q.qs[0], -127);  // the largest magnitude maps to 127
  dequantize_row(GgmlType::Q8_0, reinterpret_cast<uint8_t*>(&q), out, 32);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(out[i], x[i], 1.6f / 127 / 2 + 1e-3f);
  EXPECT_THROW(dequantize_row(GgmlType::Q6_K, nullptr, out, 256), InputError);
}

}  // namespace
}  // namespace tps
