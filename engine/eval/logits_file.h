// llama-perplexity's file of a base model's log-probabilities (what its
// --kl-divergence-base writes and --kl-divergence reads), so that either
// engine can compare against the other's base: "_logits_", then int32
// n_ctx, n_vocab, n_chunk; the n_chunk x n_ctx token ids; then for each
// scored position (n_ctx - 1 - n_ctx/2 of each chunk: those predicting the
// tokens after the first half) one row of 16-bit words: a float scale and a
// float floor (two words each), and one step per vocabulary entry, padded
// to an even count. Log-probabilities below max - 16 are clamped to the
// floor. Little-endian, as llama.cpp writes it on x86.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/eval/token_scores.h"
#include "runtime/mapped_file.h"
#include "runtime/output_file.h"

namespace tps {

// The positions of a chunk of n_ctx tokens that are scored: logits at
// positions first..n_ctx-2 predict tokens first+1..n_ctx-1.
inline int first_scored(int n_ctx) { return n_ctx / 2; }
inline int scored_per_chunk(int n_ctx) { return n_ctx - 1 - first_scored(n_ctx); }

// One row's 16-bit form: what the file keeps of `logits`.
void quantize_logprobs(std::span<const float> logits, float& scale, float& min_logprob, std::span<uint16_t> steps);

// Written as runtime/output_file.h writes every file: the path appears,
// or is replaced, only by finish(); an unfinished file leaves nothing.
class LogitsFileWriter {
 public:
  // Starts the file: its header and `tokens` (n_chunk x n_ctx of them).
  // inputs: the files the run reads, which path may not be; flag names path
  // in messages (--save-logits).
  LogitsFileWriter(const std::string& path, int n_ctx, int n_vocab, std::span<const int32_t> tokens,
                   const std::vector<std::string>& inputs = {}, const std::string& flag = "");

  // The next scored position's logits ([n_vocab]).
  void add(std::span<const float> logits);
  // Throws Error naming the file if it could not all be written.
  void finish();

 private:
  OutputFile out_;
  std::vector<uint16_t> row_;
};

class LogitsFile {
 public:
  // Throws InputError naming the file when it is not such a file, or when
  // its size is not what its header implies (a truncated file).
  explicit LogitsFile(const std::string& path);

  int n_ctx() const { return n_ctx_; }
  int n_vocab() const { return n_vocab_; }
  int n_chunk() const { return n_chunk_; }
  std::span<const int32_t> tokens() const { return tokens_; }
  // Scored position k of all (chunk by chunk).
  BaseRow row(int64_t k) const;
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  int n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
  std::vector<int32_t> tokens_;
  uint64_t rows_at_ = 0, row_words_ = 0;
};

}  // namespace tps
