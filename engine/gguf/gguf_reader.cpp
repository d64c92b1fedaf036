#include "engine/gguf/gguf_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "runtime/error.h"

namespace tps {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr size_t kMaxNameBytes = 63;     // ggml: GGML_MAX_NAME 64 including the NUL
// Smallest possible records: a key/value is a key length (8), a key byte, a
// type (4) and a one-byte value; a tensor info a name length (8), a name
// byte, n_dims (4), one dim (8), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
// Up-front reservations stay small whatever a count claims; a real file
// grows past them with the vectors' usual doubling.
constexpr uint64_t kReserveCap = 4096;

[[noreturn]] void fail_in(const std::string& path, const std::string& what) { throw InputError(cat(path, ": ", what)); }

// Fixed size of a value type; 0 for strings and arrays.
uint64_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    default: return 0;
  }
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string_view string_at(const uint8_t* p) {  // a GGUF string whose length was checked
  return {reinterpret_cast<const char*>(p + 8), static_cast<size_t>(load<uint64_t>(p))};
}

// A key or tensor name from the file, quoted for a one-line message: control
// bytes escaped, and cut short when long (a hostile name may be megabytes).
std::string quoted(std::string_view name) {
  constexpr size_t kShown = 96;
  std::string out = "'";
  for (unsigned char ch : name.substr(0, kShown)) {
    if (ch < 0x20 || ch == 0x7F || ch == '\\') {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + (name.size() > kShown ? "...'" : "'");
}

std::string type_text(const MetaEntry& e) {
  if (e.type != GgufType::ARRAY) return gguf_type_name(e.type);
  return cat("array of ", gguf_type_name(e.elem_type));
}

// Reads forward through the bytes, checking every read against the end
// first. Field names are callables rendered only when a check fails, so the
// 650k vocabulary strings of a real file are parsed with no name built and
// nothing allocated per string.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* begin, const uint8_t* end)
      : path_(path), begin_(begin), p_(begin), end_(end) {}
  uint64_t pos() const { return static_cast<uint64_t>(p_ - begin_); }
  uint64_t remaining() const { return static_cast<uint64_t>(end_ - p_); }
  const uint8_t* here() const { return p_; }

  template <typename Name>
  const uint8_t* take(uint64_t n, const Name& name) {
    if (n > remaining())
      fail_in(path_,
              cat("truncated: ", name(), " needs ", n, " bytes at offset ", pos(), ", only ", remaining(), " remain"));
    const uint8_t* p = p_;
    p_ += n;
    return p;
  }
  template <typename T, typename Name>
  T read(const Name& name) {
    return load<T>(take(sizeof(T), name));
  }
  template <typename Name>
  std::string_view string(const Name& name) {
    const uint64_t n = read<uint64_t>([&] { return cat(name(), " length"); });
    if (n > remaining())
      fail_in(path_, cat(name(), " length ", n, " is larger than the ", remaining(), " bytes left in the file"));
    return {reinterpret_cast<const char*>(take(n, name)), static_cast<size_t>(n)};
  }

 private:
  const std::string& path_;
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  const uint32_t i = static_cast<uint32_t>(t);
  return valid_type(i) ? names[i] : "unknown";
}

GgufFile::GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f(std::make_unique<MappedFile>(path));
  f.parse();
  f.open_split_parts();
  return f;
}

std::string split_part_path(const std::string& prefix, int i, int n) {
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", i + 1, n);
  return prefix + suffix;
}

