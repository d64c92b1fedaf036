#include "engine/model.h"

#include <unistd.h>

namespace tps {

Model load_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
  GgufFile file = GgufFile::open(path);
  ModelConfig config = read_model_config(file);
  ModelWeights weights = map_weights(file, config);
  Tokenizer tokenizer = Tokenizer::from_gguf(file);
  // Touch every page of the tensor data, in order, with read-ahead advice.
  const MappedFile& m = file.mapping();
  const uint64_t begin = file.data_offset(), total = m.size() - std::min(begin, m.size());
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE)), step = 64ull << 20;
  volatile uint8_t sink = 0;
  for (uint64_t off = 0; off < total; off += step) {
    const uint64_t len = std::min(step, total - off);
    m.advise_willneed(begin + off, len);
    for (uint64_t p = 0; p < len; p += page) sink = sink + m.data()[begin + off + p];
    if (progress) progress(off + len, total);
  }
  return Model{std::move(file), config, std::move(weights), std::move(tokenizer)};
}

}  // namespace tps
