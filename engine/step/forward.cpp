#include "engine/step/forward.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "engine/kernels/attention_state.h"
#include "engine/kernels/layer_math.h"
#include "engine/step/parallel_products.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace tps {

void check_context(const ModelConfig& c, int context) {
  if (context < 1) throw InputError(cat("--ctx ", context, ": expected at least 1 position"));
  if (static_cast<uint32_t>(context) > c.n_ctx_train)
    throw InputError(cat("--ctx ", context, ": more than the model's context length of ", c.n_ctx_train, " positions"));
}

ForwardPass::ForwardPass(const Model& m, const ForwardOptions& o, ThreadPool& pool, Exchange& exchange)
    : c_(m.config),
      w_(m.weights.views),
      embd_file_(m.file.part(m.file.tensor("token_embd.weight").part).mapping()),
      shard_(m.shard),
      opt_(o),
      pool_(pool),
      exchange_(exchange),
      kernels_(o.kernels ? *o.kernels : best_kernel_set()),
      rope_(make_yarn_rope(m.config, o.yarn_truncate)),
      moe_(m.config, m.shard, std::max(o.step_tokens, 1), pool, exchange, kernels_) {
  check_context(m.config, o.context);
  if (o.step_tokens < 1) throw InputError(cat("--batch ", o.step_tokens, ": expected at least 1 token"));
  const ModelConfig& c = c_;
  const int64_t kv_heads = shard_.share.kv_heads.size();
  n_head_ = static_cast<int>(kv_heads * (c.n_head / c.n_head_kv));
  q_w_ = static_cast<int>(n_head_ * c.head_dim);
  kv_w_ = static_cast<int>(kv_heads * c.head_dim);
  const int64_t B = o.step_tokens, d = c.n_embd, q = q_w_, kv = kv_w_;
  auto bytes = [](const Matrix& w) { return static_cast<uint64_t>(w.rows) * w.row_bytes; };
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    const LayerWeights& L = w_.layers[l];
    dense_bytes_ += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.router);
  }
  token_entry_.resize(B), token_pos_.resize(B), tiles_.reserve(B);
  x_.resize(B * d), xn_.resize(B * d), q_.resize(B * q), k_.resize(B * kv), v_.resize(B * kv);
  attn_.resize(B * q), proj_.resize(B * d);
  xq_.resize(static_cast<int>(B), std::max<int64_t>(d, q));
  items_.resize(kAttentionRound), merges_.resize(kAttentionRound);
  partials_.resize(kAttentionRound * attention_state_floats(static_cast<int>(c.n_head / c.n_head_kv), c.head_dim));
  running_max_.resize(B * n_head_), running_sum_.resize(B * n_head_);
}

uint64_t ForwardPass::buffer_bytes(const ModelConfig& c, const Shard& shard, const ForwardOptions& o) {
  // The constructor's buffers, one term each, in its order.
  const uint64_t B = std::max(o.step_tokens, 1), d = c.n_embd, kv_heads = shard.share.kv_heads.size();
  const uint64_t q = kv_heads * (c.n_head / c.n_head_kv) * c.head_dim, kv = kv_heads * c.head_dim;
  const uint64_t ints = 4 * B, floats = 2 * B * d + 2 * B * q + 2 * B * kv, fixed = B * d;
  const uint64_t items = 8 * kAttentionRound;
  const uint64_t partials =
      kAttentionRound * attention_state_floats(static_cast<int>(c.n_head / c.n_head_kv), static_cast<int>(c.head_dim));
  const uint64_t running = 2 * B * (q / std::max<uint64_t>(c.head_dim, 1));
  return 4 * (ints + floats + items + partials + running) + 8 * fixed +
         QuantizedActivations::bytes_for(B, std::max(d, q)) + MoeBlock::buffer_bytes(c, shard, static_cast<int>(B));
}

Activations ForwardPass::prepare(const float* x, int n, int64_t cols, bool q8) {
  if (q8) quantize_on(pool_, xq_, x, n, cols);
  return token_rows(x, cols, 0, n, q8 ? &xq_ : nullptr);
}

