// `tpsrun perplexity`: how well the model predicts a text, measured as
// llama.cpp's llama-perplexity measures it -- the same windows, the same
// scored positions, the same file of a base model's log-probabilities -- so
// that the two engines' figures compare. Every rank computes its shard;
// rank 0 scores and prints.
#pragma once

#include <string>

#include "launch/rank_setup.h"
#include "launch/run_options.h"
#include "runtime/mpi_session.h"

namespace tps {

struct PerplexityOptions {
  std::string text_file;  // the text (-f); not needed with kl_base
  int window = 512;       // tokens a window (llama-perplexity's -c and its default)
  bool window_given = false;
  int chunks = -1;          // windows at most (-1: as many as the text has)
  std::string save_logits;  // write the log-probabilities here (a base for --kl-base)
  std::string kl_base;      // compare against this base's log-probabilities
};

// `tpsrun perplexity` and its options, into perplexity.
RunMode add_perplexity_command(CLI::App& app, PerplexityOptions& perplexity);

// Collective: every rank calls it with the same options.
int run_perplexity(const RunOptions& options, const PerplexityOptions& perplexity, const MpiSession& mpi,
                   const RankSetup& setup);

}  // namespace tps
