// Streaming GGUF writer (version 3). Metadata and tensor declarations come
// first; begin_data() writes the header, metadata, tensor infos and padding;
// then tensor bytes are streamed in declaration order, in as many pieces as
// the caller likes, so a 13 GB model needs only the caller's chunk in memory.
// Only the encoded metadata (a few MB for a 200k-token vocabulary) is held
// until begin_data(). Tensor offsets are the running sum of padded sizes in
// declaration order, as ggml's reader requires (spec §3.1).
// The file is written as runtime/output_file.h writes every file: beside
// PATH, renamed over it by finish() once whole; only a regular file (or
// nothing), and never one of the inputs named, is replaced; an unfinished
// writer leaves nothing. Misuse -- a key or tensor added twice, a shape the
// reader would refuse, data out of order or of the wrong size -- throws
// Error at the call that causes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "runtime/output_file.h"

namespace tps {

class GgufWriter {
 public:
  // inputs: the files the run reads, which PATH may not be.
  explicit GgufWriter(std::string path, uint32_t alignment = 32, const std::vector<std::string>& inputs = {});
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void add_u8(std::string_view key, uint8_t v);
  void add_i8(std::string_view key, int8_t v);
  void add_u16(std::string_view key, uint16_t v);
  void add_i16(std::string_view key, int16_t v);
  void add_u32(std::string_view key, uint32_t v);
  void add_i32(std::string_view key, int32_t v);
  void add_u64(std::string_view key, uint64_t v);
  void add_i64(std::string_view key, int64_t v);
  void add_f32(std::string_view key, float v);
  void add_f64(std::string_view key, double v);
  void add_bool(std::string_view key, bool v);
  void add_string(std::string_view key, std::string_view v);
  void add_string_array(std::string_view key, const std::vector<std::string>& v);
  void add_i32_array(std::string_view key, const std::vector<int32_t>& v);
  void add_f32_array(std::string_view key, const std::vector<float>& v);

  // ne in ggml order (innermost first), 1 to 4 dimensions.
  void add_tensor(std::string_view name, GgmlType type, const std::vector<uint64_t>& ne);

  void begin_data();
  // The next bytes of tensor `name`, which must be the tensor being written.
  void write_tensor_data(std::string_view name, const void* data, size_t bytes);
  // Checks every tensor is complete, flushes, and renames into place.
  void finish();
  // finish() in two steps, so that the parts of a split model go in place
  // together once every one is whole: complete() checks, flushes and closes;
  // commit() renames.
  void complete();
  void commit();

  const std::string& path() const { return path_; }

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> ne;
    uint64_t bytes, offset;
  };
  void key(std::string_view k, uint32_t type);
  void add_numeric_array(std::string_view k, uint32_t elem_type, const void* data, uint64_t count, size_t elem_bytes);
  void put(const void* p, size_t n);    // to the metadata buffer
  void write(const void* p, size_t n);  // to the file
  void pad_to_alignment();

  std::string path_;
  uint32_t alignment_;
  std::unique_ptr<OutputFile> out_;
  std::vector<uint8_t> meta_;  // encoded key/value records
  uint64_t n_kv_ = 0;
  std::unordered_set<std::string> keys_;
  std::vector<Tensor> tensors_;
  uint64_t data_end_ = 0;  // running offset of declared tensor data
  size_t current_ = 0;     // tensor being streamed
  uint64_t written_ = 0;   // bytes of it so far
  uint64_t file_pos_ = 0;
  bool data_started_ = false, completed_ = false, finished_ = false;
};

}  // namespace tps