void GgufFile::open_split_parts() {
  const std::optional<uint32_t> count = find_u32("split.count");
  if (!count || *count <= 1) return;
  const uint32_t no = find_u32("split.no").value_or(0);
  // PREFIX-00001-of-0000N.gguf: the prefix is the name less its 20-byte suffix.
  const std::string& name = path();
  const std::string prefix = name.size() > 20 ? name.substr(0, name.size() - 20) : name;
  if (no != 0)
    fail(cat("this is part ", no + 1, " of ", *count, " of a split model: open its first part, ",
             split_part_path(prefix, 0, static_cast<int>(*count))));
  if (split_part_path(prefix, 0, static_cast<int>(*count)) != name)
    fail(cat("split.count is ", *count, ", so the first part's name should end in ",
             split_part_path("", 0, static_cast<int>(*count))));
  const std::optional<uint32_t> total = find_u32("split.tensors.count");
  for (uint32_t i = 1; i < *count; ++i) {
    const std::string part_path = split_part_path(prefix, static_cast<int>(i), static_cast<int>(*count));
    std::error_code ec;
    if (!std::filesystem::exists(part_path, ec))
      fail(cat("part ", i + 1, " of ", *count, " of this split model is missing: ", part_path));
    GgufFile part(std::make_unique<MappedFile>(part_path));
    part.parse();
    if (part.find_u32("split.tensors.count") != total)
      part.fail(cat("split.tensors.count differs from the first part's (", total ? cat(*total) : "missing",
                    "): a part of another model"));
    const std::optional<uint32_t> part_no = part.find_u32("split.no"), part_count = part.find_u32("split.count");
    if (part_count != count || part_no != i)
      part.fail(cat("split.no ", part_no ? cat(*part_no) : "missing", " of split.count ",
                    part_count ? cat(*part_count) : "missing", ", expected split.no ", i, " of ", *count,
                    " (0-based): another part copied over this one, or a part of another split"));
    for (TensorView t : part.tensors_) {
      t.part = static_cast<int>(i);
      if (!tensor_index_.emplace(t.name, tensors_.size()).second)
        part.fail(cat("tensor ", quoted(t.name), " is also in an earlier part"));
      tensors_.push_back(t);
    }
    more_parts_.push_back(std::move(part));
  }
  if (total && *total != tensors_.size())
    fail(cat("split.tensors.count is ", *total, " but the ", *count, " parts hold ", tensors_.size(), " tensors"));
}

GgufFile GgufFile::from_memory(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f(std::make_unique<MappedFile>(data, size, name));
  f.parse();
  return f;
}

void GgufFile::fail(const std::string& what) const { fail_in(path(), what); }

