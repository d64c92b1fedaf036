// GGUF reader (spec §3): maps the file, parses header, metadata and tensor
// infos, and checks everything before anything is used -- magic, version,
// counts, every length against the bytes that remain, value types, keys,
// alignment, tensor shapes, types, offsets and overlaps. Nothing is copied:
// strings and tensor data are views into the mapping, valid while the
// GgufFile lives. Every problem is an InputError naming the file, the field
// and the value, and nothing is allocated in proportion to a claimed count
// before that count has been checked against the file size.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/gguf/ggml_types.h"
#include "runtime/mapped_file.h"

namespace tps {

// GGUF metadata value types, as stored in the file.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* gguf_type_name(GgufType type);

// One metadata record, a view into the mapping (any value type; value_text()
// renders it).
struct MetaEntry {
  std::string_view key;
  GgufType type;
  const uint8_t* value;               // first byte of the value (arrays: of the first element;
                                      // strings: of the u64 length)
  GgufType elem_type = GgufType::U8;  // arrays only
  uint64_t count = 0;                 // arrays only: number of elements
};

struct ArrayInfo {
  GgufType elem_type;
  uint64_t count;
};

struct TensorView {
  std::string_view name;
  GgmlType type;
  int n_dims = 0;
  std::array<uint64_t, 4> ne{1, 1, 1, 1};  // ggml order, missing dims are 1
  const uint8_t* data = nullptr;           // [bytes] in the mapping
  uint64_t offset = 0;                     // from the start of its part's file
  int part = 0;                            // a split model's part that holds it (0: the first)
  uint64_t bytes = 0;
  uint64_t row_bytes = 0;  // bytes of one row of ne[0] elements
  uint64_t rows() const { return ne[1] * ne[2] * ne[3]; }
};

// A model file, or a split model (llama.cpp's gguf-split: parts named
// PREFIX-0000i-of-0000N.gguf, each a GGUF file of whole tensors with
// split.no, split.count and split.tensors.count, the metadata in the
// first): opened by its first part, which opens the others and joins their
// tensors to its own. Metadata is the first part's.
class GgufFile {
 public:
  // Missing, foreign (another split.count or split.tensors.count), misnumbered
  // or duplicated parts are InputErrors naming the part.
  static GgufFile open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing) with the same code as
  // open(); name stands for the path in errors.
  static GgufFile from_memory(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const MappedFile& mapping() const { return *file_; }
  // The parts of a split model (1 for a single file); part 0 is this file.
  int parts() const { return 1 + static_cast<int>(more_parts_.size()); }
  const GgufFile& part(int i) const { return i == 0 ? *this : more_parts_[i - 1]; }

  // Metadata, in file order.
  const std::vector<MetaEntry>& metadata() const { return meta_; }
  const MetaEntry* find(std::string_view key) const;

  // Typed access. get_* throw InputError when the key is missing or of
  // another type; find_* return nullopt when missing and throw on a wrong
  // type. Unsigned getters take an integer of any width and signedness when
  // its value fits (files store u32 fields as i32 or u64); get_f32 takes F64.
  uint32_t get_u32(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  std::string_view get_string(std::string_view key) const;
  std::optional<uint32_t> find_u32(std::string_view key) const;
  std::optional<uint64_t> find_u64(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<std::string_view> find_string(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  ArrayInfo get_array_info(std::string_view key) const;
  // Views into the mapping: one vector allocation, none per string.
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  // I32 elements, or U32 elements that all fit.
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  // A readable rendering of any value (arrays: the first max_elems elements).
  std::string value_text(const MetaEntry& entry, size_t max_elems = 8) const;

  // Tensors, in file order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const;
  const TensorView& tensor(std::string_view name) const;  // throws naming the tensor

 private:
  explicit GgufFile(std::unique_ptr<MappedFile> file);
  void parse();
  void parse_tensor_data();
  void open_split_parts();
  [[noreturn]] void fail(const std::string& what) const;
  uint64_t unsigned_value(const MetaEntry& e) const;  // any integer type, checked >= 0
  const MetaEntry& expect(std::string_view key) const;
  [[noreturn]] void wrong_type(const MetaEntry& e, const char* expected) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<MetaEntry> meta_;
  std::unordered_map<std::string_view, size_t> meta_index_;
  std::vector<TensorView> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  std::vector<GgufFile> more_parts_;  // a split model's parts after the first
};

// The file name of part i (0-based) of n of a split model: PREFIX-0000{i+1}-of-0000n.gguf.
std::string split_part_path(const std::string& prefix, int i, int n);

}  // namespace tps
