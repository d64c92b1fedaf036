#include "engine/sched/generator.h"

#include <algorithm>
#include <deque>

#include "runtime/clock.h"
#include "runtime/error.h"

namespace tps {

namespace {

// How long a constrained sequence is held after its announce, in compiles
// of its spec as rank 0 timed it (next_step). The other ranks compile it
// beside their steps' threads: with two ranks of one thread and the
// compile's on two cores, 2 was measured short (the first compile, 100-150
// ms with the vocabulary's index, not done at the join), 4 enough.
constexpr double kHoldCompiles = 4;

// The scheduler's options with the RAM tier's slots the cache agreed on.
SchedulerOptions with_slots(SchedulerOptions s, const RamTier& tier) {
  s.tier_full_slots = tier.slots(BlockKind::full), s.tier_sliding_slots = tier.slots(BlockKind::sliding);
  return s;
}

}  // namespace

Generator::Generator(const Model& m, ThreadPool& pool, Exchange& exchange, const GeneratorOptions& o)
    : model_(m),
      exchange_(exchange),
      pass_(m, forward_options(o), pool, exchange),
      cache_(m, exchange, prompt_cache_options(o, scheduler_options(o, m.config, m.shard))),
      scheduler_(with_slots(scheduler_options(o, m.config, m.shard), cache_.tier())),
      constraint_cache_(m.tokenizer) {
  logits_.resize(logit_rows(o) * pass_.vocab_rows());
  for (const PromptCache::Loaded& b : cache_.load())
    if (exchange_.rank() == 0) scheduler_.adopt(b.kind, b.slot, b.key);
}

int Generator::add(std::vector<int32_t> prompt, const SequenceParams& params) {
  validate(params.sampler);
  if (params.max_new_tokens < 1) throw InputError(cat("max tokens ", params.max_new_tokens, ": expected at least 1"));
  if (params.top_logprobs < 0 || params.top_logprobs > kMaxTopLogprobs)
    throw InputError(cat("top logprobs ", params.top_logprobs, ": expected 0..", kMaxTopLogprobs));
  for (int32_t id : prompt)
    if (id < 0 || static_cast<uint32_t>(id) >= model_.config.n_vocab)
      throw InputError(cat("token id ", id, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")"));
  // Compiled here (a server's check has it cached): refused here, not on a rank.
  const ConstraintCache::Compiled compiled = params.constraint ? constraint_cache_.get(*params.constraint) : nullptr;
  if (!params.forced.empty() && compiled && compiled->grammar)
    throw InputError("forced tokens and a constraint together: the constraint would follow the model's picks");
  for (int32_t id : params.forced)
    if (id < 0 || static_cast<uint32_t>(id) >= model_.config.n_vocab)
      throw InputError(cat("forced token id ", id, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")"));
  const int seq = scheduler_.add(std::move(prompt), params.max_new_tokens);
  if (scheduler_.options().draft_tokens > 0) {
    const std::vector<std::vector<int32_t>> computed =
        params.draft_sources ? std::vector<std::vector<int32_t>>()
                             : escaped_messages(scheduler_.sequence(seq).tokens, model_.tokenizer);
    for (const std::vector<int32_t>& source : params.draft_sources ? *params.draft_sources : computed)
      scheduler_.add_draft_source(seq, source);
  }
  Added& added = added_[seq];
  added.params = params;
  added.params.draft_sources.reset();  // the drafter has them
  added.params.constraint.reset();
  if (compiled && compiled->grammar) {  // else it holds nothing
    added.constraint = params.constraint->text(), added.compile_seconds = compiled->seconds;
    unannounced_.push_back(seq);
    if (exchange_.size() > 1) held_.push_back(seq), scheduler_.hold(seq, true);
  }
  return seq;
}

bool Generator::cancel(int seq) {
  const Scheduler::Sequence& s = scheduler_.sequence(seq);
  if (s.in_flight) return false;
  const Added& a = added_.at(seq);
  if (s.admitted || a.join_after) leaving_.push_back(seq);  // the other ranks drop what they had of it
  std::erase(held_, seq), std::erase(unannounced_, seq);
  scheduler_.finish(seq);
  added_.erase(seq);
  return true;
}

void Generator::run(const Events& events) {
  const Shard& s = model_.shard;
  if (s.mode == SplitMode::layers && s.ranks > 1) {
    if (s.rank == 0)
      run_pipeline_first(events);
    else
      run_pipeline_stage();
  } else {
    run_together(events);
  }
  // The pool's cached blocks that the RAM tier lacks (those it has are on
  // disk already) go to the disk tier too.
  std::vector<BlockCopy> saves;
  if (exchange_.rank() == 0 && cache_.saves())
    for (BlockKind k : kBlockKinds)
      for (const auto& [key, id] : scheduler_.blocks().cached(k))
        if (scheduler_.tier().find(k, key) < 0) saves.push_back(BlockCopy{.kind = k, .block = id, .key = key});
  cache_.save(std::move(saves));
}

StepPlan Generator::make_plan(bool stop) {
  StepPlan p;
  p.stop = stop;
  p.leaves.swap(leaving_);
  // admitted() names the last step's newcomers: a stop plan has none (they
  // may even have finished already, e.g. after one token).
  if (stop) return p;
  p.batch = batch_;
  for (int seq : unannounced_) {
    Added& a = added_.at(seq);
    p.announces.emplace_back(seq, a.constraint);
    a.join_after = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(kHoldCompiles * a.compile_seconds));
  }
  unannounced_.clear();
  for (int seq : scheduler_.admitted()) {
    const SequenceParams& sp = added_.at(seq).params;
    p.joins.push_back(StepPlan::Join{seq, sp.top_logprobs, sp.max_new_tokens, sp.sampler});
    if (!sp.forced.empty()) p.forced.emplace_back(seq, sp.forced);
  }
  return p;
}

