// A weight matrix as the kernels see it: plain data, no model knowledge.
// `rows` rows of `cols` values of a ggml type, row_bytes apart. Matrices of
// a packed type are in the kernels' packed layout, by tiles of rows
// (kernels/packed_rows.h): for them row(r) is where row r's tile starts
// when r starts one; other types (and the token embeddings, read from the
// file mapping) are in the file's layout.
#pragma once

#include <cstdint>

#include "engine/gguf/ggml_types.h"
#include "engine/kernels/packed_rows.h"

namespace tps {

struct Matrix {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;
  const uint8_t* row(int64_t r) const { return data + r * row_bytes; }
  // Rows [first, first + count): one expert of a 3-D expert tensor (each
  // expert's rows are packed as a matrix of their own).
  Matrix slice(int64_t first, int64_t count) const { return Matrix{type, count, cols, row(first), row_bytes}; }
  // Weights whose dot products take activations quantized to Q8_0.
  bool wants_q8() const { return is_packed_type(type); }
};

}  // namespace tps
