// What `tpsrun` is asked to do: the options of generation and scoring, the
// same on every rank.
#pragma once

#include <string>

#include "engine/step/forward.h"
#include "engine/step/sampler.h"

namespace tps {

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string prompts_file;  // --parallel: one prompt per line
  int parallel = 1;          // sequences generated together
  int max_tokens = 256;
  SamplerParams sampler;
  bool seed_given = false;
  int ctx = 4096;
  int batch = SessionOptions{}.max_batch;
  bool chat = false;
  bool show_analysis = false;
  std::string reasoning = "medium";
  bool json = false;
  int top_logprobs = 0;
  bool yarn_truncate = false;
  std::string split = "auto";     // layers, experts, tensor or auto
  std::string exchange = "auto";  // shm, mpi or auto
  bool keep_page_cache = false;   // leave the model file in the page cache
  std::string ids_file;           // score: the token sequence
};

}  // namespace tps