void ForwardPass::run(const Batch& batch, KvPool& kv, float* logits) {
  const int n = batch.token_count();
  const int64_t d = c_.n_embd;
  if (n < 1 || n > opt_.step_tokens) throw Error(cat("a step of ", n, " tokens (expected 1..", opt_.step_tokens, ")"));
  for (int32_t id : batch.tokens)
    if (id < 0 || static_cast<uint32_t>(id) >= c_.n_vocab)
      throw InputError(cat("token id ", id, " is outside the vocabulary (0..", c_.n_vocab - 1, ")"));
  for (size_t e = 0; e < batch.entries.size(); ++e) {
    const BatchEntry& en = batch.entries[e];
    if (en.pos < 0 || en.pos + en.count > opt_.context)
      throw Error(cat("positions ", en.pos, "..", en.pos + en.count - 1, " are outside the context of ", opt_.context));
    for (int i = 0; i < en.count; ++i)
      token_entry_[en.first + i] = static_cast<int>(e), token_pos_[en.first + i] = en.pos + i;
  }
  // Attention's work grows with the positions a token sees: the costliest
  // tiles go out first and the cheap ones even out the end (a fixed split
  // gave one thread a prompt's late tokens: its attention ran barely faster
  // on 2 threads than on 1).
  tiles_.clear();
  for (const BatchEntry& e : batch.entries)
    for (int i = 0; i < e.count; i += kPrefillTile)
      tiles_.push_back({e.first + i, std::min(kPrefillTile, e.count - i)});
  std::stable_sort(tiles_.begin(), tiles_.end(), [&](const Tile& a, const Tile& b) {
    return token_pos_[a.t + a.tokens - 1] > token_pos_[b.t + b.tokens - 1];
  });

  Stopwatch clock;
  if (shard_.first_stage()) {
    const bool read = read_mapping([&] {
      for (int t = 0; t < n; ++t) dequantize_row(w_.embd.type, w_.embd.row(batch.tokens[t]), x_.data() + t * d, d);
    });
    if (!read)
      throw InputError(cat(embd_file_.path(), ": truncated on disk while in use (by another program): ",
                           "token embeddings can no longer be read"));
  } else {
    exchange_.recv(x_.data(), n * d * sizeof(float), shard_.rank - 1);
    clock.lap(timings_.exchange);
  }
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    attention(static_cast<int>(l), batch, kv);
    weight_bytes_read_ += moe_.run(w_.layers[l], x_.data(), n, timings_);
  }
  weight_bytes_read_ += dense_bytes_;
  if (!shard_.last_stage()) {
    Stopwatch send;
    exchange_.send(x_.data(), n * d * sizeof(float), shard_.rank + 1);
    send.lap(timings_.exchange);
  }
  if (w_.output.rows == 0 || batch.logit_rows() == 0) return;
  // Final norm and unembedding of the rank's vocabulary rows, for the
  // tokens whose logits the entries want.
  clock = Stopwatch();
  int rows = 0;
  for (const BatchEntry& e : batch.entries)
    for (int t = e.first + e.count - e.logits; t < e.first + e.count; ++t, ++rows)
      rmsnorm(x_.data() + t * d, w_.out_norm, c_.rms_eps, d, xn_.data() + rows * d);
  run_products(pool_, kernels_, prepare(xn_.data(), rows, d, w_.output.wants_q8()), {{w_.output, nullptr, logits}});
  weight_bytes_read_ += static_cast<uint64_t>(w_.output.rows) * w_.output.row_bytes;
  clock.lap(timings_.logits);
}

AttentionState ForwardPass::running_state(int t, int g) {
  const int group = static_cast<int>(c_.n_head / c_.n_head_kv);
  const int64_t head = int64_t{t} * n_head_ + int64_t{g} * group;
  return {running_max_.data() + head, running_sum_.data() + head, attn_.data() + head * c_.head_dim};
}

