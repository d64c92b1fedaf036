#include "engine/sched/generator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace tps {

// A step as rank 0 sends it: the batch (with its cache copies), the sequences that join (their
// sampling parameters, and the constraint text of those constrained) and
// leave, or the end of the run.
struct Generator::Plan {
  int32_t stop = 0;
  Batch batch;
  std::vector<Join> joins;
  std::vector<int32_t> leaves;
  std::vector<std::pair<int32_t, std::string>> constraints;
  std::vector<std::pair<int32_t, std::vector<int32_t>>> forced;

  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out = fixed_bytes();
    auto put = [&](const void* p, size_t n) {
      out.insert(out.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    };
    // Each list: its count, then each sequence, its items' count and bytes.
    auto put_list = [&](const auto& list) {
      const uint64_t count = list.size();
      put(&count, sizeof count);
      for (const auto& [seq, items] : list) {
        const uint64_t n = items.size();
        put(&seq, sizeof seq), put(&n, sizeof n), put(items.data(), n * sizeof(items[0]));
      }
    };
    put_list(constraints), put_list(forced);
    return out;
  }

  std::vector<uint8_t> fixed_bytes() const {
    const int32_t head[7] = {stop,
                             static_cast<int32_t>(batch.entries.size()),
                             static_cast<int32_t>(batch.tokens.size()),
                             static_cast<int32_t>(batch.blocks.size()),
                             static_cast<int32_t>(batch.copies.size()),
                             static_cast<int32_t>(joins.size()),
                             static_cast<int32_t>(leaves.size())};
    const size_t sizes[7] = {sizeof head,
                             batch.entries.size() * sizeof(BatchEntry),
                             batch.tokens.size() * sizeof(int32_t),
                             batch.blocks.size() * sizeof(int32_t),
                             batch.copies.size() * sizeof(BlockCopy),
                             joins.size() * sizeof(Join),
                             leaves.size() * sizeof(int32_t)};
    const void* parts[7] = {
        head,         batch.entries.data(), batch.tokens.data(), batch.blocks.data(), batch.copies.data(),
        joins.data(), leaves.data()};
    size_t total = 0;
    for (size_t n : sizes) total += n;
    std::vector<uint8_t> out(total);
    for (size_t i = 0, at = 0; i < 7; at += sizes[i++])
      if (sizes[i]) std::memcpy(out.data() + at, parts[i], sizes[i]);
    return out;
  }

  static Plan parse(const std::vector<uint8_t>& in) {
    Plan p;
    size_t at = 0;
    auto take = [&](void* dst, size_t n) {
      if (at + n > in.size()) throw Error("a step's plan arrived cut short");
      if (n) std::memcpy(dst, in.data() + at, n);  // (an empty vector's data() may be null)
      at += n;
    };
    int32_t head[7];
    take(head, sizeof head);
    p.stop = head[0];
    p.batch.entries.resize(head[1]), p.batch.tokens.resize(head[2]), p.batch.blocks.resize(head[3]);
    p.batch.copies.resize(head[4]), p.joins.resize(head[5]), p.leaves.resize(head[6]);
    take(p.batch.entries.data(), p.batch.entries.size() * sizeof(BatchEntry));
    take(p.batch.tokens.data(), p.batch.tokens.size() * sizeof(int32_t));
    take(p.batch.blocks.data(), p.batch.blocks.size() * sizeof(int32_t));
    take(p.batch.copies.data(), p.batch.copies.size() * sizeof(BlockCopy));
    take(p.joins.data(), p.joins.size() * sizeof(Join));
    take(p.leaves.data(), p.leaves.size() * sizeof(int32_t));
    auto take_list = [&](auto& list) {
      uint64_t count = 0;
      take(&count, sizeof count);
      for (uint64_t i = 0; i < count; ++i) {
        int32_t seq = 0;
        uint64_t n = 0;
        take(&seq, sizeof seq), take(&n, sizeof n);
        auto& items = list.emplace_back(seq, typename std::decay_t<decltype(list)>::value_type::second_type()).second;
        if (n > (in.size() - at) / sizeof(items[0])) throw Error("a step's plan arrived cut short");
        items.resize(n);
        take(items.data(), n * sizeof(items[0]));
      }
    };
    take_list(p.constraints), take_list(p.forced);
    return p;
  }
};

