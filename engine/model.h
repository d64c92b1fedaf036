// A model ready to run: the file (metadata), its checked config, the
// tensor data copied into this process's own memory (huge pages, on the NUMA
// node its memory policy names), weight views into that copy, and the
// tokenizer. Immutable after load; sessions (conversations) refer to it.
#pragma once

#include <functional>
#include <string>

#include "engine/gguf_reader.h"
#include "engine/model_config.h"
#include "engine/tokenizer.h"
#include "engine/weights.h"
#include "runtime/page_buffer.h"

namespace tps {

struct Model {
  GgufFile file;
  PageBuffer tensor_data;
  ModelConfig config;
  ModelWeights weights;
  Tokenizer tokenizer;
};

// Opens and checks the file and copies its tensor data into memory of its
// own, dropping each part of the file mapping once copied (the page cache may
// keep the file; this process holds one copy). progress(done, total) is
// called as the bytes are copied.
Model load_model(const std::string& path,
                 const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace tps
