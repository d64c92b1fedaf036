#include "engine/gguf/gguf_writer.h"

#include <optional>

#include "runtime/error.h"

namespace tps {
namespace {
constexpr uint32_t kTypeString = 8, kTypeArray = 9;
}

GgufWriter::GgufWriter(std::string path, uint32_t alignment, const std::vector<std::string>& inputs)
    : path_(std::move(path)), alignment_(alignment) {
  if (alignment_ == 0 || (alignment_ & (alignment_ - 1)))
    throw Error(cat("GGUF alignment ", alignment_, " is not a power of two"));
  out_ = std::make_unique<OutputFile>(path_, inputs);
  if (alignment_ != 32) add_u32("general.alignment", alignment_);
}

GgufWriter::~GgufWriter() = default;  // an unfinished file's temporary goes with out_

void GgufWriter::put(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  meta_.insert(meta_.end(), b, b + n);
}

void GgufWriter::key(std::string_view k, uint32_t type) {
  if (data_started_) throw Error(cat("GGUF writer: metadata '", k, "' added after begin_data()"));
  // The reader refuses what ggml refuses; so does the writer, at the call
  // that would cause it.
  if (k.empty()) throw Error("GGUF writer: empty metadata key");
  if (!keys_.emplace(k).second) throw Error(cat("GGUF writer: metadata '", k, "' added twice"));
  uint64_t n = k.size();
  put(&n, 8);
  put(k.data(), n);
  put(&type, 4);
  ++n_kv_;
}

#define TPS_GGUF_SCALAR(fn, T, id)               \
  void GgufWriter::fn(std::string_view k, T v) { \
    key(k, id);                                  \
    put(&v, sizeof v);                           \
  }
TPS_GGUF_SCALAR(add_u8, uint8_t, 0)
TPS_GGUF_SCALAR(add_i8, int8_t, 1)
TPS_GGUF_SCALAR(add_u16, uint16_t, 2)
TPS_GGUF_SCALAR(add_i16, int16_t, 3)
TPS_GGUF_SCALAR(add_u32, uint32_t, 4)
TPS_GGUF_SCALAR(add_i32, int32_t, 5)
TPS_GGUF_SCALAR(add_f32, float, 6)
TPS_GGUF_SCALAR(add_u64, uint64_t, 10)
TPS_GGUF_SCALAR(add_i64, int64_t, 11)
TPS_GGUF_SCALAR(add_f64, double, 12)
#undef TPS_GGUF_SCALAR

void GgufWriter::add_bool(std::string_view k, bool v) {
  key(k, 7);
  uint8_t b = v ? 1 : 0;
  put(&b, 1);
}

void GgufWriter::add_string(std::string_view k, std::string_view v) {
  key(k, kTypeString);
  uint64_t n = v.size();
  put(&n, 8);
  put(v.data(), n);
}

void GgufWriter::add_string_array(std::string_view k, const std::vector<std::string>& v) {
  key(k, kTypeArray);
  uint32_t t = kTypeString;
  uint64_t count = v.size();
  put(&t, 4);
  put(&count, 8);
  for (const std::string& s : v) {
    uint64_t n = s.size();
    put(&n, 8);
    put(s.data(), n);
  }
}

void GgufWriter::add_numeric_array(std::string_view k, uint32_t elem_type, const void* data, uint64_t count,
                                   size_t elem_bytes) {
  key(k, kTypeArray);
  put(&elem_type, 4);
  put(&count, 8);
  put(data, count * elem_bytes);
}

void GgufWriter::add_i32_array(std::string_view k, const std::vector<int32_t>& v) {
  add_numeric_array(k, 5, v.data(), v.size(), 4);
}

void GgufWriter::add_f32_array(std::string_view k, const std::vector<float>& v) {
  add_numeric_array(k, 6, v.data(), v.size(), 4);
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& ne) {
  if (data_started_) throw Error(cat("GGUF writer: tensor '", name, "' added after begin_data()"));
  const std::string what = cat("GGUF writer: tensor '", name, "'");
  if (name.size() > 63) throw Error(cat(what, " name is ", name.size(), " bytes long (expected at most 63)"));
  if (ne.empty() || ne.size() > 4) throw Error(cat(what, " has ", ne.size(), " dimensions (expected 1 to 4)"));
  const std::optional<GgmlTypeInfo> info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) throw Error(cat(what, " has unknown type id ", static_cast<uint32_t>(type)));
  if (ne[0] % info->block_elems)
    throw Error(cat(what, " dimension 0 (", ne[0], ") is not a multiple of the ", info->name, " block size ",
                    info->block_elems));
  uint64_t bytes = ne[0] / info->block_elems * info->block_bytes;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] == 0) throw Error(cat(what, " dimension ", i, " is 0"));
    if (i > 0 && __builtin_mul_overflow(bytes, ne[i], &bytes)) throw Error(cat(what, " size overflows 64 bits"));
  }
  for (const Tensor& t : tensors_)
    if (t.name == name) throw Error(cat(what, " added twice"));
  tensors_.push_back(Tensor{std::string(name), type, ne, bytes, data_end_});
  data_end_ += (bytes + alignment_ - 1) / alignment_ * alignment_;
}