namespace {

// Blocks of one kind a pool holds at most: their positions must count in
// an int.
constexpr int64_t kMaxPoolBlocks = INT32_MAX / kKvBlock;

}  // namespace

SchedulerOptions scheduler_options(const GeneratorOptions& o, const ModelConfig& c, const Shard& shard) {
  if (o.max_sequences < 1) throw InputError(cat("--parallel ", o.max_sequences, ": expected at least 1 sequence"));
  if (o.step_tokens < o.max_sequences)
    throw InputError(cat("--batch ", o.step_tokens, " is less than --parallel ", o.max_sequences,
                         ": a step must carry every running sequence's next token"));
  if (o.kv_positions < 0) throw InputError(cat("--kv-size ", o.kv_positions, ": expected a number of positions"));
  SchedulerOptions s;
  s.max_sequences = o.max_sequences;
  s.step_tokens = o.step_tokens;
  s.context = o.context;
  s.window = static_cast<int>(c.sliding_window);
  s.stages = shard.mode == SplitMode::layers ? shard.ranks : 1;
  s.prefix_reuse = o.prefix_reuse;
  if (o.draft_tokens < 0) throw InputError(cat("draft tokens ", o.draft_tokens, ": expected 0 or more"));
  s.draft_tokens = o.draft_tokens, s.draft_by_cost = o.draft_by_cost;
  s.draft_corpus_tokens = kDraftCorpusTokens;
  const int64_t sliding = sliding_blocks_needed(s);
  if (sliding > kMaxPoolBlocks)
    throw InputError(cat("--batch ", o.step_tokens, " with --parallel ", o.max_sequences,
                         ": the sliding-window layers would need ", sliding, " KV blocks, more than a KV pool holds (",
                         kMaxPoolBlocks, "); lower --batch or --parallel"));
  s.sliding_blocks = static_cast<int>(sliding);
  if (o.kv_bytes > 0) {
    const uint64_t sliding = KvPool::block_bytes(c, shard, o.kv_type, true) * static_cast<uint64_t>(s.sliding_blocks);
    const uint64_t full = std::max<uint64_t>(1, KvPool::block_bytes(c, shard, o.kv_type, false));
    if (o.kv_bytes <= sliding)
      throw InputError(cat("--kv-size ", o.kv_bytes, " bytes: the sliding-window layers alone need ", sliding, " for ",
                           o.max_sequences, " sequences"));
    s.full_blocks = static_cast<int>(std::min<uint64_t>((o.kv_bytes - sliding) / full, kMaxPoolBlocks));
  } else {
    const int64_t positions = o.kv_positions > 0 ? o.kv_positions : int64_t{o.context} * o.max_sequences;
    if (positions > (1 << 30))
      throw InputError(cat("--ctx ", o.context, " x --parallel ", o.max_sequences, " = ", positions,
                           " positions: more than a KV pool holds (2^30; use --kv-size)"));
    s.full_blocks = blocks_for(static_cast<int>(positions));
  }
  return s;
}

uint64_t kv_pool_bytes(const SchedulerOptions& s, KvType type, const ModelConfig& c, const Shard& shard) {
  return KvPool::block_bytes(c, shard, type, false) * s.full_blocks +
         KvPool::block_bytes(c, shard, type, true) * s.sliding_blocks;
}

namespace {

// A step's logits rows at most: every sequence's next token and its draft's.
uint64_t logit_rows(const GeneratorOptions& o) {
  return std::min<uint64_t>(o.step_tokens, uint64_t(o.max_sequences) * (1 + std::max(o.draft_tokens, 0)));
}

ForwardOptions forward_options(const GeneratorOptions& o) {
  return ForwardOptions{
      .step_tokens = o.step_tokens, .context = o.context, .yarn_truncate = o.yarn_truncate, .kernels = o.kernels};
}

}  // namespace

uint64_t generator_bytes(const GeneratorOptions& o, const ModelConfig& c, const Shard& shard) {
  const uint64_t logits = logit_rows(o) * shard.share.vocab.size() * sizeof(float);
  const uint64_t tier = o.prefix_reuse ? o.cache_ram_bytes : 0;  // at its cap
  return kv_pool_bytes(scheduler_options(o, c, shard), o.kv_type, c, shard) +
         ForwardPass::buffer_bytes(c, shard, forward_options(o)) + logits + tier;
}