void GgufFile::parse() {
  const uint8_t* base = file_->data();
  Cursor c(path(), base, base + file_->size());

  if (c.read<uint32_t>([] { return "magic"; }) != kMagic)
    fail("magic: not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = c.read<uint32_t>([] { return "version"; });
  if (version_ != 2 && version_ != 3) {
    // A byte-swapped small version has its low 16 bits zero (spec §3.1).
    const bool swapped = version_ != 0 && (version_ & 0xFFFF) == 0;
    fail(cat("GGUF version ", version_, " is not supported (expected 2 or 3",
             swapped ? "; the file looks big-endian, tps reads little-endian files only" : "", ")"));
  }
  const uint64_t n_tensors = c.read<uint64_t>([] { return "tensor count"; });
  const uint64_t n_kv = c.read<uint64_t>([] { return "metadata count"; });
  // Counts that could not fit in the rest of the file are refused before
  // anything is reserved for them.
  if (n_kv > c.remaining() / kMinKvBytes)
    fail(cat("metadata count ", n_kv, " cannot fit in the ", c.remaining(), " bytes left (a record takes at least ",
             kMinKvBytes, ")"));
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    fail(cat("tensor count ", n_tensors, " cannot fit in the ", c.remaining(),
             " bytes left (a tensor info takes at least ", kMinTensorInfoBytes, ")"));

  meta_.reserve(std::min(n_kv, kReserveCap));
  for (uint64_t i = 0; i < n_kv; ++i) {
    MetaEntry e;
    e.key = c.string([&] { return cat("metadata entry ", i, " key"); });
    if (e.key.empty()) fail(cat("metadata entry ", i, " key is empty"));
    const std::string field = cat("metadata key ", quoted(e.key));
    const uint32_t type = c.read<uint32_t>([&] { return field + " type"; });
    if (!valid_type(type)) fail(cat(field, " value type ", type, " is unknown (expected 0 to 12)"));
    e.type = static_cast<GgufType>(type);
    GgufType scalar_type = e.type;  // the type of each value stored
    uint64_t values = 1;
    if (e.type == GgufType::ARRAY) {
      const uint32_t et = c.read<uint32_t>([&] { return field + " array element type"; });
      if (!valid_type(et)) fail(cat(field, " array element type ", et, " is unknown (expected 0 to 12)"));
      e.elem_type = static_cast<GgufType>(et);
      if (e.elem_type == GgufType::ARRAY)
        fail(cat(field, " array element type is array: nested arrays are not supported"));
      e.count = c.read<uint64_t>([&] { return field + " array length"; });
      const uint64_t min_size = e.elem_type == GgufType::STRING ? 8 : fixed_size(e.elem_type);
      if (e.count > c.remaining() / min_size)
        fail(cat(field, " array length ", e.count, " cannot fit in the ", c.remaining(), " bytes left"));
      scalar_type = e.elem_type;
      values = e.count;
    }
    e.value = c.here();
    if (scalar_type == GgufType::STRING) {
      for (uint64_t j = 0; j < values; ++j)
        c.string([&] { return e.type == GgufType::ARRAY ? cat(field, " element ", j) : field; });
    } else {
      // values * size cannot overflow: values was checked against the bytes left.
      c.take(values * fixed_size(scalar_type), [&] { return field + " value"; });
    }
    if (scalar_type == GgufType::BOOL)
      for (uint64_t j = 0; j < values; ++j)
        if (e.value[j] > 1)
          fail(cat(field, e.type == GgufType::ARRAY ? cat(" element ", j) : "", " bool value ", int{e.value[j]},
                   " is not 0 or 1"));
    if (!meta_index_.emplace(e.key, meta_.size()).second) fail(cat(field, " appears twice"));
    meta_.push_back(e);
  }

  if (const MetaEntry* a = find("general.alignment")) {
    if (a->type != GgufType::U32) wrong_type(*a, "u32");
    alignment_ = load<uint32_t>(a->value);
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail(cat("metadata key 'general.alignment' is ", alignment_, " (expected a power of two)"));
  }

  tensors_.reserve(std::min(n_tensors, kReserveCap));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorView t;
    t.name = c.string([&] { return cat("tensor ", i, " name"); });
    const std::string field = cat("tensor ", quoted(t.name));
    if (t.name.size() > kMaxNameBytes)
      fail(cat(field, " name is ", t.name.size(), " bytes long (expected at most ", kMaxNameBytes, ")"));
    const uint32_t n_dims = c.read<uint32_t>([&] { return field + " dimension count"; });
    if (n_dims < 1 || n_dims > 4) fail(cat(field, " dimension count ", n_dims, " is out of range (expected 1 to 4)"));
    t.n_dims = static_cast<int>(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = c.read<uint64_t>([&] { return cat(field, " dimension ", d); });
      if (t.ne[d] == 0) fail(cat(field, " dimension ", d, " is 0 (expected at least 1)"));
      if (__builtin_mul_overflow(elems, t.ne[d], &elems))
        fail(cat(field, " shape has more than 2^64 elements (dimension ", d, " is ", t.ne[d], ")"));
    }
    const uint32_t type = c.read<uint32_t>([&] { return field + " type"; });
    const std::optional<GgmlTypeInfo> info = ggml_type_info(type);
    if (!info) fail(cat(field, " type id ", type, " is unknown or retired"));
    t.type = static_cast<GgmlType>(type);
    if (t.ne[0] % info->block_elems)
      fail(cat(field, " dimension 0 (", t.ne[0], ") is not a multiple of the ", info->name, " block size ",
               info->block_elems));
    // Types of more than one byte per element can overflow where the
    // element count did not.
    if (__builtin_mul_overflow(elems / info->block_elems, uint64_t{info->block_bytes}, &t.bytes))
      fail(cat(field, " size overflows 64 bits (", elems, " elements of ", info->name, ")"));
    t.row_bytes = t.ne[0] / info->block_elems * info->block_bytes;
    t.offset = c.read<uint64_t>([&] { return field + " offset"; });
    if (t.offset % alignment_)
      fail(cat(field, " offset ", t.offset, " is not a multiple of the alignment ", alignment_));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) fail(cat(field, " appears twice"));
    tensors_.push_back(t);
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  parse_tensor_data();
}