// A constrained sequence is held out of the steps until its constraint has
// been announced and has had kHoldCompiles times what rank 0's compile
// took, so that the other ranks, compiling it meanwhile, have it when it
// joins and no step waits for it (Stats::constraint_join_waits counts
// those that did); or until nothing runs (no step to keep going: it joins in
// the plan that announces it, and its first step waits for the compile).
// One rank holds none: its compile is done. Then the scheduler's next step.
bool Generator::next_step() {
  const Clock::time_point now = Clock::now();
  const bool idle = scheduler_.running() == 0;
  std::erase_if(held_, [&](int seq) {
    const Added& a = added_.at(seq);
    if (!idle && !(a.join_after && now >= *a.join_after)) return false;
    scheduler_.hold(seq, false);
    return true;
  });
  return scheduler_.next_step(batch_);
}

void Generator::tell_waiting(const Events& events) {
  const int seq = scheduler_.next_waiting();
  if (seq < 0) return;
  const std::string& why = scheduler_.sequence(seq).waiting_for;
  std::string& told = added_.at(seq).told;
  if (why.empty() || told == why) return;
  told = why;
  events.waiting(seq, why);
}

void Generator::apply(const StepPlan& p) {
  ++plans_;
  for (const auto& [seq, text] : p.announces) announced_.emplace(seq, Announced{constraint_cache_.start(text), plans_});
  for (const StepPlan::Join& j : p.joins) {
    Sampled& s =
        sampled_.insert_or_assign(j.seq, Sampled(j.sampler, std::min(j.top_logprobs, kMaxTopLogprobs))).first->second;
    const auto a = announced_.find(j.seq);
    if (a == announced_.end()) continue;
    ++stats_.constraint_joins;
    stats_.constraint_joins_announced_before += a->second.plan < plans_;
    stats_.constraint_join_waits += a->second.compiled.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    s.constraint.emplace(*a->second.compiled.get(), model_.tokenizer, j.max_new_tokens);
    announced_.erase(a);
  }
  for (const auto& [seq, tokens] : p.forced) sampled_.at(seq).forced = tokens;
  for (int32_t seq : p.leaves) sampled_.erase(seq), announced_.erase(seq);
}