uint64_t tier_unit_bytes(KvType type, const ModelConfig& c, const Shard& shard) {
  return kTierFullPerSliding * KvPool::block_bytes(c, shard, type, false) + KvPool::block_bytes(c, shard, type, true);
}

int tier_units(const GeneratorOptions& o, const ModelConfig& c, const Shard& shard) {
  if (o.cache_ram_bytes == 0) return 0;
  const uint64_t unit = tier_unit_bytes(o.kv_type, c, shard);
  return static_cast<int>(std::min<uint64_t>(o.cache_ram_bytes / std::max<uint64_t>(unit, 1), 1 << 24));
}

namespace {

// The scheduler's options with the RAM tier's slots: the same on every rank
// (the least any rank's cap holds), since every rank mirrors rank 0's slots.
SchedulerOptions with_tier(SchedulerOptions s, const GeneratorOptions& o, const Model& m, Exchange& ex) {
  s.boundary_token = harmony::kStart;  // harmony's messages begin with <|start|>
  if (o.cache_ram_bytes == 0 || !o.prefix_reuse) return s;
  const int32_t mine = tier_units(o, m.config, m.shard);
  std::vector<int32_t> all(ex.size());
  if (ex.size() > 1)
    ex.all_gather(&mine, all.data(), sizeof mine);
  else
    all[0] = mine;
  const int32_t units = *std::min_element(all.begin(), all.end());
  s.tier_full_slots = units * kTierFullPerSliding, s.tier_sliding_slots = units;
  return s;
}

void send_bytes(Exchange& ex, const std::vector<uint8_t>& bytes, int to) {
  const uint64_t n = bytes.size();
  ex.send(&n, sizeof n, to);
  ex.send(bytes.data(), n, to);
}

std::vector<uint8_t> recv_bytes(Exchange& ex, int from) {
  uint64_t n = 0;
  ex.recv(&n, sizeof n, from);
  std::vector<uint8_t> bytes(n);
  ex.recv(bytes.data(), n, from);
  return bytes;
}

}  // namespace

Generator::Generator(const Model& m, ThreadPool& pool, Exchange& exchange, const GeneratorOptions& o)
    : model_(m),
      exchange_(exchange),
      pass_(m, forward_options(o), pool, exchange),
      scheduler_(with_tier(scheduler_options(o, m.config, m.shard), o, m, exchange)),
      constraint_cache_(m.tokenizer) {
  const SchedulerOptions& s = scheduler_.options();
  kv_ = KvPool(m.config, m.shard, o.kv_type, s.full_blocks, s.sliding_blocks);
  tier_ = RamTier(KvPool::block_bytes(m.config, m.shard, o.kv_type, false),
                  KvPool::block_bytes(m.config, m.shard, o.kv_type, true), s.tier_full_slots, s.tier_sliding_slots);
  logits_.resize(logit_rows(o) * pass_.vocab_rows());
  if (!o.cache_dir.empty() && s.tier_full_slots > 0) {
    const Shard& sh = m.shard;
    const Clock::time_point t0 = Clock::now();
    disk_ = DiskTier(o.cache_dir,
                     DiskIdentity{model_identity(m.file, m.weights_salt), o.kv_type, sh.ranks, sh.mode, sh.rank},
                     o.cache_ram_bytes, tier_.block_bytes(false), tier_.block_bytes(true));
    disk_asked_ = true;
    load_disk_tier(t0);
  }
}