// Places every tensor in the data section: inside it, and sharing no bytes
// with another. Offsets are still relative to the data section on entry.
void GgufFile::parse_tensor_data() {
  if (tensors_.empty()) return;
  if (data_offset_ > file_size())
    fail(cat("truncated: the data section would start at offset ", data_offset_, ", past the end of the file (",
             file_size(), " bytes)"));
  const uint64_t data_bytes = file_size() - data_offset_;
  for (const TensorView& t : tensors_)
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(cat("tensor ", quoted(t.name), " offset ", t.offset, " + ", t.bytes,
               " bytes lies past the end of the data section (", data_bytes, " bytes)"));

  std::vector<const TensorView*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const TensorView& t : tensors_) by_offset.push_back(&t);
  // Ties in file order, so the message names the same pair every time.
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorView* a, const TensorView* b) {
    return a->offset != b->offset ? a->offset < b->offset : a < b;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorView& a = *by_offset[i - 1];
    const TensorView& b = *by_offset[i];
    if (a.offset + a.bytes > b.offset)
      fail(cat("tensor ", quoted(b.name), " offset ", b.offset, " overlaps tensor ", quoted(a.name), " (offset ",
               a.offset, ", ", a.bytes, " bytes)"));
  }

  for (TensorView& t : tensors_) {
    t.offset += data_offset_;
    t.data = file_->data() + t.offset;
  }
}

const MetaEntry* GgufFile::find(std::string_view key) const {
  auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &meta_[it->second];
}

const MetaEntry& GgufFile::expect(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) fail(cat("metadata key ", quoted(key), " is missing"));
  return *e;
}

void GgufFile::wrong_type(const MetaEntry& e, const char* expected) const {
  fail(cat("metadata key ", quoted(e.key), " has type ", type_text(e), ", expected ", expected));
}

uint64_t GgufFile::unsigned_value(const MetaEntry& e) const {
  int64_t v;
  switch (e.type) {
    case GgufType::U8: return load<uint8_t>(e.value);
    case GgufType::U16: return load<uint16_t>(e.value);
    case GgufType::U32: return load<uint32_t>(e.value);
    case GgufType::U64: return load<uint64_t>(e.value);
    case GgufType::I8: v = load<int8_t>(e.value); break;
    case GgufType::I16: v = load<int16_t>(e.value); break;
    case GgufType::I32: v = load<int32_t>(e.value); break;
    case GgufType::I64: v = load<int64_t>(e.value); break;
    default: wrong_type(e, "an unsigned integer");
  }
  if (v < 0) fail(cat("metadata key ", quoted(e.key), " is ", v, " (expected a non-negative integer)"));
  return static_cast<uint64_t>(v);
}

std::optional<uint64_t> GgufFile::find_u64(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  return unsigned_value(*e);
}

std::optional<uint32_t> GgufFile::find_u32(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  const uint64_t v = unsigned_value(*e);
  if (v > UINT32_MAX) fail(cat("metadata key ", quoted(key), " is ", v, " (expected at most ", UINT32_MAX, ")"));
  return static_cast<uint32_t>(v);
}

