#include "engine/eval/logits_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/error.h"

namespace tps {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t kHeaderBytes = sizeof kMagic + 3 * sizeof(int32_t);

// Words of a row: scale and floor (two each), the steps, an even count.
uint64_t row_words(int n_vocab) { return 2 * ((static_cast<uint64_t>(n_vocab) + 1) / 2) + 4; }

}  // namespace

void quantize_logprobs(std::span<const float> logits, float& scale, float& min_logprob, std::span<uint16_t> steps) {
  const LogSoftmax s = log_softmax(logits);
  const float floor = std::max(*std::min_element(logits.begin(), logits.end()), s.max - 16);
  min_logprob = floor - s.max - static_cast<float>(s.log_sum);
  scale = (s.max - floor) / 65535.f;
  const float inverse = scale > 0 ? 1 / scale : 0;
  // Rounded half to even, as llama.cpp's nearest_int.
  for (size_t i = 0; i < logits.size(); ++i)
    steps[i] = logits[i] > floor ? static_cast<uint16_t>(std::nearbyint((logits[i] - floor) * inverse)) : 0;
}

LogitsFileWriter::LogitsFileWriter(const std::string& path, int n_ctx, int n_vocab, std::span<const int32_t> tokens,
                                   const std::vector<std::string>& inputs, const std::string& flag)
    : out_(path, inputs, flag), row_(row_words(n_vocab), 0) {
  const int32_t header[3] = {n_ctx, n_vocab, static_cast<int32_t>(tokens.size() / n_ctx)};
  out_.write(kMagic, sizeof kMagic);
  out_.write(header, sizeof header);
  out_.write(tokens.data(), tokens.size_bytes());
}

void LogitsFileWriter::add(std::span<const float> logits) {
  float scale = 0, floor = 0;
  quantize_logprobs(logits, scale, floor, std::span<uint16_t>(row_).subspan(4, logits.size()));
  std::memcpy(row_.data(), &scale, sizeof scale);
  std::memcpy(row_.data() + 2, &floor, sizeof floor);
  out_.write(row_.data(), row_.size() * sizeof(uint16_t));
}

void LogitsFileWriter::finish() { out_.commit(); }

LogitsFile::LogitsFile(const std::string& path) : file_(path) {
  const uint8_t* p = file_.data();
  const uint64_t size = file_.size();
  if (size < kHeaderBytes || std::memcmp(p, kMagic, sizeof kMagic) != 0)
    throw InputError(cat(path, ": not a logits file (llama-perplexity --kl-divergence-base or tpsrun perplexity ",
                         "--save-logits writes them; it starts with \"_logits_\")"));
  int32_t header[3];
  std::memcpy(header, p + sizeof kMagic, sizeof header);
  n_ctx_ = header[0], n_vocab_ = header[1], n_chunk_ = header[2];
  if (n_ctx_ < 4 || n_ctx_ > (1 << 24) || n_vocab_ < 1 || n_vocab_ > (1 << 24) || n_chunk_ < 1 ||
      static_cast<uint64_t>(n_chunk_) * n_ctx_ > (uint64_t{1} << 31))
    throw InputError(cat(path, ": header says n_ctx ", n_ctx_, ", n_vocab ", n_vocab_, ", n_chunk ", n_chunk_,
                         ": not the numbers of a logits file"));
  const uint64_t n_tokens = static_cast<uint64_t>(n_chunk_) * n_ctx_;
  row_words_ = row_words(n_vocab_);
  rows_at_ = kHeaderBytes + n_tokens * sizeof(int32_t);
  const uint64_t expected =
      rows_at_ + static_cast<uint64_t>(n_chunk_) * scored_per_chunk(n_ctx_) * row_words_ * sizeof(uint16_t);
  if (size != expected)
    throw InputError(cat(path, ": ", size, " bytes, but its header (n_ctx ", n_ctx_, ", n_vocab ", n_vocab_,
                         ", n_chunk ", n_chunk_, ") implies ", expected, " (truncated, or not a logits file)"));
  tokens_.resize(n_tokens);
  std::memcpy(tokens_.data(), p + kHeaderBytes, n_tokens * sizeof(int32_t));
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] < 0 || tokens_[i] >= n_vocab_)
      throw InputError(cat(path, ": token ", i, " is ", tokens_[i], ", outside its vocabulary of ", n_vocab_));
  // A row's scale and floor must be numbers: a NaN makes every comparison
  // false, and the KL divergence against it came out 0 (a perfect match).
  const int64_t rows = static_cast<int64_t>(n_chunk_) * scored_per_chunk(n_ctx_);
  for (int64_t k = 0; k < rows; ++k) {
    const BaseRow r = row(k);
    if (!std::isfinite(r.scale) || !std::isfinite(r.min_logprob))
      throw InputError(cat(path, ": row ", k, " has a scale of ", r.scale, " and a floor of ", r.min_logprob,
                           ": not finite numbers, so not log-probabilities to compare with"));
  }
}

BaseRow LogitsFile::row(int64_t k) const {
  const uint8_t* at = file_.data() + rows_at_ + static_cast<uint64_t>(k) * row_words_ * sizeof(uint16_t);
  BaseRow r;
  std::memcpy(&r.scale, at, sizeof(float));
  std::memcpy(&r.min_logprob, at + sizeof(float), sizeof(float));
  r.steps = std::span<const uint16_t>(reinterpret_cast<const uint16_t*>(at + 2 * sizeof(float)), n_vocab_);
  return r;
}

}  // namespace tps
