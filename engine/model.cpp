#include "engine/model.h"

#include <algorithm>
#include <cstring>

namespace tps {

Model load_model(const std::string& path, const std::function<void(uint64_t, uint64_t)>& progress) {
  GgufFile file = GgufFile::open(path);
  ModelConfig config = read_model_config(file);
  Tokenizer tokenizer = Tokenizer::from_gguf(file);
  const MappedFile& m = file.mapping();
  const uint64_t begin = file.data_offset();
  const uint64_t total = m.size() > begin ? m.size() - begin : 0;
  PageBuffer copy(total);
  const uint64_t step = 64ull << 20;
  for (uint64_t off = 0; off < total; off += step) {
    const uint64_t len = std::min(step, total - off);
    m.advise_willneed(begin + off + len, step);  // read ahead the next piece
    std::memcpy(copy.data() + off, m.data() + begin + off, len);
    m.advise_dontneed(begin + off, len);
    if (progress) progress(off + len, total);
  }
  ModelWeights weights = map_weights(file, config, copy.data());
  return Model{std::move(file), std::move(copy), config, std::move(weights), std::move(tokenizer)};
}

}  // namespace tps
