// The GGUF file layer: the ggml type table, the reader and the streaming
// writer (round trips of every value type and every tensor type), malformed
// files -- each a one-line InputError naming the field, never a crash and
// never an allocation of a claimed size -- and the scalar block-format
// references that the kernels are tested against.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quant_blocks.h"
#include "runtime/error.h"
#include "tests/temp_path.h"

// Every heap allocation in this binary is counted, so a test can show that
// parsing a vocabulary does not allocate per string. (g++ cannot see that
// these replacements pair malloc with free and warns at every inlined use.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<uint64_t> g_allocations{0};
}
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace tps {
namespace {

using testing::temp_path;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Writes a file with `fill` and returns its bytes.
std::vector<uint8_t> written(const std::function<void(GgufWriter&)>& fill, uint32_t alignment = 32) {
  const std::string path = temp_path("written.gguf");
  {
    GgufWriter w(path, alignment);
    fill(w);
    w.finish();
  }
  std::vector<uint8_t> bytes = slurp(path);
  std::filesystem::remove(path);
  return bytes;
}

// Where a GGUF string (u64 length + bytes) holding s starts.
size_t string_pos(const std::vector<uint8_t>& b, const std::string& s) {
  std::vector<uint8_t> encoded(8 + s.size());
  const uint64_t n = s.size();
  std::memcpy(encoded.data(), &n, 8);
  std::memcpy(encoded.data() + 8, s.data(), s.size());
  auto it = std::search(b.begin(), b.end(), encoded.begin(), encoded.end());
  EXPECT_NE(it, b.end()) << s.substr(0, 40);
  return static_cast<size_t>(it - b.begin());
}

const std::vector<float> kF32Values = {-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

// A small valid file: every scalar type, arrays, and tensors of several types.
std::vector<uint8_t> sample_file() {
  return written([](GgufWriter& w) {
    w.add_u8("t.u8", 200);
    w.add_i8("t.i8", -5);
    w.add_u16("t.u16", 60000);
    w.add_i16("t.i16", -300);
    w.add_u32("t.u32", 4000000000u);
    w.add_i32("t.i32", -7);
    w.add_i32("t.i32pos", 24);
    w.add_u64("t.u64", 1ull << 40);
    w.add_u64("t.u64small", 36);
    w.add_u64("t.u64big", (1ull << 63) + 5);
    w.add_i64("t.i64", -(1ll << 40));
    w.add_f32("t.f32", 1.5f);
    w.add_f64("t.f64", 0.25);
    w.add_bool("t.bool", true);
    w.add_string("t.str", "h\xC3\xA9llo");
    w.add_string_array("t.strs", {"a", "", "ccc"});
    w.add_i32_array("t.i32s", {1, -2, 3});
    w.add_f32_array("t.f32s", {0.5f, -1.0f});
    w.add_tensor("f32", GgmlType::F32, {8, 2});
    w.add_tensor("f16", GgmlType::F16, {4});
    w.add_tensor("bf16", GgmlType::BF16, {4});
    w.add_tensor("q8", GgmlType::Q8_0, {64});
    w.add_tensor("q4", GgmlType::Q4_0, {32});
    w.add_tensor("mx", GgmlType::MXFP4, {32, 3});
    w.begin_data();
    w.write_tensor_data("f32", kF32Values.data(), 24);  // in uneven pieces
    w.write_tensor_data("f32", kF32Values.data() + 6, 40);
    const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7C00}, bf16[4] = {0x3F80, 0xC000, 0, 0x7F80};
    w.write_tensor_data("f16", f16, 8);
    w.write_tensor_data("bf16", bf16, 8);
    std::vector<uint8_t> q8(68, 1), q4(18, 0x98), mx(51, 0x21);
    w.write_tensor_data("q8", q8.data(), q8.size());
    w.write_tensor_data("q4", q4.data(), q4.size());
    w.write_tensor_data("mx", mx.data(), mx.size());
  });
}

TEST(GgmlTypes, TableAndRowBytes) {
  // The spec's table (§3.3).
  struct Row {
    GgmlType type;
    const char* name;
    uint32_t elems, bytes;
  };
  for (const Row& r : {Row{GgmlType::F32, "F32", 1, 4}, Row{GgmlType::F16, "F16", 1, 2},
                       Row{GgmlType::Q4_0, "Q4_0", 32, 18}, Row{GgmlType::Q8_0, "Q8_0", 32, 34},
                       Row{GgmlType::Q4_K, "Q4_K", 256, 144}, Row{GgmlType::Q6_K, "Q6_K", 256, 210},
                       Row{GgmlType::BF16, "BF16", 1, 2}, Row{GgmlType::MXFP4, "MXFP4", 32, 17}}) {
    std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(r.type));
    ASSERT_TRUE(info) << r.name;
    EXPECT_STREQ(info->name, r.name);
    EXPECT_STREQ(type_name(r.type), r.name);
    EXPECT_EQ(info->block_elems, r.elems) << r.name;
    EXPECT_EQ(info->block_bytes, r.bytes) << r.name;
  }
  // Every id the spec names is known; the retired and the newer ones are not.
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id) known += ggml_type_info(id).has_value();
  EXPECT_EQ(known, 32);
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 41u, 42u, 0xFFFFFFFFu})
    EXPECT_FALSE(ggml_type_info(id)) << id;

  EXPECT_EQ(row_bytes(GgmlType::MXFP4, 2880), 90u * 17);
  EXPECT_EQ(row_bytes(GgmlType::F32, 7), 28u);
  try {
    row_bytes(GgmlType::Q8_0, 48);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "a row of 48 Q8_0 elements is not a multiple of its block of 32");
  }
}