namespace {

// The long messages of a harmony prompt (a tool's output, a file pasted),
// JSON-escaped: a tool call's arguments that write them back quote them so,
// and tokenize them otherwise.
std::vector<std::vector<int32_t>> escaped_quotes(const std::vector<int32_t>& prompt, const Tokenizer& tok) {
  constexpr size_t kLong = 32;  // tokens: shorter messages are rarely written back
  std::vector<std::vector<int32_t>> out;
  for (size_t at = 0; at < prompt.size(); ++at) {
    if (prompt[at] != harmony::kMessage) continue;
    size_t end = at + 1;
    while (end < prompt.size() && prompt[end] != harmony::kEnd && prompt[end] != harmony::kCall &&
           prompt[end] != harmony::kReturn && prompt[end] != harmony::kStart)
      ++end;
    if (end - at - 1 >= kLong) {
      const std::string text = tok.decode(std::span<const int32_t>(prompt).subspan(at + 1, end - at - 1));
      const std::string quoted = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (quoted.size() - 2 != text.size() || quoted.compare(1, text.size(), text) != 0)  // something was escaped
        out.push_back(tok.encode(std::string_view(quoted).substr(1, quoted.size() - 2)));
    }
    at = end;
  }
  return out;
}

// Each rank's yes (1) or no (0) for every item, and'ed over the ranks.
std::vector<uint8_t> on_every_rank(Exchange& ex, std::vector<uint8_t> mine) {
  if (ex.size() == 1 || mine.empty()) return mine;
  std::vector<uint8_t> all(mine.size() * ex.size());
  ex.all_gather(mine.data(), all.data(), mine.size());
  for (int r = 0; r < ex.size(); ++r)
    for (size_t i = 0; i < mine.size(); ++i) mine[i] &= all[r * mine.size() + i];
  return mine;
}

}  // namespace

// Collective, before the first step: rank 0's valid blocks, most recently
// written first, that every rank has a valid file of and that fit the RAM
// tier's slots are read into the same slots on every rank; those read on
// every rank are then rank 0's TierIndex's, so a prefix that returns is a
// RAM tier hit. A block some rank lacks stays out (its slot free).
void Generator::load_disk_tier(Clock::time_point t0) {
  std::vector<DiskTier::Block> blocks = exchange_.rank() == 0 ? disk_.blocks() : std::vector<DiskTier::Block>();
  uint64_t n = blocks.size();
  if (exchange_.size() > 1) {
    exchange_.broadcast(&n, sizeof n, 0);
    blocks.resize(n);
    if (n) exchange_.broadcast(blocks.data(), n * sizeof(DiskTier::Block), 0);
  }
  std::vector<uint8_t> valid(n);
  for (size_t i = 0; i < n; ++i) valid[i] = disk_.has(blocks[i]);
  valid = on_every_rank(exchange_, std::move(valid));
  std::vector<int> slot(n, -1);
  int next[2] = {0, 0};
  for (size_t i = 0; i < n; ++i) {
    const int k = blocks[i].sliding ? 1 : 0;
    if (valid[i] && next[k] < tier_.slots(k)) slot[i] = next[k]++;
  }
  std::vector<uint8_t> read(n);
  for (size_t i = 0; i < n; ++i)
    read[i] = slot[i] >= 0 && disk_.read(blocks[i], tier_.fill(blocks[i].sliding, slot[i]));
  read = on_every_rank(exchange_, std::move(read));
  for (size_t i = n; i-- > 0;)  // oldest first: the newest end most recently used
    if (read[i]) {
      disk_.count_loaded(seconds_since(t0));
      if (exchange_.rank() == 0)
        scheduler_.adopt(blocks[i].sliding ? BlockKind::sliding : BlockKind::full, slot[i], blocks[i].key);
    }
}

// Collective, at the end of a run: the pool's cached blocks that the RAM
// tier lacks (those it has are on disk already) are written to the disk
// tier too, so that a prefix the pool never had to let go of survives the
// restart as well.
void Generator::save_pool_to_disk() {
  std::vector<BlockCopy> saves;
  if (exchange_.rank() == 0)
    for (BlockKind k : {BlockKind::full, BlockKind::sliding})
      for (const auto& [key, id] : scheduler_.blocks().cached(k))
        if (scheduler_.tier().find(k, key) < 0)
          saves.push_back(BlockCopy{.sliding = k == BlockKind::sliding, .block = id, .to_tier = 1, .key = key});
  uint64_t n = saves.size();
  if (exchange_.size() > 1) {
    exchange_.broadcast(&n, sizeof n, 0);
    saves.resize(n);
    if (n) exchange_.broadcast(saves.data(), n * sizeof(BlockCopy), 0);
  }
  if (!disk_.on()) return;
  std::vector<uint8_t> block(std::max(tier_.block_bytes(false), tier_.block_bytes(true)));
  for (const BlockCopy& c : saves) {
    kv_.copy_out(c.sliding != 0, c.block, block.data());
    disk_.write(DiskTier::Block{c.sliding, c.key}, block.data());
  }
}