// Scaled dot-product attention with a sink per head, over (token, kv head,
// chunk) items (kv_pool.h: chunks of a fixed number of positions), each
// with the query heads that share the kv head, so that one long sequence
// keeps every thread busy. A tile's tokens that all see a chunk whole take
// it as one item (the chunk read once for all of them); each token's other
// chunks follow, so every (token, kv head)'s chunks merge in chunk order:
// the bits of the token alone, whatever the tiles. Items go chunk by chunk,
// a chunk's kv heads side by side: they read the same pages (kv_pool.h).
void ForwardPass::attend(int layer, const Batch& batch, const KvPool& kv) {
  const int n = batch.token_count(), group = static_cast<int>(c_.n_head / c_.n_head_kv), kv_heads = n_head_ / group;
  const bool sliding = c_.is_sliding_layer(layer);
  const int window = static_cast<int>(c_.sliding_window);
  for (int t = 0; t < n; ++t)
    for (int g = 0; g < kv_heads; ++g) clear_attention_state(running_state(t, g), group, static_cast<int>(c_.head_dim));
  round_items_ = round_states_ = 0;
  for (const Tile& tile : tiles_) {
    // Chunks [0, shared) end at or before the tile's first position and
    // start at the same first visible position for all its tokens.
    const int p0 = token_pos_[tile.t], f = first_visible(p0, window, sliding);
    const bool same_first = first_visible(p0 + tile.tokens - 1, window, sliding) == f;
    const int shared =
        tile.tokens > 1 && same_first ? std::max(0, (p0 + 1) / kAttentionChunk - f / kAttentionChunk) : 0;
    for (int c = 0; c < shared; ++c)
      for (int g = 0; g < kv_heads; ++g)
        add_item(layer, batch, kv, tile.t, tile.tokens, g, chunk_first(f, c), chunk_last(f, p0, c));
    for (int t = tile.t; t < tile.t + tile.tokens; ++t) {
      const int p = token_pos_[t], first = first_visible(p, window, sliding);
      for (int c = shared; c < attention_chunks(first, p); ++c)
        for (int g = 0; g < kv_heads; ++g)
          add_item(layer, batch, kv, t, 1, g, chunk_first(first, c), chunk_last(first, p, c));
    }
  }
  if (round_items_ > 0) attend_round(layer, batch, kv);
  const float* sinks = w_.layers[layer].sinks;
  for (int t = 0; t < n; ++t)
    for (int g = 0; g < kv_heads; ++g) {
      const AttentionState s = running_state(t, g);
      finish_attention(s, sinks + g * group, group, static_cast<int>(c_.head_dim), s.acc);
    }
}

void ForwardPass::add_item(int layer, const Batch& batch, const KvPool& kv, int t, int tokens, int g, int first,
                           int last) {
  if (round_states_ + tokens > kAttentionRound) attend_round(layer, batch, kv);
  const int kv_heads = n_head_ / static_cast<int>(c_.n_head / c_.n_head_kv);
  items_[round_items_++] = {t, tokens, g, first, last, round_states_};
  for (int k = 0; k < tokens; ++k) merges_[round_states_ + k] = {(t + k) * kv_heads + g, round_states_ + k};
  round_states_ += tokens;
}

void ForwardPass::attend_round(int layer, const Batch& batch, const KvPool& kv) {
  const int group = static_cast<int>(c_.n_head / c_.n_head_kv), hd = static_cast<int>(c_.head_dim);
  const int64_t state_floats = attention_state_floats(group, hd);
  const bool sliding = c_.is_sliding_layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Items of one token each (decode) go out in runs of whole chunks
  // (ThreadPool::Chunks), so that a thread reads a chunk's pages for every
  // kv head in turn: on the 20b's layers at 8k-28k positions 1.2-1.4x
  // faster than an item at a time, which interleaves the threads over the
  // same pages (PERFORMANCE.md, "Decode at depth").
  // With tiles, an item at a time: a tile costs kPrefillTile tokens' work,
  // too uneven for the shrinking runs.
  const int kv_heads = n_head_ / group;
  const bool tiles = round_states_ > round_items_;
  ThreadPool::Chunks chunk_runs(round_items_, kv_heads, pool_.size());
  std::atomic<int> next{0};
  auto take = [&](int64_t& begin, int64_t& end) {
    if (!tiles) return chunk_runs.next(begin, end);
    begin = next.fetch_add(1, std::memory_order_relaxed), end = begin + 1;
    return begin < round_items_;
  };
  pool_.run([&](int, int) {
    for (int64_t begin, end; take(begin, end);)
      for (int64_t i = begin; i < end; ++i) {
        const AttentionItem& it = items_[i];
        const BatchEntry& e = batch.entries[token_entry_[it.t]];
        const float* q[kPrefillTile];
        AttentionState states[kPrefillTile];
        for (int k = 0; k < it.tokens; ++k) {
          q[k] = q_.data() + int64_t{it.t + k} * q_w_ + int64_t{it.g} * group * hd;
          states[k] = attention_state(partials_.data() + (it.state + k) * state_floats, group);
        }
        const std::span<const int32_t> table = sliding ? batch.sliding_table(e) : batch.full_table(e);
        const int block0 = sliding ? e.sliding_block0 : 0;
        if (it.tokens == 1)
          kv.attend_chunk(kernels_, layer, table, block0, q[0], group, it.g, it.first, it.last, scale, states[0]);
        else
          kv.attend_tile_chunk(kernels_, layer, table, block0, q, it.tokens, group, it.g, it.first, it.last, scale,
                               states);
      }
  });
  // Each (token, kv head)'s states merge in the order they were added, by
  // one thread.
  std::stable_sort(merges_.begin(), merges_.begin() + round_states_,
                   [](const Merge& a, const Merge& b) { return a.key < b.key; });
  std::vector<int> runs;
  for (int i = 0; i < round_states_; ++i)
    if (i == 0 || merges_[i].key != merges_[i - 1].key) runs.push_back(i);
  runs.push_back(round_states_);
  ThreadPool::Chunks chunks(static_cast<int64_t>(runs.size()) - 1, 1, pool_.size());
  pool_.run([&](int, int) {
    for (int64_t begin, end; chunks.next(begin, end);)
      for (int64_t r = begin; r < end; ++r)
        for (int i = runs[r]; i < runs[r + 1]; ++i)
          merge_attention_state(attention_state(partials_.data() + merges_[i].state * state_floats, group),
                                running_state(merges_[i].key / kv_heads, merges_[i].key % kv_heads), group, hd);
  });
  round_items_ = round_states_ = 0;
}