std::optional<float> GgufFile::find_f32(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type == GgufType::F32) return load<float>(e->value);
  if (e->type == GgufType::F64) return static_cast<float>(load<double>(e->value));
  wrong_type(*e, "f32");
}

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type != GgufType::STRING) wrong_type(*e, "string");
  return string_at(e->value);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type != GgufType::BOOL) wrong_type(*e, "bool");
  return *e->value != 0;
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  expect(key);
  return *find_u32(key);
}
uint64_t GgufFile::get_u64(std::string_view key) const {
  expect(key);
  return *find_u64(key);
}
float GgufFile::get_f32(std::string_view key) const {
  expect(key);
  return *find_f32(key);
}
std::string_view GgufFile::get_string(std::string_view key) const {
  expect(key);
  return *find_string(key);
}

ArrayInfo GgufFile::get_array_info(std::string_view key) const {
  const MetaEntry& e = expect(key);
  if (e.type != GgufType::ARRAY) wrong_type(e, "array");
  return {e.elem_type, e.count};
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const MetaEntry& e = expect(key);
  if (e.type != GgufType::ARRAY || e.elem_type != GgufType::STRING) wrong_type(e, "array of string");
  std::vector<std::string_view> out;
  out.reserve(e.count);  // count was walked element by element when parsed
  const uint8_t* p = e.value;
  for (uint64_t i = 0; i < e.count; ++i) {
    out.push_back(string_at(p));
    p += 8 + out.back().size();
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const MetaEntry& e = expect(key);
  if (e.type != GgufType::ARRAY || (e.elem_type != GgufType::I32 && e.elem_type != GgufType::U32))
    wrong_type(e, "array of i32");
  std::vector<int32_t> out(e.count);
  if (e.count) std::memcpy(out.data(), e.value, e.count * 4);  // an empty vector's data() may be null
  if (e.elem_type == GgufType::U32)
    for (uint64_t i = 0; i < e.count; ++i)
      if (out[i] < 0)
        fail(cat("metadata key ", quoted(key), " element ", i, " is ", static_cast<uint32_t>(out[i]),
                 " (expected at most ", INT32_MAX, ")"));
  return out;
}

std::string GgufFile::value_text(const MetaEntry& e, size_t max_elems) const {
  auto scalar = [&](GgufType t, const uint8_t* p) -> std::string {
    switch (t) {
      case GgufType::U8: return std::to_string(load<uint8_t>(p));
      case GgufType::I8: return std::to_string(load<int8_t>(p));
      case GgufType::U16: return std::to_string(load<uint16_t>(p));
      case GgufType::I16: return std::to_string(load<int16_t>(p));
      case GgufType::U32: return std::to_string(load<uint32_t>(p));
      case GgufType::I32: return std::to_string(load<int32_t>(p));
      case GgufType::U64: return std::to_string(load<uint64_t>(p));
      case GgufType::I64: return std::to_string(load<int64_t>(p));
      case GgufType::F32: return cat(load<float>(p));
      case GgufType::F64: return cat(load<double>(p));
      case GgufType::BOOL: return *p ? "true" : "false";
      case GgufType::STRING: return cat('"', string_at(p), '"');
      case GgufType::ARRAY: break;  // never an element: nested arrays were refused
    }
    return "?";
  };
  if (e.type != GgufType::ARRAY) return scalar(e.type, e.value);
  std::string s = cat("[", gguf_type_name(e.elem_type), " x ", e.count, ": ");
  const uint8_t* p = e.value;
  for (uint64_t i = 0; i < e.count && i < max_elems; ++i) {
    s += cat(i ? ", " : "", scalar(e.elem_type, p));
    p += e.elem_type == GgufType::STRING ? 8 + load<uint64_t>(p) : fixed_size(e.elem_type);
  }
  return s + (e.count > max_elems ? ", ...]" : "]");
}

const TensorView* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& GgufFile::tensor(std::string_view name) const {
  const TensorView* t = find_tensor(name);
  if (!t) fail(cat("tensor ", quoted(name), " is missing"));
  return *t;
}

}  // namespace tps