TEST(Gguf, RoundTripOfEveryValueType) {
  std::vector<uint8_t> bytes = sample_file();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "sample.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.path(), "sample.gguf");
  EXPECT_EQ(f.file_size(), bytes.size());
  ASSERT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.metadata()[0].key, "t.u8");  // file order

  EXPECT_EQ(f.get_u32("t.u8"), 200u);
  EXPECT_EQ(f.get_u32("t.u16"), 60000u);
  EXPECT_EQ(f.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(f.get_u64("t.u64"), 1ull << 40);
  EXPECT_EQ(f.get_u64("t.u64big"), (1ull << 63) + 5);
  // Integer widths real files use: an i32 or a u64 that fits.
  EXPECT_EQ(f.get_u32("t.i32pos"), 24u);
  EXPECT_EQ(f.get_u32("t.u64small"), 36u);
  EXPECT_EQ(f.find_u64("t.i32pos"), 24u);
  EXPECT_FLOAT_EQ(f.get_f32("t.f32"), 1.5f);
  EXPECT_FLOAT_EQ(f.get_f32("t.f64"), 0.25f);
  EXPECT_EQ(f.find_bool("t.bool"), true);
  EXPECT_EQ(f.get_string("t.str"), "h\xC3\xA9llo");
  EXPECT_EQ(f.find_string("t.str"), "h\xC3\xA9llo");
  EXPECT_EQ(f.get_string_array("t.strs"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_i32_array("t.i32s"), (std::vector<int32_t>{1, -2, 3}));
  ArrayInfo info = f.get_array_info("t.f32s");
  EXPECT_EQ(info.elem_type, GgufType::F32);
  EXPECT_EQ(info.count, 2u);
  EXPECT_FALSE(f.find_u32("no.such.key"));
  EXPECT_FALSE(f.find_u64("no.such.key"));
  EXPECT_FALSE(f.find_f32("no.such.key"));
  EXPECT_FALSE(f.find_string("no.such.key"));
  EXPECT_FALSE(f.find_bool("no.such.key"));
  EXPECT_EQ(f.find("no.such.key"), nullptr);

  // The generic rendering of every type.
  const std::vector<std::pair<std::string, std::string>> texts = {{"t.u8", "200"},
                                                                  {"t.i8", "-5"},
                                                                  {"t.u16", "60000"},
                                                                  {"t.i16", "-300"},
                                                                  {"t.u32", "4000000000"},
                                                                  {"t.i32", "-7"},
                                                                  {"t.u64", "1099511627776"},
                                                                  {"t.i64", "-1099511627776"},
                                                                  {"t.f32", "1.5"},
                                                                  {"t.f64", "0.25"},
                                                                  {"t.bool", "true"},
                                                                  {"t.str", "\"h\xC3\xA9llo\""},
                                                                  {"t.strs", "[string x 3: \"a\", \"\", \"ccc\"]"},
                                                                  {"t.i32s", "[i32 x 3: 1, -2, 3]"},
                                                                  {"t.f32s", "[f32 x 2: 0.5, -1]"}};
  for (const auto& [key, text] : texts) EXPECT_EQ(f.value_text(*f.find(key)), text) << key;
  EXPECT_EQ(f.value_text(*f.find("t.strs"), 2), "[string x 3: \"a\", \"\", ...]");
}

TEST(Gguf, TypedAccessorsNameKeyAndBothTypes) {
  std::vector<uint8_t> bytes = sample_file();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "sample.gguf");
  auto message = [&](const std::function<void()>& call) {
    try {
      call();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message([&] { f.get_string("t.u32"); }), "sample.gguf: metadata key 't.u32' has type u32, expected string");
  EXPECT_EQ(message([&] { f.get_u32("t.str"); }),
            "sample.gguf: metadata key 't.str' has type string, expected an unsigned integer");
  EXPECT_EQ(message([&] { f.get_u32("t.u64"); }),
            "sample.gguf: metadata key 't.u64' is 1099511627776 (expected at most 4294967295)");
  EXPECT_EQ(message([&] { f.get_u32("t.i32"); }),
            "sample.gguf: metadata key 't.i32' is -7 (expected a non-negative integer)");
  EXPECT_EQ(message([&] { f.get_u64("t.i64"); }),
            "sample.gguf: metadata key 't.i64' is -1099511627776 (expected a non-negative integer)");
  EXPECT_EQ(message([&] { f.get_f32("t.u8"); }), "sample.gguf: metadata key 't.u8' has type u8, expected f32");
  EXPECT_EQ(message([&] { f.find_bool("t.u8"); }), "sample.gguf: metadata key 't.u8' has type u8, expected bool");
  EXPECT_EQ(message([&] { f.get_string_array("t.i32s"); }),
            "sample.gguf: metadata key 't.i32s' has type array of i32, expected array of string");
  EXPECT_EQ(message([&] { f.get_i32_array("t.f32s"); }),
            "sample.gguf: metadata key 't.f32s' has type array of f32, expected array of i32");
  EXPECT_EQ(message([&] { f.get_array_info("t.str"); }),
            "sample.gguf: metadata key 't.str' has type string, expected array");
  EXPECT_EQ(message([&] { f.get_u32("general.missing"); }), "sample.gguf: metadata key 'general.missing' is missing");
  EXPECT_EQ(message([&] { f.tensor("absent"); }), "sample.gguf: tensor 'absent' is missing");

  // Empty arrays (the fuzzer found memcpy from an empty one's null data()).
  std::vector<uint8_t> empty = written([](GgufWriter& w) {
    w.add_i32_array("i", {});
    w.add_string_array("s", {});
  });
  GgufFile e = GgufFile::from_memory(empty.data(), empty.size(), "empty.gguf");
  EXPECT_TRUE(e.get_i32_array("i").empty());
  EXPECT_TRUE(e.get_string_array("s").empty());
  EXPECT_EQ(e.value_text(*e.find("i")), "[i32 x 0: ]");

  // An array of u32 reads as i32 only when every element fits.
  std::vector<uint8_t> u32s = written([](GgufWriter& w) { w.add_i32_array("a", {5, -1}); });
  u32s[string_pos(u32s, "a") + 8 + 1 + 4] = 4;  // element type i32 -> u32
  GgufFile g = GgufFile::from_memory(u32s.data(), u32s.size(), "u32s.gguf");
  EXPECT_EQ(message([&] { g.get_i32_array("a"); }),
            "u32s.gguf: metadata key 'a' element 1 is 4294967295 (expected at most 2147483647)");
}

TEST(Gguf, TensorViews) {
  std::vector<uint8_t> bytes = sample_file();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "sample.gguf");
  ASSERT_EQ(f.tensors().size(), 6u);
  EXPECT_EQ(f.tensors()[0].name, "f32");  // file order
  const TensorView& t = f.tensor("f32");
  EXPECT_EQ(f.find_tensor("f32"), &t);
  EXPECT_EQ(f.find_tensor("F32"), nullptr);
  EXPECT_EQ(t.type, GgmlType::F32);
  EXPECT_EQ(t.n_dims, 2);
  EXPECT_EQ(t.ne, (std::array<uint64_t, 4>{8, 2, 1, 1}));
  EXPECT_EQ(t.bytes, 64u);
  EXPECT_EQ(t.row_bytes, 32u);
  EXPECT_EQ(t.rows(), 2u);
  EXPECT_EQ(t.offset, f.data_offset());
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(t.data, bytes.data() + t.offset);  // a view, not a copy
  std::vector<float> v(16);
  std::memcpy(v.data(), t.data, 64);
  EXPECT_EQ(v, kF32Values);
  EXPECT_EQ(f.tensor("q8").row_bytes, 68u);
  EXPECT_EQ(f.tensor("mx").rows(), 3u);
  EXPECT_EQ(f.tensor("mx").bytes, 51u);
  // Offsets are the running sum of sizes padded to the alignment.
  EXPECT_EQ(f.tensor("f16").offset, f.data_offset() + 64);
  EXPECT_EQ(f.tensor("bf16").offset, f.data_offset() + 96);
  EXPECT_EQ(f.tensor("q8").offset, f.data_offset() + 128);
  EXPECT_EQ(f.tensor("q4").offset, f.data_offset() + 224);
  EXPECT_EQ(f.tensor("mx").offset, f.data_offset() + 256);
}

