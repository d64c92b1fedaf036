// `tpsrun` generation and `tpsrun score`: prompt in, tokens out (streamed
// as UTF-8-safe text), with the timing users compare engines by. Every rank
// runs them together on its shard of the model; rank 0 prints.
#pragma once

#include <string>
#include <vector>

#include "engine/sampler.h"
#include "launch/rank_setup.h"
#include "runtime/mpi_session.h"

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
  std::string split = "auto";     // layers, experts, tensor or auto
  std::string exchange = "auto";  // shm, mpi or auto
  std::string ids_file;  // score: the token sequence
};

// Collective: every rank calls them with the same options.
int run_generate(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);
int run_score(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup);

}  // namespace tps