// The step's copies between the pool and the RAM tier; the blocks that enter
// the RAM tier are written behind to the disk tier (in the step, before it
// runs: a block a step saves is one block of every layer of the rank, small
// next to the step's own work), and those that come back are its most
// recently used.
void Generator::copy_blocks(const std::vector<BlockCopy>& copies) {
  tier_.apply(copies, kv_);
  if (!disk_.on()) return;
  for (const BlockCopy& c : copies)
    if (c.to_tier)
      disk_.write(DiskTier::Block{c.sliding, c.key}, tier_.data(c.sliding != 0, c.slot));
    else
      disk_.touch(DiskTier::Block{c.sliding, c.key});
}

int Generator::add(std::vector<int32_t> prompt, const SequenceParams& params) {
  validate(params.sampler);
  if (params.max_new_tokens < 1) throw InputError(cat("max tokens ", params.max_new_tokens, ": expected at least 1"));
  if (params.top_logprobs < 0 || params.top_logprobs > kMaxTopLogprobs)
    throw InputError(cat("top logprobs ", params.top_logprobs, ": expected 0..", kMaxTopLogprobs));
  for (int32_t id : prompt)
    if (id < 0 || static_cast<uint32_t>(id) >= model_.config.n_vocab)
      throw InputError(cat("token id ", id, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")"));
  if (!params.constraint.empty()) constraint_cache_.get(params.constraint);  // refused here, not on a rank
  if (!params.forced.empty() && !params.constraint.empty())
    throw InputError("forced tokens and a constraint together: the constraint would follow the model's picks");
  for (int32_t id : params.forced)
    if (id < 0 || static_cast<uint32_t>(id) >= model_.config.n_vocab)
      throw InputError(cat("forced token id ", id, " is outside the vocabulary (0..", model_.config.n_vocab - 1, ")"));
  const int seq = scheduler_.add(std::move(prompt), params.max_new_tokens);
  if (scheduler_.options().draft_tokens > 0)
    for (const std::vector<int32_t>& quote : escaped_quotes(scheduler_.sequence(seq).tokens, model_.tokenizer))
      scheduler_.add_draft_source(seq, quote);
  params_[seq] = params;
  return seq;
}

bool Generator::cancel(int seq) {
  const Scheduler::Sequence& s = scheduler_.sequence(seq);
  if (s.in_flight) return false;
  if (s.admitted) leaving_.push_back(seq);
  scheduler_.finish(seq);
  params_.erase(seq), told_.erase(seq);
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
  if (disk_asked_) save_pool_to_disk();
}

Generator::Plan Generator::make_plan(bool stop) {
  Plan p;
  p.stop = stop;
  p.leaves.swap(leaving_);
  // admitted() names the last step's newcomers: a stop plan has none (they
  // may even have finished already, e.g. after one token).
  if (stop) return p;
  p.batch = batch_;
  for (int seq : scheduler_.admitted()) {
    const SequenceParams& sp = params_.at(seq);
    p.joins.push_back(Join{seq, sp.top_logprobs, sp.max_new_tokens, sp.sampler});
    if (!sp.constraint.empty()) p.constraints.emplace_back(seq, sp.constraint);
    if (!sp.forced.empty()) p.forced.emplace_back(seq, sp.forced);
  }
  return p;
}

void Generator::tell_waiting(const Events& events) {
  const int seq = scheduler_.next_waiting();
  if (seq < 0) return;
  const std::string& why = scheduler_.sequence(seq).waiting_for;
  if (why.empty() || told_[seq] == why) return;
  told_[seq] = why;
  events.waiting(seq, why);
}

void Generator::apply(const Plan& p) {
  std::map<int32_t, int32_t> max_new_tokens;
  for (const Join& j : p.joins) {
    samplers_.insert_or_assign(j.seq, Sampler(j.sampler));
    alternatives_[j.seq] = j.top_logprobs;
    max_new_tokens[j.seq] = j.max_new_tokens;
  }
  for (const auto& [seq, text] : p.constraints)  // each joins in the same plan
    constraints_.insert_or_assign(seq, SequenceConstraint(constraint_cache_.get(text), model_.tokenizer,
                                                          reasoning_budget(text), max_new_tokens.at(seq)));
  for (const auto& [seq, tokens] : p.forced) forced_.insert_or_assign(seq, Forced{tokens});
  for (int32_t seq : p.leaves)
    samplers_.erase(seq), alternatives_.erase(seq), constraints_.erase(seq), forced_.erase(seq);
}