// One tensor of every type in the table, streamed in small uneven chunks.
TEST(Gguf, TensorsOfEveryTypeRoundTrip) {
  std::vector<GgmlType> types;
  for (uint32_t id = 0; id < 64; ++id)
    if (ggml_type_info(id)) types.push_back(static_cast<GgmlType>(id));
  auto pattern = [](size_t tensor, size_t i) { return static_cast<uint8_t>(tensor * 31 + i * 7); };
  std::vector<uint8_t> bytes = written([&](GgufWriter& w) {
    for (GgmlType type : types)
      w.add_tensor(type_name(type), type, {ggml_type_info(static_cast<uint32_t>(type))->block_elems * 2, 3});
    w.begin_data();
    for (size_t k = 0; k < types.size(); ++k) {
      const uint64_t total = row_bytes(types[k], ggml_type_info(static_cast<uint32_t>(types[k]))->block_elems * 2) * 3;
      for (uint64_t at = 0; at < total; at += 13) {
        uint8_t chunk[13];
        const size_t n = std::min<uint64_t>(13, total - at);
        for (size_t i = 0; i < n; ++i) chunk[i] = pattern(k, at + i);
        w.write_tensor_data(type_name(types[k]), chunk, n);
      }
    }
  });
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "types.gguf");
  ASSERT_EQ(f.tensors().size(), 32u);
  uint64_t expected_offset = f.data_offset();
  for (size_t k = 0; k < types.size(); ++k) {
    const TensorView& t = f.tensors()[k];
    const GgmlTypeInfo info = *ggml_type_info(static_cast<uint32_t>(types[k]));
    SCOPED_TRACE(info.name);
    EXPECT_EQ(t.name, info.name);
    EXPECT_EQ(t.type, types[k]);
    EXPECT_EQ(t.ne, (std::array<uint64_t, 4>{info.block_elems * 2, 3, 1, 1}));
    EXPECT_EQ(t.row_bytes, 2u * info.block_bytes);
    EXPECT_EQ(t.bytes, 6u * info.block_bytes);
    EXPECT_EQ(t.offset, expected_offset);
    expected_offset += (t.bytes + 31) / 32 * 32;
    for (size_t i = 0; i < t.bytes; ++i) ASSERT_EQ(t.data[i], pattern(k, i)) << i;
  }
}