// The chosen tokens join their sequences (a sequence that ends at one takes
// none after it) and every entry's computed positions are counted before
// any caller hears of them, so that one that cancels another sequence finds
// it out of flight.
void Generator::complete(const Batch& batch, const std::vector<Chosen>& chosen, const Events& events) {
  struct Taken {
    size_t first = 0, count = 0;
    SequenceEnd end = SequenceEnd::none;
  };
  std::vector<Taken> taken;
  size_t r = 0;
  for (const BatchEntry& e : batch.entries) {
    Taken t{r};
    for (; r < chosen.size() && chosen[r].seq == e.seq; ++r) {
      if (t.end != SequenceEnd::none) continue;
      const Pick& p = chosen[r].pick;
      if (p.id >= 0) scheduler_.append(e.seq, p.id);
      ++t.count;
      const int computed = e.pos + (e.logits > 1 ? static_cast<int>(t.count) : e.count);
      t.end = p.id < 0 ? SequenceEnd::constraint : end_of(e.seq, p.id, computed);
    }
    scheduler_.ran(e, e.logits > 1 ? static_cast<int>(t.count) : e.count);
    if (e.logits > 0) taken.push_back(t);
  }
  size_t k = 0;
  for (const BatchEntry& e : batch.entries) {
    if (e.logits == 0) continue;
    const Taken& t = taken[k++];
    for (size_t i = 0; i < t.count; ++i) {
      const SequenceEnd end = i + 1 == t.count ? t.end : SequenceEnd::none;
      if (!events.token(e.seq, chosen[t.first + i].pick, end) || end != SequenceEnd::none) {
        scheduler_.finish(e.seq);
        added_.erase(e.seq);
        leaving_.push_back(e.seq);
        break;
      }
    }
  }
}

// Why a sequence ends with the token just appended, `computed` positions in
// the pool: the one place that decides it, so a front end cannot run a
// sequence past its promised blocks.
SequenceEnd Generator::end_of(int seq, int32_t token, int computed) const {
  const SequenceParams& p = added_.at(seq).params;
  const Scheduler::Sequence& s = scheduler_.sequence(seq);
  return sequence_end(token, p.stop_tokens, static_cast<int>(s.tokens.size()) - s.prompt, p.max_new_tokens,
                      computed >= scheduler_.options().context);
}

void Generator::run_together(const Events& events) {
  const bool root = exchange_.rank() == 0;
  for (;;) {
    StepPlan plan;
    if (root) {
      if (!events.between_steps(scheduler_.idle())) {
        plan = make_plan(true);
      } else if (next_step()) {
        plan = make_plan(false);
      } else {
        if (!scheduler_.idle()) throw Error("sequences wait although nothing runs (a scheduler bug)");
        continue;  // idle: between_steps may wait for work
      }
      tell_waiting(events);
    }
    broadcast_plan(exchange_, plan);
    if (plan.stop) return;
    apply(plan);
    const Batch& batch = root ? batch_ : plan.batch;
    Clock::time_point t0 = Clock::now();
    cache_.copy(batch.copies);
    pass_.run(batch, cache_.kv(), logits_.data());
    const double forward = seconds_since(t0);
    t0 = Clock::now();
    const std::vector<Chosen> chosen = choose(batch);
    stats_.sampling_seconds += seconds_since(t0);
    count_step(batch, forward);
    if (root) complete(batch, chosen, events);
  }
}