// The rows of a draft (an entry that wants every row's logits) are drawn
// as plain decoding would draw them one step at a time: row i with the
// sequence's sampler as it would stand after i draws (a draw takes one
// number from it, none when greedy). Rows are taken while each row's token
// is the draft's next one; the sampler then stands where it would after
// drawing the rows taken. So the tokens -- and with a seed, the draws --
// are those of decoding without a draft.
std::vector<Generator::Chosen> Generator::choose(const Batch& batch) {
  const int64_t width = pass_.vocab_rows();
  std::vector<int32_t> seqs;
  std::vector<Draw> draws;
  std::vector<Sampler> drafted;  // a draft's rows' samplers
  drafted.reserve(batch.logit_rows());
  for (const BatchEntry& e : batch.entries) {
    Sampler& own = samplers_.at(e.seq);
    for (int i = 0; i < e.logits; ++i) {
      Sampler* sampler = &own;
      if (e.logits > 1) {
        sampler = &drafted.emplace_back(i == 0 ? own : drafted.back());
        if (i > 0 && sampler->params().temperature > 0) sampler->uniform();
      }
      seqs.push_back(e.seq);
      draws.push_back(Draw{sampler, std::min(alternatives_.at(e.seq), kMaxTopLogprobs)});
    }
  }
  // A constraint that gives up (its work for a token past the matcher's
  // limit) ends its sequence without a token; its row is still drawn from,
  // unmasked, so that every rank takes part in the same draws. Work is
  // counted, not timed: every sampling rank gives up at the same token.
  std::vector<uint8_t> gave_up(seqs.size(), 0);
  auto give_up = [&](size_t i, const GrammarTooCostly& e) {
    gave_up[i] = 1;
    log_warn("sequence ", seqs[i], ": its constraint gave up: ", e.what());
  };
  // A draft's row i is masked by the constraint as it would stand after the
  // draft's first i tokens (a copy followed through them). A row it cannot
  // mask -- past a drafted token it refuses, allows nothing after, or would
  // give up on -- is cut: the draft ends before it, so the next step meets
  // that state as plain decoding would (or the sequence ended first: a stop
  // token the grammar allows nothing after).
  std::vector<uint8_t> cut(seqs.size(), 0);
  for (size_t i = 0; const BatchEntry& e : batch.entries) {
    auto c = constraints_.find(e.seq);
    if (c == constraints_.end()) {
      i += e.logits;
      continue;
    }
    std::optional<SequenceConstraint> ahead;
    if (e.logits > 1) ahead.emplace(c->second);
    bool reachable = true;
    for (int row = 0; row < e.logits; ++row, ++i) {
      const std::span<float> logits(logits_.data() + i * width, static_cast<size_t>(width));
      try {
        if (row > 0) reachable = reachable && ahead->accept(batch.tokens[e.first + row]);
        if (reachable && !(row == 0 ? c->second : *ahead).mask(logits, model_.shard.share.vocab.begin)) {
          if (row == 0) throw Error(cat("sequence ", e.seq, ": its constraint allows no next token"));
          reachable = false;
        }
      } catch (const GrammarTooCostly& x) {
        if (row == 0) give_up(i, x);
        reachable = false;
      }
      cut[i] = row > 0 && !reachable;
    }
  }
  const std::span<const float> rows(logits_.data(), seqs.size() * width);
  std::vector<Pick> picks =
      pick(shard_rows(model_.shard, model_.config.n_vocab, rows, width, exchange_, alone_), draws);
  std::vector<Chosen> chosen;
  size_t i = 0;
  for (size_t d = 0; const BatchEntry& e : batch.entries) {
    const size_t first = i, first_drafted = d, before = chosen.size();
    if (e.logits > 1) d += e.logits;
    auto forced = forced_.find(e.seq);
    for (int row = 0; row < e.logits; ++row, ++i) {
      auto c = constraints_.find(seqs[i]);
      try {
        if (!gave_up[i] && c != constraints_.end() && !c->second.accept(picks[i].id))
          throw Error(cat("sequence ", seqs[i], ": its constraint refused the token it allowed (", picks[i].id, ")"));
      } catch (const GrammarTooCostly& e) {
        give_up(i, e);
      }
      if (gave_up[i]) picks[i] = Pick{};
      if (forced != forced_.end() && forced->second.next + row < forced->second.tokens.size())
        picks[i].id = forced->second.tokens[forced->second.next + row];
      chosen.push_back(Chosen{e.seq, picks[i]});
      if (e.logits > 1 && (row + 1 == e.logits || picks[i].id != batch.tokens[e.first + row + 1] || cut[i + 1])) {
        samplers_.at(e.seq) = drafted[first_drafted + row];  // this row's, after its draw
        i = first + e.logits;
        break;
      }
    }
    if (forced != forced_.end()) forced->second.next += chosen.size() - before;
  }
  return chosen;
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
        params_.erase(e.seq), told_.erase(e.seq);
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
  const SequenceParams& p = params_.at(seq);
  const Scheduler::Sequence& s = scheduler_.sequence(seq);
  return sequence_end(token, p.stop_tokens, static_cast<int>(s.tokens.size()) - s.prompt, p.max_new_tokens,
                      computed >= scheduler_.options().context);
}

