// A step as rank 0 sends it to the other ranks: the batch (with its cache
// copies), the constraints of sequences added since the last plan (their
// specs' text, to compile while the steps go on: constraint.h), the
// sequences that join (their sampling parameters, the forced tokens of a
// replay) and those that leave, or the end of the run. Plain bytes on the
// wire: split inside layers rank 0 broadcasts each plan; split by layers it
// goes down the pipeline rank to rank.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/step/batch.h"
#include "engine/step/sampler.h"
#include "runtime/exchange.h"

namespace tps {

struct StepPlan {
  struct Join {
    int32_t seq, top_logprobs, max_new_tokens;  // max_new_tokens: what its constraint's analysis budget leaves room in
    SamplerParams sampler;
  };
  int32_t stop = 0;
  Batch batch;
  std::vector<Join> joins;
  std::vector<int32_t> leaves;
  std::vector<std::pair<int32_t, std::string>> announces;        // constrained sequences added, each once
  std::vector<std::pair<int32_t, std::vector<int32_t>>> forced;  // of joining sequences

  std::vector<uint8_t> bytes() const;
  // Throws Error for bytes cut short.
  static StepPlan parse(const std::vector<uint8_t>& bytes);
};

// A plan's bytes between two ranks (the pipeline's).
void send_plan(Exchange& exchange, const std::vector<uint8_t>& bytes, int to);
std::vector<uint8_t> recv_plan(Exchange& exchange, int from);
// Collective: rank 0's plan on every rank.
void broadcast_plan(Exchange& exchange, StepPlan& plan);

}  // namespace tps
