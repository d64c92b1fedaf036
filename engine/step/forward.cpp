#include "engine/step/forward.h"

#include <algorithm>
#include <cmath>

#include "engine/kernels/layer_math.h"
#include "engine/step/parallel_products.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace tps {

Session::Session(const Model& m, const SessionOptions& o, ThreadPool& pool, Exchange& exchange)
    : c_(m.config),
      w_(m.weights.views),
      shard_(m.shard),
      opt_(o),
      pool_(pool),
      exchange_(exchange),
      kernels_(o.kernels ? *o.kernels : best_kernel_set()),
      rope_(make_yarn_rope(m.config, o.yarn_truncate)),
      moe_(m.config, m.shard, std::min(o.max_batch, o.n_ctx), pool, exchange, kernels_) {
  if (o.n_ctx < 1) throw InputError(cat("--ctx ", o.n_ctx, ": expected at least 1 position"));
  if (o.max_batch < 1) throw InputError(cat("batch size ", o.max_batch, ": expected >= 1"));
  const ModelConfig& c = c_;
  const int64_t kv_heads = shard_.share.kv_heads.size();
  n_head_ = static_cast<int>(kv_heads * (c.n_head / c.n_head_kv));
  q_w_ = static_cast<int>(n_head_ * c.head_dim);
  kv_w_ = static_cast<int>(kv_heads * c.head_dim);
  // A step has at most max_batch tokens, and never more than the context.
  const int64_t B = std::min(o.max_batch, o.n_ctx), d = c.n_embd, q = q_w_, kv = kv_w_;
  cache_.resize(c.n_layer);
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    // A sliding layer needs the window behind the oldest token of a batch.
    const int slots = c.is_sliding_layer(l) ? std::min<int>(o.n_ctx, c.sliding_window + o.max_batch) : o.n_ctx;
    cache_[l] = LayerCache(slots, static_cast<int>(kv_heads), static_cast<int>(c.head_dim));
  }
  x_.resize(B * d), xn_.resize(B * d), q_.resize(B * q), k_.resize(B * kv), v_.resize(B * kv);
  attn_.resize(B * q), proj_.resize(B * d);
  xq_.resize(static_cast<int>(B), std::max<int64_t>(d, q));
  scores_.assign(pool.size(), std::vector<float>(static_cast<size_t>(c.n_head / c.n_head_kv) * (o.n_ctx + 1)));
}

Activations Session::prepare(const float* x, int n, int64_t cols, bool q8) {
  if (q8) quantize_on(pool_, xq_, x, n, cols);
  return token_rows(x, cols, 0, n, q8 ? &xq_ : nullptr);
}

void Session::forward(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw InputError("no tokens to run (the prompt is empty)");
  if (pos_ + n > opt_.n_ctx)
    throw InputError(cat(pos_ + n, " tokens do not fit in the context of ", opt_.n_ctx,
                         " (use --ctx to make it larger, up to ", c_.n_ctx_train, ")"));
  for (int32_t id : tokens)
    if (id < 0 || static_cast<uint32_t>(id) >= c_.n_vocab)
      throw InputError(cat("token id ", id, " is outside the vocabulary (0..", c_.n_vocab - 1, ")"));
  const int64_t rows = w_.output.rows;
  logits.resize((all_logits ? n : 1) * static_cast<size_t>(rows));
  for (int64_t done = 0; done < n;) {
    const int m = static_cast<int>(std::min<int64_t>(opt_.max_batch, n - done));
    const bool last = done + m == n;
    float* out = all_logits ? logits.data() + done * rows : last ? logits.data() : nullptr;
    step(tokens.data() + done, m, all_logits, out);
    done += m;
  }
}