// A vocabulary the size of gpt-oss-20b's: parsed without an allocation per
// string, and its strings are views into the file.
TEST(Gguf, LargeStringArraysParseWithoutPerStringAllocation) {
  const size_t n_tokens = 201088, n_merges = 446189;
  std::vector<std::string> tokens(n_tokens), merges(n_merges);
  for (size_t i = 0; i < n_tokens; ++i) tokens[i] = cat("tok", i);
  for (size_t i = 0; i < n_merges; ++i) merges[i] = cat("m", i % 977, " ", i);
  const std::string path = temp_path("vocab.gguf");
  {
    GgufWriter w(path);
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_string_array("tokenizer.ggml.merges", merges);
    w.add_tensor("x", GgmlType::F32, {1});
    w.begin_data();
    const float one = 1;
    w.write_tensor_data("x", &one, 4);
    w.finish();
  }
  const uint64_t before_open = g_allocations.load();
  GgufFile f = GgufFile::open(path);
  const uint64_t before_get = g_allocations.load();
  std::vector<std::string_view> got = f.get_string_array("tokenizer.ggml.tokens");
  const uint64_t after_get = g_allocations.load();
  EXPECT_LT(before_get - before_open, 64u) << "open() allocated per string";
  EXPECT_EQ(after_get - before_get, 1u);  // the vector only
  ASSERT_EQ(got.size(), n_tokens);
  EXPECT_EQ(got[123456], "tok123456");
  EXPECT_GE(reinterpret_cast<const uint8_t*>(got[0].data()), f.mapping().data());
  EXPECT_LT(reinterpret_cast<const uint8_t*>(got[0].data()), f.mapping().data() + f.file_size());
  std::vector<std::string_view> m = f.get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(m.size(), n_merges);
  EXPECT_EQ(m.back(), merges.back());
  std::filesystem::remove(path);
}

// Parses bytes and returns the error message ("" if it parsed). Every value
// is rendered, so a parse that let a bad length through would read past the
// end (and the sanitizer builds would say so).
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
  const std::string err = parse_error(bytes);
  EXPECT_NE(err.find(fragment), std::string::npos) << "expected '" << fragment << "', got: '" << err << "'";
  EXPECT_EQ(err.rfind("bad.gguf: ", 0), 0u) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

