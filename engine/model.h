// A model ready to run: the mapped file, its checked config, weight views,
// and tokenizer. Immutable after load; sessions (conversations) refer to it.
#pragma once

#include <functional>
#include <string>

#include "engine/gguf_reader.h"
#include "engine/model_config.h"
#include "engine/tokenizer.h"
#include "engine/weights.h"

namespace tps {

struct Model {
  GgufFile file;
  ModelConfig config;
  ModelWeights weights;
  Tokenizer tokenizer;
};

// Opens and checks the file, and reads every weight page once so that the
// first token does not pay for the disk; progress(done, total) is called as
// the bytes are read (only worth showing for large files).
Model load_model(const std::string& path,
                 const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace tps
