#include "engine/sched/constraint.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "runtime/clock.h"
#include "runtime/error.h"

namespace tps {

namespace {

constexpr size_t kKept = 64;

}  // namespace

int effort_budget(const std::string& effort) { return effort == "low" ? 512 : effort == "high" ? 8192 : 2048; }

int analysis_budget(int reasoning_budget, int max_new_tokens, int64_t answer_tokens) {
  const int64_t room = int64_t{max_new_tokens} - kAnalysisFraming - answer_tokens;
  return static_cast<int>(
      std::max<int64_t>(0, std::min({int64_t{reasoning_budget}, int64_t{max_new_tokens} / 2, room})));
}

ConstraintCache::ConstraintCache(const Tokenizer& tokenizer) : tok_(tokenizer) {}

ConstraintCache::Compiled ConstraintCache::get(const ConstraintSpec& spec) {
  const std::string text = spec.text();
  std::promise<Compiled> promise;
  const auto [future, mine] = entry(text, promise);
  if (mine) compile(spec, text, promise);
  return future.get();
}

std::shared_future<ConstraintCache::Compiled> ConstraintCache::start(const std::string& text) {
  auto promise = std::make_shared<std::promise<Compiled>>();
  const auto [future, mine] = entry(text, *promise);
  if (mine) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(threads_, [](const std::future<void>& t) {
      return t.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    threads_.push_back(std::async(std::launch::async, [this, text, promise] {
      try {
        compile(ConstraintSpec::parse(text), text, *promise);
      } catch (...) {  // parse's: the plan's text is not a spec
        promise->set_exception(std::current_exception());
        forget(text);
      }
    }));
  }
  return future;
}

std::pair<std::shared_future<ConstraintCache::Compiled>, bool> ConstraintCache::entry(const std::string& text,
                                                                                      std::promise<Compiled>& fresh) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = compiled_.begin(); it != compiled_.end(); ++it)
    if (it->first == text) {
      compiled_.splice(compiled_.begin(), compiled_, it);
      return {compiled_.front().second, false};
    }
  compiled_.emplace_front(text, fresh.get_future().share());
  if (compiled_.size() > kKept) compiled_.pop_back();
  return {compiled_.front().second, true};
}

void ConstraintCache::compile(const ConstraintSpec& spec, const std::string& text, std::promise<Compiled>& promise) {
  const Clock::time_point t0 = Clock::now();
  try {
    std::shared_ptr<const TokenIndex> index;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!index_) index_ = std::make_shared<const TokenIndex>(tok_);
      index = index_;
    }
    CompiledConstraint c = compile_constraint(spec, tok_, index);
    c.seconds = seconds_since(t0);
    promise.set_value(std::make_shared<const CompiledConstraint>(std::move(c)));
  } catch (...) {
    // Refusals are not kept: the next request's refusal names its own param.
    promise.set_exception(std::current_exception());
    forget(text);
  }
}

void ConstraintCache::forget(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  compiled_.remove_if([&](const auto& e) { return e.first == text; });
}

SequenceConstraint::SequenceConstraint(const CompiledConstraint& compiled, const Tokenizer& tokenizer,
                                       int max_new_tokens)
    : matcher_(compiled.grammar),
      tok_(&tokenizer),
      budget_(compiled.reasoning_budget < 0
                  ? -1
                  : analysis_budget(compiled.reasoning_budget, max_new_tokens,
                                    compiled.grammar->grammar.shortest(compiled.grammar->grammar.start()))),
      end_(harmony_special(tokenizer, "<|end|>")),
      channel_id_(harmony_special(tokenizer, "<|channel|>")),
      message_(harmony_special(tokenizer, "<|message|>")) {}

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
