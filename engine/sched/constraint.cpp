#include "engine/sched/constraint.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/harmony_turn.h"
#include "engine/grammar/json_schema.h"
#include "runtime/error.h"

namespace tps {

namespace {

using json = nlohmann::ordered_json;
constexpr size_t kKept = 64;

int32_t special(const Tokenizer& tok, const char* name) {
  const std::optional<int32_t> id = tok.special_id(name);
  if (!id) throw InputError(cat("the vocabulary has no ", name, ": constrained output needs harmony's tokens"));
  return *id;
}

json parse(const std::string& spec) {
  try {
    return json::parse(spec);
  } catch (const json::exception& e) {
    throw InputError(cat("a constraint that is not JSON (", e.what(), ")"));
  }
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& text, const Tokenizer& tok,
                                               const std::shared_ptr<const TokenIndex>& index) {
  const json spec = parse(text);
  const std::string format = spec.value("format", "");
  Grammar g;
  int start = -1;
  std::vector<int32_t> ends;
  if (format == "json_schema") {
    start = add_json_schema(g, spec.at("schema"));
    ends = {special(tok, "<|return|>"), special(tok, "<|endoftext|>")};
  } else if (format == "json_object") {
    start = add_json_object(g);
    ends = {special(tok, "<|return|>"), special(tok, "<|endoftext|>")};
  } else if (format == "gbnf") {
    start = add_gbnf(g, spec.at("gbnf").get<std::string>(), "the grammar");
    ends = {special(tok, "<|return|>"), special(tok, "<|endoftext|>")};
  } else if (format == "harmony") {
    HarmonyTurn turn;
    turn.analysis = spec.value("analysis", true);
    const json& final = spec.contains("final") ? spec["final"] : json("text");
    turn.final_answer = final != "none";
    if (final.is_object()) {
      if (final.contains("schema"))
        turn.final_content = add_json_schema(g, final["schema"]);
      else if (final.contains("gbnf"))
        turn.final_content = add_gbnf(g, final["gbnf"].get<std::string>(), "the grammar"), turn.final_json = false;
      else
        turn.final_content = add_json_object(g);
    }
    for (const json& t : spec.value("tools", json::array())) {
      HarmonyTurn::Tool tool{t.at("name").get<std::string>(), std::nullopt};
      if (t.contains("schema") && !t["schema"].is_null()) tool.arguments = add_json_schema(g, t["schema"]);
      turn.tools.push_back(tool);
    }
    start = add_harmony_turn(g, tok, turn);
  } else {
    throw InputError(cat("a constraint of format '", format, "' (expected json_schema, json_object, gbnf or harmony)"));
  }
  return compile_grammar(std::move(g), start, index, ends);
}

}  // namespace

int reasoning_budget(const std::string& spec) { return parse(spec).value("reasoning_budget", -1); }

int effort_budget(const std::string& effort) { return effort == "low" ? 512 : effort == "high" ? 8192 : 2048; }

int analysis_budget(int reasoning_budget, int max_new_tokens, int64_t answer_tokens) {
  const int64_t room = int64_t{max_new_tokens} - kAnalysisFraming - answer_tokens;
  return static_cast<int>(
      std::max<int64_t>(0, std::min({int64_t{reasoning_budget}, int64_t{max_new_tokens} / 2, room})));
}

ConstraintCache::ConstraintCache(const Tokenizer& tokenizer) : tok_(tokenizer) {}

std::shared_ptr<const CompiledGrammar> ConstraintCache::get(const std::string& spec) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto it = compiled_.begin(); it != compiled_.end(); ++it)
    if (it->first == spec) {
      compiled_.splice(compiled_.begin(), compiled_, it);
      return compiled_.front().second;
    }
  if (!index_) index_ = std::make_shared<const TokenIndex>(tok_);
  const std::shared_ptr<const TokenIndex> index = index_;
  lock.unlock();  // compiling may take milliseconds: other threads go on
  try {
    auto g = compile(spec, tok_, index);
    lock.lock();
    compiled_.emplace_front(spec, g);
    if (compiled_.size() > kKept) compiled_.pop_back();
    return g;
  } catch (const json::exception& e) {
    throw InputError(cat("a constraint with a field of the wrong type (", e.what(), ")"));
  }
}

SequenceConstraint::SequenceConstraint(std::shared_ptr<const CompiledGrammar> grammar, const Tokenizer& tokenizer,
                                       int reasoning_budget, int max_new_tokens)
    : matcher_(grammar),
      tok_(&tokenizer),
      budget_(reasoning_budget < 0 ? -1
                                   : analysis_budget(reasoning_budget, max_new_tokens,
                                                     grammar->grammar.shortest(grammar->grammar.start()))),
      end_(special(tokenizer, "<|end|>")),
      channel_id_(special(tokenizer, "<|channel|>")),
      message_(special(tokenizer, "<|message|>")) {}

bool SequenceConstraint::mask(std::span<float> logits, int64_t begin) {
  const TokenSet& allowed = matcher_.allowed();
  // Past its budget, the analysis may only end.
  const bool closing = budget_ >= 0 && analysis_tokens_ >= budget_ && allowed.test(end_);
  bool any = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const int32_t id = static_cast<int32_t>(begin + static_cast<int64_t>(i));
    if (closing ? id != end_ : !allowed.test(id))
      logits[i] = -std::numeric_limits<float>::infinity();
    else
      any = true;
  }
  return closing || allowed.count() > 0 || any;
}

bool SequenceConstraint::accept(int32_t token) {
  if (!matcher_.accept(token)) return false;
  if (token == channel_id_) {
    in_header_ = 1, channel_.clear(), analysis_tokens_ = -1;
  } else if (token == message_ && in_header_) {
    in_header_ = 0;
    if (channel_ == "analysis") analysis_tokens_ = 0;
  } else if (token == end_) {
    analysis_tokens_ = -1;
  } else if (in_header_) {
    channel_ += tok_->token_bytes(token);
  } else if (analysis_tokens_ >= 0) {
    ++analysis_tokens_;
  }
  return true;
}

}  // namespace tps
