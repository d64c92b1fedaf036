#include "engine/gguf_reader.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "runtime/error.h"

namespace tps {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr size_t kMaxNameBytes = 63;     // ggml: GGML_MAX_NAME 64 including the NUL

// Fixed size of a value type; 0 for strings and arrays.
uint64_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Reads forward through the file; every read is checked against its end.
class Cursor {
 public:
  Cursor(const uint8_t* begin, const uint8_t* end,
         const std::function<void(const std::string&)>& fail)
      : begin_(begin), p_(begin), end_(end), fail_(fail) {}
  uint64_t pos() const { return static_cast<uint64_t>(p_ - begin_); }
  uint64_t remaining() const { return static_cast<uint64_t>(end_ - p_); }
  const uint8_t* here() const { return p_; }

  const uint8_t* take(uint64_t n, const std::string& field) {
    if (n > remaining())
      fail_(cat("truncated: ", field, " needs ", n, " bytes at offset ", pos(), ", only ",
                remaining(), " remain"));
    const uint8_t* p = p_;
    p_ += n;
    return p;
  }
  template <typename T>
  T read(const std::string& field) {
    return load<T>(take(sizeof(T), field));
  }
  std::string_view string(const std::string& field) {
    uint64_t n = read<uint64_t>(field + " length");
    if (n > remaining())
      fail_(cat(field, " length ", n, " is larger than the ", remaining(),
                " bytes left in the file"));
    return {reinterpret_cast<const char*>(take(n, field)), static_cast<size_t>(n)};
  }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  const std::function<void(const std::string&)>& fail_;
};

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  uint32_t i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "unknown";
}

GgufFile::GgufFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f(std::make_unique<MappedFile>(path));
  f.parse();
  return f;
}

GgufFile GgufFile::from_memory(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f(std::make_unique<MappedFile>(data, size, name));
  f.parse();
  return f;
}

void GgufFile::fail(const std::string& what) const { throw InputError(cat(path(), ": ", what)); }

void GgufFile::parse() {
  std::function<void(const std::string&)> failer = [this](const std::string& w) { fail(w); };
  const uint8_t* base = file_->data();
  Cursor c(base, base + file_->size(), failer);

  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail(cat("GGUF version ", version_, " is not supported (expected 2 or 3)"));
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest possible records: a key/value is 8 + 1 + 4 + 1 bytes, a tensor
  // info 8 + 1 + 4 + 8 + 4 + 8. Counts that could not fit are refused before
  // anything is reserved for them.
  if (n_kv > c.remaining() / 14)
    fail(cat("metadata count ", n_kv, " cannot fit in the ", c.remaining(), " bytes left"));
  if (n_tensors > c.remaining() / 33)
    fail(cat("tensor count ", n_tensors, " cannot fit in the ", c.remaining(), " bytes left"));

  meta_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = cat("metadata entry ", i);
    MetaEntry e;
    e.key = c.string(where + " key");
    if (e.key.empty()) fail(cat(where, ": empty key"));
    const std::string field = cat("metadata key '", e.key, "'");
    uint32_t type = c.read<uint32_t>(field + " type");
    if (!valid_type(type)) fail(cat(field, ": unknown value type ", type, " (expected 0..12)"));
    e.type = static_cast<GgufType>(type);
    if (e.type == GgufType::ARRAY) {
      uint32_t et = c.read<uint32_t>(field + " array element type");
      if (!valid_type(et)) fail(cat(field, ": unknown array element type ", et));
      e.elem_type = static_cast<GgufType>(et);
      if (e.elem_type == GgufType::ARRAY) fail(cat(field, ": nested arrays are not supported"));
      e.count = c.read<uint64_t>(field + " array length");
      uint64_t min_size = e.elem_type == GgufType::STRING ? 8 : fixed_size(e.elem_type);
      if (e.count > c.remaining() / min_size)
        fail(cat(field, " array length ", e.count, " cannot fit in the ", c.remaining(),
                 " bytes left"));
      e.value = c.here();
      if (e.elem_type == GgufType::STRING) {
        for (uint64_t j = 0; j < e.count; ++j) c.string(cat(field, " element ", j));
      } else {
        c.take(e.count * min_size, field + " array data");
      }
    } else {
      e.value = c.here();
      if (e.type == GgufType::STRING) c.string(field);
      else c.take(fixed_size(e.type), field + " value");
      if (e.type == GgufType::BOOL && *e.value > 1)
        fail(cat(field, ": bool value ", int(*e.value), " (expected 0 or 1)"));
    }
    if (!meta_index_.emplace(e.key, meta_.size()).second) fail(cat(field, " appears twice"));
    meta_.push_back(e);
  }

  if (const MetaEntry* a = find("general.alignment")) {
    if (a->type != GgufType::U32)
      fail(cat("metadata key 'general.alignment' has type ", gguf_type_name(a->type),
               ", expected u32"));
    alignment_ = load<uint32_t>(a->value);
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail(cat("general.alignment is ", alignment_, " (expected a power of two)"));
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorView t;
    t.name = c.string(cat("tensor ", i, " name"));
    const std::string field = cat("tensor '", t.name, "'");
    if (t.name.size() > kMaxNameBytes)
      fail(cat(field, ": name is ", t.name.size(), " bytes (at most ", kMaxNameBytes, ")"));
    uint32_t n_dims = c.read<uint32_t>(field + " dimension count");
    if (n_dims < 1 || n_dims > 4) fail(cat(field, " has ", n_dims, " dimensions (expected 1 to 4)"));
    t.n_dims = static_cast<int>(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      t.ne[d] = c.read<uint64_t>(cat(field, " dimension ", d));
      if (t.ne[d] == 0) fail(cat(field, " dimension ", d, " is 0"));
      if (__builtin_mul_overflow(elems, t.ne[d], &elems) || elems > (uint64_t{1} << 62))
        fail(cat(field, " shape overflows 64 bits"));
    }
    uint32_t type = c.read<uint32_t>(field + " type");
    auto info = ggml_type_info(type);
    if (!info) fail(cat(field, " has unknown or retired type id ", type));
    t.type = static_cast<GgmlType>(type);
    if (t.ne[0] % info->block_elems)
      fail(cat(field, " dimension 0 (", t.ne[0], ") is not a multiple of the ", info->name,
               " block size ", info->block_elems));
    t.row_bytes = t.ne[0] / info->block_elems * info->block_bytes;
    t.bytes = t.row_bytes * (elems / t.ne[0]);  // elems < 2^62: no overflow
    uint64_t offset = c.read<uint64_t>(field + " offset");
    if (offset % alignment_)
      fail(cat(field, " offset ", offset, " is not a multiple of the alignment ", alignment_));
    t.offset = offset;  // relative until the data section is known
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) fail(cat(field, " appears twice"));
    tensors_.push_back(t);
  }

  uint64_t end_of_infos = c.pos();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > file_size() && !tensors_.empty())
    fail(cat("truncated: the data section would start at ", data_offset_, ", past the end (",
             file_size(), ")"));
  const uint64_t data_bytes = file_size() > data_offset_ ? file_size() - data_offset_ : 0;
  for (TensorView& t : tensors_) {
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      fail(cat("tensor '", t.name, "' data [", t.offset, ", ", t.offset + t.bytes,
               ") lies past the end of the data section (", data_bytes, " bytes)"));
    t.offset += data_offset_;
    t.data = base + t.offset;
  }
  // No two tensors may share bytes.
  std::vector<const TensorView*> by_offset;
  for (const TensorView& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorView* a, const TensorView* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->bytes > by_offset[i]->offset)
      fail(cat("tensor '", by_offset[i]->name, "' overlaps tensor '", by_offset[i - 1]->name,
               "'"));
}