std::vector<uint8_t> prefix(const std::vector<uint8_t>& b, size_t n) { return {b.begin(), b.begin() + n}; }

template <typename T>
std::vector<uint8_t> poked(std::vector<uint8_t> b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
  return b;
}

TEST(GgufMalformed, EveryTruncationIsAClearError) {
  const std::vector<uint8_t> good = sample_file();
  GgufFile f = GgufFile::from_memory(good.data(), good.size(), "good.gguf");
  const size_t end_of_data = f.tensor("mx").offset + f.tensor("mx").bytes;
  // At every byte short of the last tensor's end, a one-line error.
  for (size_t n = 0; n < end_of_data; ++n) {
    const std::string err = parse_error(prefix(good, n));
    ASSERT_FALSE(err.empty()) << "a file cut at " << n << " bytes parsed";
    ASSERT_EQ(err.rfind("bad.gguf: ", 0), 0u) << err;
    ASSERT_EQ(err.find('\n'), std::string::npos) << err;
  }
  // The padding after the last tensor is not needed.
  for (size_t n = end_of_data; n <= good.size(); ++n) EXPECT_EQ(parse_error(prefix(good, n)), "");

  // At each section boundary, the field that is cut off is named.
  const size_t infos = string_pos(good, "f32");
  const std::vector<std::pair<size_t, std::string>> boundaries = {
      {0, "truncated: magic needs 4 bytes at offset 0, only 0 remain"},
      {4, "truncated: version needs 4 bytes"},
      {8, "truncated: tensor count needs 8 bytes"},
      {16, "truncated: metadata count needs 8 bytes"},
      {24, "metadata count 18 cannot fit in the 0 bytes left (a record takes at least 14)"},
      {infos, "truncated: tensor 0 name length needs 8 bytes"},
      {infos + 11, "truncated: tensor 'f32' dimension count needs 4 bytes"},
      {infos + 15, "truncated: tensor 'f32' dimension 0 needs 8 bytes"},
      {infos + 31, "truncated: tensor 'f32' type needs 4 bytes"},
      {infos + 35, "truncated: tensor 'f32' offset needs 8 bytes"},
      {f.data_offset() - 1, "truncated: the data section would start at offset"},
      {f.data_offset(), "tensor 'f32' offset 0 + 64 bytes lies past the end of the data section (0 bytes)"},
      {end_of_data - 1, "tensor 'mx' offset 256 + 51 bytes lies past the end of the data section (306 bytes)"}};
  for (const auto& [n, fragment] : boundaries) {
    SCOPED_TRACE(n);
    expect_error(prefix(good, n), fragment);
  }
  // A truncated string inside an array names the element.
  const size_t strs = string_pos(good, "t.strs") + 8 + 6 + 4 + 4 + 8;  // the first element
  expect_error(prefix(good, strs + 9 + 8 + 8 + 1),
               "metadata key 't.strs' element 2 length 3 is larger than the 1 bytes left in the file");

  // Inside the metadata, with few enough keys that the count still fits.
  // Record 0 is bytes 24-70 (length, 20-byte key, type, string length,
  // 7-byte string), record 1 bytes 71-87 (length, 4-byte key, type, u8).
  const std::vector<uint8_t> kv = written([](GgufWriter& w) {
    w.add_string("general.architecture", "gpt-oss");
    w.add_u8("t.u8", 7);
  });
  const std::vector<std::pair<size_t, std::string>> kv_boundaries = {
      {52, "truncated: metadata key 'general.architecture' type needs 4 bytes at offset 52, only 0 remain"},
      {56, "truncated: metadata key 'general.architecture' length needs 8 bytes at offset 56"},
      {64, "metadata key 'general.architecture' length 7 is larger than the 0 bytes left in the file"},
      {71, "truncated: metadata entry 1 key length needs 8 bytes at offset 71, only 0 remain"},
      {87, "truncated: metadata key 't.u8' value needs 1 bytes at offset 87, only 0 remain"}};
  for (const auto& [n, fragment] : kv_boundaries) {
    SCOPED_TRACE(n);
    expect_error(prefix(kv, n), fragment);
  }
  EXPECT_EQ(parse_error(prefix(kv, 88)), "");
}

