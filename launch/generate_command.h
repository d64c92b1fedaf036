// `tpsrun` generation and `tpsrun score`: prompt in, tokens out (streamed
// as UTF-8-safe text), with the timing users compare engines by.
#pragma once

#include <string>
#include <vector>

#include "engine/sampler.h"

namespace tps {

struct RunOptions {
  std::string model;
  std::string prompt;
  int max_tokens = 256;
  SamplerParams sampler;
  bool seed_given = false;
  int ctx = 4096;
  int batch = 128;
  bool chat = false;
  bool show_analysis = false;
  std::string reasoning = "medium";
  bool json = false;
  int top_logprobs = 0;
  bool yarn_truncate = false;
  std::string ids_file;  // score: the token sequence
};

// The pool's threads are pinned to thread_pus (one per core first).
int run_generate(const RunOptions& options, int threads, const std::vector<int>& thread_pus);
int run_score(const RunOptions& options, int threads, const std::vector<int>& thread_pus);

}  // namespace tps