const MetaEntry* GgufFile::find(std::string_view key) const {
  auto it = meta_index_.find(key);
  return it == meta_index_.end() ? nullptr : &meta_[it->second];
}

const MetaEntry& GgufFile::expect(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) fail(cat("metadata key '", key, "' is missing"));
  return *e;
}

int64_t GgufFile::integer(const MetaEntry& e) const {
  switch (e.type) {
    case GgufType::U8: return load<uint8_t>(e.value);
    case GgufType::I8: return load<int8_t>(e.value);
    case GgufType::U16: return load<uint16_t>(e.value);
    case GgufType::I16: return load<int16_t>(e.value);
    case GgufType::U32: return load<uint32_t>(e.value);
    case GgufType::I32: return load<int32_t>(e.value);
    case GgufType::I64: return load<int64_t>(e.value);
    case GgufType::U64: {
      uint64_t v = load<uint64_t>(e.value);
      if (v > static_cast<uint64_t>(INT64_MAX)) fail(cat("metadata key '", e.key, "' is ", v, ", too large"));
      return static_cast<int64_t>(v);
    }
    default:
      fail(cat("metadata key '", e.key, "' has type ", gguf_type_name(e.type),
               ", expected an integer"));
  }
}

std::optional<uint64_t> GgufFile::find_u64(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  int64_t v = integer(*e);
  if (v < 0) fail(cat("metadata key '", key, "' is ", v, " (expected a non-negative integer)"));
  return static_cast<uint64_t>(v);
}

std::optional<uint32_t> GgufFile::find_u32(std::string_view key) const {
  std::optional<uint64_t> v = find_u64(key);
  if (v && *v > UINT32_MAX) fail(cat("metadata key '", key, "' is ", *v, " (expected < 2^32)"));
  if (!v) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

std::optional<float> GgufFile::find_f32(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type == GgufType::F32) return load<float>(e->value);
  if (e->type == GgufType::F64) return static_cast<float>(load<double>(e->value));
  fail(cat("metadata key '", key, "' has type ", gguf_type_name(e->type), ", expected f32"));
}

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type != GgufType::STRING)
    fail(cat("metadata key '", key, "' has type ", gguf_type_name(e->type), ", expected string"));
  return std::string_view(reinterpret_cast<const char*>(e->value + 8), load<uint64_t>(e->value));
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const MetaEntry* e = find(key);
  if (!e) return std::nullopt;
  if (e->type != GgufType::BOOL)
    fail(cat("metadata key '", key, "' has type ", gguf_type_name(e->type), ", expected bool"));
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

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const MetaEntry& e = expect(key);
  if (e.type != GgufType::ARRAY || e.elem_type != GgufType::STRING)
    fail(cat("metadata key '", key, "' is not an array of strings"));
  std::vector<std::string_view> out;
  out.reserve(e.count);
  const uint8_t* p = e.value;  // lengths were checked when the file was parsed
  for (uint64_t i = 0; i < e.count; ++i) {
    uint64_t n = load<uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), n);
    p += 8 + n;
  }
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const MetaEntry& e = expect(key);
  if (e.type != GgufType::ARRAY || (e.elem_type != GgufType::I32 && e.elem_type != GgufType::U32))
    fail(cat("metadata key '", key, "' is not an array of i32"));
  std::vector<int32_t> out(e.count);
  std::memcpy(out.data(), e.value, e.count * 4);
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
      case GgufType::STRING:
        return cat('"', std::string_view(reinterpret_cast<const char*>(p + 8), load<uint64_t>(p)), '"');
      default: return "?";
    }
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
  if (!t) fail(cat("tensor '", name, "' is missing"));
  return *t;
}

}  // namespace tps