TEST(GgufMalformed, Headers) {
  const std::vector<uint8_t> good = sample_file();
  expect_error(poked<uint8_t>(good, 0, 'X'), "magic: not a GGUF file");
  for (uint32_t version : {0u, 1u, 4u, 0x7FFFFFFFu})
    expect_error(poked(good, 4, version), cat("GGUF version ", version, " is not supported (expected 2 or 3)"));
  expect_error(poked<uint32_t>(good, 4, 0x03000000), "the file looks big-endian");
  EXPECT_EQ(parse_error(poked<uint32_t>(good, 4, 2)), "");  // version 2 has the same layout

  const uint64_t left = good.size() - 24;
  expect_error(poked<uint64_t>(good, 8, 1ull << 60), "tensor count 1152921504606846976 cannot fit");
  expect_error(poked<uint64_t>(good, 8, left / 33 + 1),
               cat("tensor count ", left / 33 + 1, " cannot fit in the ", left, " bytes left"));
  expect_error(poked<uint64_t>(good, 16, ~0ull), "metadata count 18446744073709551615 cannot fit");
  expect_error(poked<uint64_t>(good, 16, left / 14 + 1), cat("metadata count ", left / 14 + 1, " cannot fit"));
}

TEST(GgufMalformed, Metadata) {
  const std::vector<uint8_t> good = sample_file();
  const size_t str = string_pos(good, "t.str");  // key length, key, type, value length, value
  expect_error(poked<uint64_t>(good, str, 1ull << 62),
               "metadata entry 14 key length 4611686018427387904 is larger than the");
  expect_error(poked<uint64_t>(good, str, 0), "metadata entry 14 key is empty");
  expect_error(poked<uint32_t>(good, str + 13, 13), "metadata key 't.str' value type 13 is unknown (expected 0 to 12)");
  expect_error(poked<uint32_t>(good, str + 13, 0xFFFFFFFF), "value type 4294967295 is unknown");
  expect_error(poked<uint64_t>(good, str + 17, 1ull << 40),
               "metadata key 't.str' length 1099511627776 is larger than the");

  const size_t strs = string_pos(good, "t.strs") + 14;  // value type, element type, count
  expect_error(poked<uint32_t>(good, strs + 4, 9),
               "metadata key 't.strs' array element type is array: nested arrays are not supported");
  expect_error(poked<uint32_t>(good, strs + 4, 77),
               "metadata key 't.strs' array element type 77 is unknown (expected 0 to 12)");
  expect_error(poked<uint64_t>(good, strs + 8, 1ull << 61),
               "metadata key 't.strs' array length 2305843009213693952 cannot fit in the");
  expect_error(poked<uint64_t>(good, strs + 16 + 9, 1ull << 50),  // element 1's length
               "metadata key 't.strs' element 1 length 1125899906842624 is larger than the");
  const size_t i32s = string_pos(good, "t.i32s") + 14;
  expect_error(poked<uint64_t>(good, i32s + 8, 1ull << 62),
               "metadata key 't.i32s' array length 4611686018427387904 cannot fit");

  std::vector<uint8_t> twice = good;  // rename t.i16 to t.u16
  twice[string_pos(good, "t.i16") + 10] = 'u';
  expect_error(twice, "metadata key 't.u16' appears twice");

  expect_error(poked<uint8_t>(good, string_pos(good, "t.bool") + 18, 2),
               "metadata key 't.bool' bool value 2 is not 0 or 1");
}

TEST(GgufMalformed, TensorInfos) {
  const std::vector<uint8_t> good = sample_file();
  const size_t q8 = string_pos(good, "q8") + 10;  // n_dims, dims, type, offset
  expect_error(poked<uint32_t>(good, q8, 0), "tensor 'q8' dimension count 0 is out of range (expected 1 to 4)");
  expect_error(poked<uint32_t>(good, q8, 5), "tensor 'q8' dimension count 5 is out of range (expected 1 to 4)");
  expect_error(poked<uint64_t>(good, q8 + 4, 0), "tensor 'q8' dimension 0 is 0 (expected at least 1)");
  expect_error(poked<uint64_t>(good, q8 + 4, 48),
               "tensor 'q8' dimension 0 (48) is not a multiple of the Q8_0 block size 32");
  for (uint32_t id : {4u, 31u, 40u, 1000u})
    expect_error(poked(good, q8 + 12, id), cat("tensor 'q8' type id ", id, " is unknown or retired"));
  expect_error(poked<uint64_t>(good, q8 + 16, 8), "tensor 'q8' offset 8 is not a multiple of the alignment 32");
  expect_error(poked<uint64_t>(good, q8 + 16, 1ull << 40),
               "tensor 'q8' offset 1099511627776 + 68 bytes lies past the end of the data section");
  expect_error(poked<uint64_t>(good, q8 + 16, ~0ull << 5), "lies past the end of the data section");
  const size_t q4 = string_pos(good, "q4") + 10;
  expect_error(poked<uint64_t>(good, q4 + 16, 256),  // on top of 'mx'
               "tensor 'mx' offset 256 overlaps tensor 'q4' (offset 256, 18 bytes)");
  expect_error(poked<uint64_t>(good, q8 + 16, 32),  // starts inside 'f32'
               "tensor 'q8' offset 32 overlaps tensor 'f32' (offset 0, 64 bytes)");

  const size_t f32 = string_pos(good, "f32") + 11;  // a 2-D tensor
  std::vector<uint8_t> bad = poked<uint64_t>(poked<uint64_t>(good, f32 + 4, 1ull << 40), f32 + 12, 1ull << 40);
  expect_error(bad, "tensor 'f32' shape has more than 2^64 elements (dimension 1 is 1099511627776)");
  // 2^61 F64 elements: the count fits, the bytes do not.
  bad = poked<uint32_t>(poked<uint64_t>(poked<uint64_t>(good, f32 + 4, 1ull << 61), f32 + 12, 1), f32 + 20, 28);
  expect_error(bad, "tensor 'f32' size overflows 64 bits (2305843009213693952 elements of F64)");

  bad = good;  // rename 'mx' to 'q8'
  const size_t mx = string_pos(good, "mx") + 8;
  bad[mx] = 'q', bad[mx + 1] = '8';
  expect_error(bad, "tensor 'q8' appears twice");

  expect_error(poked<uint64_t>(good, string_pos(good, "q4"), 1ull << 50),
               "tensor 4 name length 1125899906842624 is larger than the");
}

