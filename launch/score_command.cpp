#include "launch/score_command.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

namespace {

std::vector<int32_t> read_ids(const std::string& path) {
  std::istringstream in(read_text_file(path));
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw InputError(cat(path, ": '", word, "' is not a token id"));
    }
  }
  if (ids.size() < 2) throw InputError(cat(path, ": need at least 2 token ids to score"));
  return ids;
}

// An upper estimate of what one scored position costs where the results
// are kept: its JSON record (an object, and k pairs in an array, as
// nlohmann holds them) and its text when printed or sent.
uint64_t result_bytes(int k) { return 512 + 128 * static_cast<uint64_t>(k); }

}  // namespace

RunMode add_score_command(CLI::App& app, RunOptions& run) {
  CLI::App* score = app.add_subcommand("score",
                                       "teacher forcing: the log-probability of each next token of a given sequence "
                                       "and the top alternatives (uses -m, --top-logprobs, --json)");
  score->add_option("--ids", run.ids_file, "file of token ids separated by white space")->required();
  score->fallthrough();
  return {score, {run_group::model, run_group::output, run_group::logprobs}};
}

int run_score(const RunOptions& options, const MpiSession& mpi, const RankSetup& setup) {
  const std::vector<int32_t> ids = read_ids(options.ids_file);
  const int n = static_cast<int>(ids.size());
  // The context: --ctx when given (the ids must fit it), else the ids'.
  if (options.context_given && n > options.context)
    throw InputError(cat("--ctx ", options.context, ": ", options.ids_file, " has ", n,
                         " tokens, more than the context (give --ctx ", n, " or more, or leave --ctx out)"));
  RunOptions o = options;
  o.context = options.context_given ? options.context : n;

  // What the command holds besides the run: a step's logits of the rank's
  // vocabulary rows (never every position's: each step's are scored, then
  // dropped), and the results where they are kept.
  GgufFile file = open_model(o, mpi);
  const Shard planned = planned_shard(o, mpi, file);
  const bool pipeline = planned.mode == SplitMode::layers && planned.ranks > 1;
  const int k = std::max(o.top_logprobs, 1);
  const int step = std::min(o.step_tokens, n);
  const bool keeps_results = mpi.rank() == 0 || (pipeline && planned.rank == planned.ranks - 1);
  const uint64_t command_bytes =
      uint64_t(step) * planned.share.vocab.size() * sizeof(float) + (keeps_results ? n * result_bytes(k) : 0);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file), command_bytes);
  const Model& m = r.model;
  Session session(m, r.session_options(o, o.context), r.pool, r.exchange);

  // Each position's log-probabilities: by all ranks together from their
  // vocabulary rows, or by the last rank of a pipeline alone; kept by rank
  // 0 (or that last rank).
  const int64_t rows = m.weights.views.output.rows;
  const bool scorer = !r.pipeline() || m.shard.rank == r.last_rank();
  const bool keeper = r.pipeline() ? m.shard.rank == r.last_rank() : mpi.rank() == 0;
  nlohmann::json positions = nlohmann::json::array();
  std::vector<float> logits;
  double seconds = 0;
  Exchange alone;
  for (int at = 0; at + 1 < n; at += step) {
    const int count = std::min(step, n - at);
    const auto t0 = Clock::now();
    session.forward(std::span<const int32_t>(ids).subspan(at, count), true, logits);
    seconds += seconds_since(t0);
    if (!scorer) continue;
    for (int i = 0; i < count && at + i + 1 < n; ++i) {
      const SplitRows step_rows = shard_rows(m.shard, m.config.n_vocab, logits, rows, r.exchange, alone);
      const SplitLogits row{step_rows.logits.subspan(i * rows, rows), step_rows.begin, step_rows.vocab,
                            step_rows.exchange};
      const std::vector<TokenLogprob> top = top_logprobs(row, k);
      const float next = logprob_of(row, ids[at + i + 1]);
      if (!keeper) continue;
      nlohmann::json pairs = nlohmann::json::array();
      for (const TokenLogprob& t : top) pairs.push_back({t.id, t.logprob});
      positions.push_back({{"pos", at + i}, {"next", ids[at + i + 1]}, {"next_logprob", next}, {"top", pairs}});
    }
  }
  if (r.pipeline() && r.last_rank() != 0) {  // the last rank's results to rank 0, which prints
    if (keeper) {
      const std::string text = positions.dump();
      const uint64_t size = text.size();
      r.exchange.send(&size, sizeof size, 0);
      r.exchange.send(text.data(), size, 0);
    } else if (mpi.rank() == 0) {
      uint64_t size = 0;
      r.exchange.recv(&size, sizeof size, r.last_rank());
      std::string text(size, '\0');
      r.exchange.recv(text.data(), size, r.last_rank());
      positions = nlohmann::json::parse(text);
    }
  }
  if (mpi.rank() != 0) return 0;
  nlohmann::json j = {{"engine", "tps"},
                      {"model", o.model},
                      {"tokens", n},
                      {"seconds", seconds},
                      {"split", split_mode_name(m.shard.mode)},
                      {"ranks", mpi.size()},
                      {"yarn_truncate", o.yarn_truncate},
                      {"kv_type", kv_type_name(o.kv_type)},
                      {"positions", positions}};
  if (o.json) {
    print_json(j);
  } else {
    for (const auto& p : positions)
      std::printf("%4d next %6d logprob %8.4f top %s\n", p["pos"].get<int>(), p["next"].get<int>(),
                  p["next_logprob"].get<float>(), p["top"].dump().c_str());
  }
  return 0;
}

}  // namespace tps