void ForwardPass::attention(int layer, const Batch& batch, KvPool& kv) {
  const LayerWeights& L = w_.layers[layer];
  const int n = batch.token_count();
  const int64_t d = c_.n_embd, q_w = q_w_, kv_w = kv_w_;
  const int n_head = n_head_, group = c_.n_head / c_.n_head_kv;
  const bool sliding = c_.is_sliding_layer(layer);
  Stopwatch clock;
  for (int t = 0; t < n; ++t) rmsnorm(x_.data() + t * d, L.attn_norm, c_.rms_eps, d, xn_.data() + t * d);
  run_products(pool_, kernels_, prepare(xn_.data(), n, d, L.wq.wants_q8() || L.wk.wants_q8() || L.wv.wants_q8()),
               {{L.wq, L.bq, q_.data()}, {L.wk, L.bk, k_.data()}, {L.wv, L.bv, v_.data()}});
  clock.lap(timings_.qkv);

  // A token's block table in this layer: its entry's, of this layer's kind.
  auto table = [&](const BatchEntry& e) { return sliding ? batch.sliding_table(e) : batch.full_table(e); };
  auto block0 = [&](const BatchEntry& e) { return sliding ? e.sliding_block0 : 0; };
  // Rotate q and k, then store k and v at their positions.
  for (int t = 0; t < n; ++t) {
    const int p = token_pos_[t];
    const BatchEntry& e = batch.entries[token_entry_[t]];
    apply_rope(rope_, q_.data() + t * q_w, n_head, p);
    apply_rope(rope_, k_.data() + t * kv_w, n_head / group, p);
    kv.store(layer, table(e)[p / kKvBlock - block0(e)], p % kKvBlock, k_.data() + t * kv_w, v_.data() + t * kv_w);
  }

  attend(layer, batch, kv);
  clock.lap(timings_.attention);

  // This rank's heads' part of the output projection, summed over ranks
  // exactly (split-invariant: the bits one rank gets); the bias once, after
  // the sum.
  if (q_w > 0) {
    if (!run_fixed_product(pool_, kernels_, prepare(attn_.data(), n, q_w, L.wo.wants_q8()), L.wo, nullptr,
                           proj_.data()))
      throw Error(cat("layer ", layer, ": the attention output left the range of exact sums (", kFixedRangeText,
                      "): the model's numbers have diverged"));
  } else {
    std::fill_n(proj_.data(), n * d, 0);
  }
  clock.lap(timings_.output_proj);
  if (shard_.sums_per_layer()) exchange_.sum(proj_.data(), n * d);
  clock.lap(timings_.exchange);
  for (int t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x_[t * d + i] += fixed_to_float(proj_[t * d + i]) + L.bo[i];
  clock.lap(timings_.output_proj);
}

}  // namespace tps