TEST(GgufMalformed, LongAndControlCharacterNames) {
  const std::string name(63, 'n');
  std::vector<uint8_t> b = written([&](GgufWriter& w) {
    w.add_tensor(name, GgmlType::F32, {1});
    w.begin_data();
    const float x = 0;
    w.write_tensor_data(name, &x, 4);
  });
  EXPECT_EQ(parse_error(b), "");  // 63 bytes is the most
  // Grow the name to 64 bytes in place: it takes the first byte of n_dims.
  expect_error(poked<uint64_t>(b, string_pos(b, name), 64),
               cat("tensor '", name, "\\x01' name is 64 bytes long (expected at most 63)"));

  // Names from the file are escaped and cut short in messages.
  std::vector<uint8_t> ctl = written([](GgufWriter& w) {
    w.add_u8("line\nbreak", 1);
    w.add_u8("line\nbrea\x01", 1);
  });
  ctl[string_pos(ctl, "line\nbrea\x01") + 17] = 'k';
  expect_error(ctl, "metadata key 'line\\x0abreak' appears twice");
  const std::string huge(100000, 'k');
  std::vector<uint8_t> big = written([&](GgufWriter& w) { w.add_bool(huge, true); });
  big[string_pos(big, huge) + 8 + huge.size() + 4] = 7;
  const std::string err = parse_error(big);
  EXPECT_NE(err.find(cat("metadata key '", std::string(96, 'k'), "...' bool")), std::string::npos)
      << err.substr(0, 200);
  EXPECT_LT(err.size(), 300u);
}

TEST(GgufMalformed, AlignmentKey) {
  for (uint32_t alignment : {64u, 4096u}) {
    std::vector<uint8_t> b = written(
        [](GgufWriter& w) {
          w.add_tensor("a", GgmlType::F32, {3});
          w.add_tensor("b", GgmlType::F32, {5});
          w.begin_data();
          const float x[5] = {1, 2, 3, 4, 5};
          w.write_tensor_data("a", x, 12);
          w.write_tensor_data("b", x, 20);
        },
        alignment);
    GgufFile f = GgufFile::from_memory(b.data(), b.size(), "aligned.gguf");
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    EXPECT_EQ(f.tensor("b").offset, f.data_offset() + alignment);
    // Offsets are checked against the file's alignment, not the default 32.
    const size_t b_info = string_pos(b, "b") + 9;  // n_dims, dim, type, offset
    expect_error(poked<uint64_t>(b, b_info + 16, 32),
                 cat("tensor 'b' offset 32 is not a multiple of the alignment ", alignment));
  }
  for (uint32_t value : {0u, 3u, 96u})
    expect_error(written([&](GgufWriter& w) { w.add_u32("general.alignment", value); }),
                 cat("metadata key 'general.alignment' is ", value, " (expected a power of two)"));
  expect_error(written([](GgufWriter& w) { w.add_string("general.alignment", "32"); }),
               "metadata key 'general.alignment' has type string, expected u32");
  expect_error(written([](GgufWriter& w) { w.add_u64("general.alignment", 32); }),
               "metadata key 'general.alignment' has type u64, expected u32");
}