void Generator::run_together(const Events& events) {
  const bool root = exchange_.rank() == 0;
  for (;;) {
    Plan plan;
    if (root) {
      if (!events.between_steps(scheduler_.idle())) {
        plan = make_plan(true);
      } else if (scheduler_.next_step(batch_)) {
        plan = make_plan(false);
      } else {
        if (!scheduler_.idle()) throw Error("sequences wait although nothing runs (a scheduler bug)");
        continue;  // idle: between_steps may wait for work
      }
      tell_waiting(events);
    }
    if (exchange_.size() > 1) {
      std::vector<uint8_t> bytes = root ? plan.bytes() : std::vector<uint8_t>();
      uint64_t n = bytes.size();
      exchange_.broadcast(&n, sizeof n, 0);
      bytes.resize(n);
      exchange_.broadcast(bytes.data(), n, 0);
      if (!root) plan = Plan::parse(bytes);
    }
    if (plan.stop) return;
    apply(plan);
    const Batch& batch = root ? batch_ : plan.batch;
    Clock::time_point t0 = Clock::now();
    copy_blocks(batch.copies);
    pass_.run(batch, kv_, logits_.data());
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
      if (!scheduler_.next_step(batch_)) break;
      tell_waiting(events);
      send_bytes(exchange_, make_plan(false).bytes(), next);
      InFlight f;
      f.batch = batch_;
      f.chosen.resize(f.batch.logit_rows());
      // Posted before this rank sends the step's hidden state on, so the
      // last rank never waits for it to listen.
      f.handle = exchange_.post_recv(f.chosen.data(), f.chosen.size() * sizeof(Chosen), last);
      const Clock::time_point t0 = Clock::now();
      copy_blocks(f.batch.copies);
      pass_.run(f.batch, kv_, nullptr);
      count_step(f.batch, seconds_since(t0));
      in_flight.push_back(std::move(f));
    }
    if (in_flight.empty()) {
      if (stopping) {
        send_bytes(exchange_, make_plan(true).bytes(), next);
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
    const std::vector<uint8_t> bytes = recv_bytes(exchange_, me - 1);
    if (me != last) send_bytes(exchange_, bytes, me + 1);
    const Plan plan = Plan::parse(bytes);
    if (plan.stop) return;
    if (me == last) apply(plan);
    Clock::time_point t0 = Clock::now();
    copy_blocks(plan.batch.copies);
    pass_.run(plan.batch, kv_, logits_.data());
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

void Generator::StepCostFit::add(double tokens, double seconds) {
  constexpr double kKeep = 0.99;  // a step's weight after each later one: the last few hundred count
  w = kKeep * w + 1, n = kKeep * n + tokens, t = kKeep * t + seconds;
  nn = kKeep * nn + tokens * tokens, nt = kKeep * nt + tokens * seconds;
}

// Only once steps of several sizes were seen, and for a line that makes sense.
bool Generator::StepCostFit::line(double& fixed, double& per_token) const {
  const double spread = w * nn - n * n;
  if (w < 2 || spread <= 1e-6 * w * w) return false;
  per_token = (w * nt - n * t) / spread;
  fixed = (t - per_token * n) / w;
  return per_token > 0 && fixed > 0;
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