void GgufWriter::write(const void* p, size_t n) {
  out_->write(p, n);
  file_pos_ += n;
}

void GgufWriter::pad_to_alignment() {
  static const uint8_t zeros[4096] = {};
  uint64_t pad = (alignment_ - file_pos_ % alignment_) % alignment_;
  write(zeros, pad);
}

void GgufWriter::begin_data() {
  if (data_started_) throw Error("GGUF writer: begin_data() called twice");
  data_started_ = true;
  const uint32_t magic = 0x46554747, version = 3;
  const uint64_t n_tensors = tensors_.size();
  write(&magic, 4);
  write(&version, 4);
  write(&n_tensors, 8);
  write(&n_kv_, 8);
  write(meta_.data(), meta_.size());
  meta_.clear();
  meta_.shrink_to_fit();
  for (const Tensor& t : tensors_) {
    uint64_t n = t.name.size();
    uint32_t dims = static_cast<uint32_t>(t.ne.size()), type = static_cast<uint32_t>(t.type);
    write(&n, 8);
    write(t.name.data(), n);
    write(&dims, 4);
    write(t.ne.data(), 8 * t.ne.size());
    write(&type, 4);
    write(&t.offset, 8);
  }
  pad_to_alignment();
}

void GgufWriter::write_tensor_data(std::string_view name, const void* data, size_t bytes) {
  if (!data_started_) throw Error("GGUF writer: tensor data before begin_data()");
  // Move on to the next tensor when the current one is complete.
  while (current_ < tensors_.size() && written_ == tensors_[current_].bytes) {
    pad_to_alignment();
    ++current_;
    written_ = 0;
  }
  if (current_ >= tensors_.size() || tensors_[current_].name != name)
    throw Error(cat("GGUF writer: data for tensor '", name, "' out of declaration order (",
                    current_ < tensors_.size() ? cat("tensor '", tensors_[current_].name, "' has ", written_,
                                                     " of its ", tensors_[current_].bytes, " bytes")
                                               : std::string("every tensor is complete"),
                    ")"));
  Tensor& t = tensors_[current_];
  if (written_ + bytes > t.bytes)
    throw Error(cat("GGUF writer: tensor '", name, "' gets more than its ", t.bytes, " bytes"));
  write(data, bytes);
  written_ += bytes;
}

void GgufWriter::complete() {
  if (completed_) throw Error(cat("GGUF writer: ", path_, " finished twice"));
  if (!data_started_) begin_data();
  while (current_ < tensors_.size() && written_ == tensors_[current_].bytes) {
    pad_to_alignment();
    ++current_;
    written_ = 0;
  }
  if (current_ != tensors_.size())
    throw Error(cat("GGUF writer: tensor '", tensors_[current_].name, "' is incomplete (", written_, " of ",
                    tensors_[current_].bytes, " bytes)"));
  out_->finish();
  completed_ = true;
}

void GgufWriter::commit() {
  if (!completed_) throw Error(cat("GGUF writer: ", path_, " committed before it was complete"));
  if (finished_) throw Error(cat("GGUF writer: ", path_, " finished twice"));
  out_->commit();
  finished_ = true;
}

void GgufWriter::finish() {
  complete();
  commit();
}

}  // namespace tps