TEST(GgufMalformed, FilesThatAreNotThere) {
  try {
    GgufFile::open("/no/such/model.gguf");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/no/such/model.gguf: cannot open: No such file or directory");
  }
  try {
    GgufFile::open(std::filesystem::temp_directory_path().string());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(": not a regular file"), std::string::npos) << e.what();
  }
  const std::string empty = temp_path("empty.gguf");
  { std::ofstream create(empty); }
  try {
    GgufFile::open(empty);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), empty + ": truncated: magic needs 4 bytes at offset 0, only 0 remain");
  }
  std::filesystem::remove(empty);
}

// The temporaries a writer of path has beside it (PATH.tmp-*).
int temporaries_of(const std::string& path) {
  const std::filesystem::path p(path);
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path()))
    n += e.path().filename().string().starts_with(p.filename().string() + ".tmp-");
  return n;
}

TEST(GgufWriter, NeverLeavesAHalfFile) {
  const std::string path = temp_path("half.gguf");
  {
    GgufWriter w(path);
    w.add_tensor("a", GgmlType::F32, {4});
    w.begin_data();
    EXPECT_EQ(temporaries_of(path), 1);
    EXPECT_FALSE(std::filesystem::exists(path));
    const float x[2] = {1, 2};
    w.write_tensor_data("a", x, 8);
    try {
      w.finish();
      FAIL();
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "GGUF writer: tensor 'a' is incomplete (8 of 16 bytes)");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(temporaries_of(path), 0);
  {
    GgufWriter w(path);
    w.add_u8("k", 1);
    w.finish();
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_EQ(temporaries_of(path), 0);
    EXPECT_THROW(w.finish(), Error);
  }
  EXPECT_EQ(GgufFile::open(path).get_u32("k"), 1u);  // the destructor left it alone
  std::filesystem::remove(path);
}

TEST(GgufWriter, RefusesWhatTheReaderWouldRefuse) {
  const std::string path = temp_path("misuse.gguf");
  auto error = [&](const std::function<void(GgufWriter&)>& misuse) {
    GgufWriter w(path);
    try {
      misuse(w);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_u8("k", 1);
              w.add_string("k", "x");
            }),
            "GGUF writer: metadata 'k' added twice");
  EXPECT_EQ(error([](GgufWriter& w) { w.add_u8("", 1); }), "GGUF writer: empty metadata key");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_tensor("t", GgmlType::F32, {1});
              w.add_tensor("t", GgmlType::F16, {2});
            }),
            "GGUF writer: tensor 't' added twice");
  EXPECT_EQ(error([](GgufWriter& w) { w.add_tensor(std::string(64, 'x'), GgmlType::F32, {1}); }),
            cat("GGUF writer: tensor '", std::string(64, 'x'), "' name is 64 bytes long (expected at most 63)"));
  EXPECT_EQ(error([](GgufWriter& w) { w.add_tensor("t", GgmlType::F32, {}); }),
            "GGUF writer: tensor 't' has 0 dimensions (expected 1 to 4)");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_tensor("t", GgmlType::F32, {4, 0});
            }),
            "GGUF writer: tensor 't' dimension 1 is 0");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_tensor("t", GgmlType::F64, {1ull << 32, 1ull << 30});
            }),
            "GGUF writer: tensor 't' size overflows 64 bits");
  EXPECT_EQ(error([](GgufWriter& w) { w.add_tensor("t", GgmlType::MXFP4, {48}); }),
            "GGUF writer: tensor 't' dimension 0 (48) is not a multiple of the MXFP4 block size 32");
  EXPECT_EQ(error([](GgufWriter& w) { w.add_tensor("t", static_cast<GgmlType>(4), {1}); }),
            "GGUF writer: tensor 't' has unknown type id 4");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_tensor("a", GgmlType::F32, {2});
              w.add_tensor("b", GgmlType::F32, {2});
              w.begin_data();
              const float x[3] = {};
              w.write_tensor_data("a", x, 4);
              w.write_tensor_data("b", x, 8);
            }),
            "GGUF writer: data for tensor 'b' out of declaration order (tensor 'a' has 4 of its 8 bytes)");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.add_tensor("a", GgmlType::F32, {2});
              w.begin_data();
              const float x[3] = {};
              w.write_tensor_data("a", x, 12);
            }),
            "GGUF writer: tensor 'a' gets more than its 8 bytes");
  EXPECT_EQ(error([](GgufWriter& w) {
              w.begin_data();
              w.add_u8("late", 1);
            }),
            "GGUF writer: metadata 'late' added after begin_data()");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(GgufWriter(path, 24), Error);
}

}  // namespace
}  // namespace tps
