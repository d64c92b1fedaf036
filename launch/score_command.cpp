#include "launch/score_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launch/json_output.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

int run_score(const RunOptions& o, const MpiSession& mpi, const RankSetup& setup) {
  std::istringstream in(read_text_file(o.ids_file));
  std::vector<int32_t> ids;
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      long v = std::stol(word, &used);
      if (used != word.size()) throw std::invalid_argument(word);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw InputError(cat(o.ids_file, ": '", word, "' is not a token id"));
    }
  }
  if (ids.size() < 2) throw InputError(cat(o.ids_file, ": need at least 2 token ids to score"));
  RankRun r(o, mpi, setup, Clock::now());
  const Model& m = r.model;
  Session session(m, r.session_options(o, std::max<int>(o.ctx, static_cast<int>(ids.size()))), r.pool, r.exchange);
  std::vector<float> logits;
  auto t0 = Clock::now();
  session.forward(ids, true, logits);
  const double s = seconds_since(t0);

  // Each position's log-probabilities: by all ranks together from their
  // vocabulary rows, or by the last rank of a pipeline alone.
  const int64_t rows = m.weights.views.output.rows;
  const int k = std::max(o.top_logprobs, 1);
  nlohmann::json positions = nlohmann::json::array();
  if (!r.pipeline() || m.shard.rank == r.last_rank()) {
    Exchange alone;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const SplitLogits row = shard_logits(m.shard, m.config.n_vocab,
                                           std::span<const float>(logits.data() + i * rows, rows), r.exchange, alone);
      nlohmann::json top = nlohmann::json::array();
      for (const TokenLogprob& t : top_logprobs(row, k)) top.push_back({t.id, t.logprob});
      positions.push_back(
          {{"pos", i}, {"next", ids[i + 1]}, {"next_logprob", logprob_of(row, ids[i + 1])}, {"top", top}});
    }
  }
  if (r.pipeline()) {  // the last rank's results to rank 0, which prints
    std::string text = positions.dump();
    uint64_t size = text.size();
    r.exchange.broadcast(&size, sizeof size, r.last_rank());
    text.resize(size);
    r.exchange.broadcast(text.data(), size, r.last_rank());
    positions = nlohmann::json::parse(text);
  }
  if (mpi.rank() != 0) return 0;
  nlohmann::json j = {{"engine", "tps"},
                      {"model", o.model},
                      {"tokens", ids.size()},
                      {"seconds", s},
                      {"split", split_mode_name(m.shard.mode)},
                      {"ranks", mpi.size()},
                      {"yarn_truncate", o.yarn_truncate},
                      {"kv_type", kv_type_name(kv_type(o.kv_type))},
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