void Session::step(const int32_t* tokens, int n, bool all_logits, float* logits) {
  const int64_t d = c_.n_embd;
  Stopwatch clock;
  if (shard_.first_stage()) {
    for (int t = 0; t < n; ++t) dequantize_row(w_.embd.type, w_.embd.row(tokens[t]), x_.data() + t * d, d);
  } else {
    exchange_.recv(x_.data(), n * d * sizeof(float), shard_.rank - 1);
    clock.lap(timings_.exchange);
  }
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    attention(static_cast<int>(l), n);
    moe_.run(w_.layers[l], x_.data(), n, timings_);
  }
  pos_ += n;
  if (!shard_.last_stage()) {
    Stopwatch send;
    exchange_.send(x_.data(), n * d * sizeof(float), shard_.rank + 1);
    send.lap(timings_.exchange);
  }
  if (!logits || w_.output.rows == 0) return;
  // Final norm and unembedding of the rank's vocabulary rows, for every
  // token or the last one only.
  clock = Stopwatch();
  const int first = all_logits ? 0 : n - 1, count = n - first;
  for (int t = 0; t < count; ++t) rmsnorm(x_.data() + (first + t) * d, w_.out_norm, c_.rms_eps, d, xn_.data() + t * d);
  run_products(pool_, kernels_, prepare(xn_.data(), count, d, w_.output.wants_q8()), {{w_.output, nullptr, logits}});
  clock.lap(timings_.logits);
}

void Session::attention(int layer, int n) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t d = c_.n_embd, hd = c_.head_dim, q_w = q_w_, kv_w = kv_w_;
  const int n_head = n_head_, group = c_.n_head / c_.n_head_kv;
  Stopwatch clock;
  for (int t = 0; t < n; ++t) rmsnorm(x_.data() + t * d, L.attn_norm, c_.rms_eps, d, xn_.data() + t * d);
  run_products(pool_, kernels_, prepare(xn_.data(), n, d, L.wq.wants_q8() || L.wk.wants_q8() || L.wv.wants_q8()),
               {{L.wq, L.bq, q_.data()}, {L.wk, L.bk, k_.data()}, {L.wv, L.bv, v_.data()}});
  clock.lap(timings_.qkv);

  // Rotate q and k, then store k and v at their positions.
  LayerCache& cache = cache_[layer];
  for (int t = 0; t < n; ++t) {
    const int p = pos_ + t;
    apply_rope(rope_, q_.data() + t * q_w, n_head, p);
    apply_rope(rope_, k_.data() + t * kv_w, n_head / group, p);
    cache.store(p, k_.data() + t * kv_w, v_.data() + t * kv_w);
  }

  // Scaled dot-product attention with a sink per head, over (token, kv
  // head) items, each with the query heads that share the kv head; last
  // token first: a token's work grows with the positions it sees, so the
  // costliest items go out first and the cheap ones even out the end (a
  // fixed split gave one thread the late tokens: a prompt's attention ran
  // barely faster on 2 threads than on 1).
  const bool sliding = c_.is_sliding_layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int kv_heads = n_head / group;
  ThreadPool::Chunks items(static_cast<int64_t>(n) * kv_heads, 1, pool_.size());
  pool_.run([&](int th, int) {
    for (int64_t begin, end; items.next(begin, end);)
      for (int64_t item = begin; item < end; ++item) {
        const int t = n - 1 - static_cast<int>(item / kv_heads), g = static_cast<int>(item % kv_heads);
        const int p = pos_ + t;
        const int64_t at = t * q_w + static_cast<int64_t>(g) * group * hd;
        cache.attend(kernels_, q_.data() + at, group, g, first_visible(p, static_cast<int>(c_.sliding_window), sliding),
                     p, scale, L.sinks + g * group, scores_[th].data(), attn_.data() + at);
      }
  });
  clock.lap(timings_.attention);

  // This rank's heads' part of the output projection, summed over ranks;
  // the bias once, after the sum.
  if (q_w > 0) {
    run_products(pool_, kernels_, prepare(attn_.data(), n, q_w, L.wo.wants_q8()), {{L.wo, nullptr, proj_.data()}});
  } else {
    std::fill_n(proj_.data(), n * d, 0.0f);
  }
  clock.lap(timings_.output_proj);
  if (shard_.sums_per_layer()) exchange_.sum(proj_.data(), n * d);
  clock.lap(timings_.exchange);
  for (int t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x_[t * d + i] += proj_[t * d + i] + L.bo[i];
  clock.lap(timings_.output_proj);
}

}  // namespace tps