void Generator::run_pipeline_first(const Events& events) {
  const int next = 1, last = model_.shard.ranks - 1;
  struct InFlight {
    Batch batch;
    std::vector<Chosen> chosen;
    int handle = -1;
  };
  std::deque<InFlight> in_flight;
  bool stopping = false;
  for (;;) {
    while (!stopping) {
      if (!events.between_steps(scheduler_.idle() && in_flight.empty())) {
        stopping = true;
        break;
      }
      if (!next_step()) break;
      tell_waiting(events);
      send_plan(exchange_, make_plan(false).bytes(), next);
      InFlight f;
      f.batch = batch_;
      f.chosen.resize(f.batch.logit_rows());
      // Posted before this rank sends the step's hidden state on, so the
      // last rank never waits for it to listen.
      f.handle = exchange_.post_recv(f.chosen.data(), f.chosen.size() * sizeof(Chosen), last);
      const Clock::time_point t0 = Clock::now();
      cache_.copy(f.batch.copies);
      pass_.run(f.batch, cache_.kv(), nullptr);
      count_step(f.batch, seconds_since(t0));
      in_flight.push_back(std::move(f));
    }
    if (in_flight.empty()) {
      if (stopping) {
        send_plan(exchange_, make_plan(true).bytes(), next);
        return;
      }
      if (!scheduler_.idle()) throw Error("sequences wait although nothing runs (a scheduler bug)");
      continue;
    }
    InFlight& f = in_flight.front();
    f.chosen.resize(exchange_.wait_recv(f.handle) / sizeof(Chosen));
    complete(f.batch, f.chosen, events);
    in_flight.pop_front();
  }
}

void Generator::run_pipeline_stage() {
  const int me = model_.shard.rank, last = model_.shard.ranks - 1;
  for (;;) {
    const std::vector<uint8_t> bytes = recv_plan(exchange_, me - 1);
    if (me != last) send_plan(exchange_, bytes, me + 1);
    const StepPlan plan = StepPlan::parse(bytes);
    if (plan.stop) return;
    if (me == last) apply(plan);
    Clock::time_point t0 = Clock::now();
    cache_.copy(plan.batch.copies);
    pass_.run(plan.batch, cache_.kv(), logits_.data());
    const double forward = seconds_since(t0);
    if (me != last) {
      count_step(plan.batch, forward);
      continue;
    }
    t0 = Clock::now();
    const std::vector<Chosen> chosen = choose(plan.batch);
    stats_.sampling_seconds += seconds_since(t0);
    count_step(plan.batch, forward);
    exchange_.send(chosen.data(), chosen.size() * sizeof(Chosen), 0);
  }
}

void Generator::count_step(const Batch& batch, double forward_seconds) {
  stats_.forward_seconds += forward_seconds;
  ++stats_.steps, stats_.tokens += batch.token_count(), ++stats_.step_tokens[batch.token_count()];
  const double exchanged = exchange_.stats().seconds;
  const uint64_t exchanged_bytes = exchange_.stats().bytes;
  if (std::all_of(batch.entries.begin(), batch.entries.end(),
                  [](const BatchEntry& e) { return e.logits == e.count; })) {
    ++stats_.decode_steps, stats_.decode_tokens += batch.token_count();
    Stats::StepCost& cost = stats_.decode_cost[batch.token_count()];
    const double seconds = forward_seconds + stats_.sampling_seconds - counted_sampling_;
    ++cost.steps, cost.seconds += seconds;
    step_cost_.add(batch.token_count(), seconds);
    double fixed = 0, per_token = 0;
    if (exchange_.rank() == 0 && step_cost_.line(fixed, per_token)) scheduler_.set_step_cost(fixed, per_token);
    stats_.decode += pass_.timings() - counted_;
    stats_.decode_sampling_seconds += stats_.sampling_seconds - counted_sampling_;
    stats_.decode_exchange_seconds += exchanged - counted_exchange_;
    stats_.decode_exchange_bytes += exchanged_bytes - counted_exchange_bytes_;
  }
  counted_ = pass_.timings(), counted_sampling_ = stats_.sampling_seconds, counted_exchange_ = exchanged;
  counted_exchange_bytes_ = exchanged_bytes;
}

}  // namespace tps
