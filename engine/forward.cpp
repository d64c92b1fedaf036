#include "engine/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/layer_math.h"
#include "runtime/error.h"

namespace tps {
namespace {
// Adds the seconds since the last call to one of the timing fields.
class Stopwatch {
 public:
  void lap(double& into) {
    auto now = std::chrono::steady_clock::now();
    into += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};
}  // namespace

Session::Session(const Model& m, const SessionOptions& o, ThreadPool& pool, Exchange& exchange)
    : c_(m.config), w_(m.weights.views), shard_(m.shard), opt_(o), pool_(pool),
      exchange_(exchange), kernels_(o.kernels ? *o.kernels : best_kernel_set()),
      rope_(make_yarn_rope(m.config, o.yarn_truncate)) {
  if (o.n_ctx < 1) throw InputError(cat("--ctx ", o.n_ctx, ": expected at least 1 position"));
  if (o.max_batch < 1) throw InputError(cat("batch size ", o.max_batch, ": expected >= 1"));
  const ModelConfig& c = c_;
  const int64_t kv_heads = shard_.share.kv_heads.size();
  n_head_ = static_cast<int>(kv_heads * (c.n_head / c.n_head_kv));
  q_w_ = static_cast<int>(n_head_ * c.head_dim);
  kv_w_ = static_cast<int>(kv_heads * c.head_dim);
  // A step has at most max_batch tokens, and never more than the context.
  const int64_t B = std::min(o.max_batch, o.n_ctx), d = c.n_embd, q = q_w_, kv = kv_w_,
                ff = shard_.share.ff.size(), kk = c.n_expert_used;
  cache_.resize(c.n_layer);
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    // A sliding layer needs the window behind the oldest token of a batch.
    const int slots = c.is_sliding_layer(l) ? std::min<int>(o.n_ctx, c.sliding_window + o.max_batch)
                                            : o.n_ctx;
    cache_[l] = LayerCache(slots, static_cast<int>(kv_heads), static_cast<int>(c.head_dim));
  }
  x_.resize(B * d), xn_.resize(B * d), q_.resize(B * q), k_.resize(B * kv), v_.resize(B * kv);
  attn_.resize(B * q), proj_.resize(B * d), router_.resize(B * c.n_expert), moe_.resize(B * d);
  topk_.resize(B * kk), topk_w_.resize(B * kk);
  gate_up_.resize(2 * B * kk * ff), gathered_.resize(B * kk * d), swiglu_.resize(B * kk * ff);
  down_.resize(B * kk * d);
  scores_.assign(pool.size(), std::vector<float>(static_cast<size_t>(c.n_head / c.n_head_kv) * (o.n_ctx + 1)));
}

namespace {

// Tokens [first, first + count) of x ([*][cols]), with their int8 form from
// q (the quantize() of x) when the weights take quantized inputs.
Activations token_rows(const float* x, int64_t cols, int first, int count,
                       const QuantizedActivations* q) {
  return q ? q->view(x, first, count) : Activations{.f = x + first * cols, .cols = cols, .tokens = count};
}

// The chunks a thread takes of an index space of `per` items in each group,
// as runs fn(group, lo, hi) with [lo, hi) inside one group.
template <typename Fn>
void take_group_runs(ThreadPool::Chunks& chunks, int64_t per, Fn fn) {
  for (int64_t begin, end; chunks.next(begin, end);)
    for (int64_t i = begin; i < end;) {
      const int64_t lo = i % per, hi = std::min<int64_t>(per, lo + (end - i));
      fn(static_cast<size_t>(i / per), lo, hi);
      i += hi - lo;
    }
}

}  // namespace

void Session::prepare(const float* x, int n, int64_t cols, bool q8) {
  if (q8) quantize(xq_, x, n, cols);
  act_ = token_rows(x, cols, 0, n, q8 ? &xq_ : nullptr);
}

void Session::quantize(QuantizedActivations& qa, const float* x, int n, int64_t cols) {
  qa.resize(n, cols);
  if (n == 1) return qa.quantize_rows(x, 0, 1);  // decode: no wake-up for one row
  pool_.run([&](int t, int nt) {
    auto [begin, end] = ThreadPool::split(n, t, nt);
    qa.quantize_rows(x, static_cast<int>(begin), static_cast<int>(end - begin));
  });
}

void Session::parallel_rows(std::initializer_list<Product> products, int n) {
  int64_t total = 0;
  for (const Product& p : products) total += p.w.rows;
  // The rows of all the products in one index space, handed out in chunks:
  // one wake-up and one barrier for all of them.
  ThreadPool::Chunks chunks(total, row_grain(products.begin()->w), pool_.size());
  pool_.run([&](int, int) {
    for (int64_t begin, end; chunks.next(begin, end);) {
      int64_t first = 0;  // of the current product, in the index space
      for (const Product& p : products) {
        const int64_t b = std::max(begin, first) - first, e = std::min(end, first + p.w.rows) - first;
        first += p.w.rows;
        if (b >= e) continue;
        matmul_rows(kernels_, p.w, b, e, act_, p.y, p.w.rows);
        if (p.bias)
          for (int i = 0; i < n; ++i)
            for (int64_t r = b; r < e; ++r) p.y[i * p.w.rows + r] += p.bias[r];
      }
    }
  });
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
    for (int t = 0; t < n; ++t)
      dequantize_row(w_.embd.type, w_.embd.row(tokens[t]), x_.data() + t * d, d);
  } else {
    exchange_.recv(x_.data(), n * d * sizeof(float), shard_.rank - 1);
    clock.lap(timings_.exchange);
  }
  for (int64_t l = shard_.share.layers.begin; l < shard_.share.layers.end; ++l) {
    attention(static_cast<int>(l), n);
    moe(static_cast<int>(l), n);
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
  for (int t = 0; t < count; ++t)
    rmsnorm(x_.data() + (first + t) * d, w_.out_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), count, d, w_.output.wants_q8());
  parallel_rows({{w_.output, nullptr, logits}}, count);
  clock.lap(timings_.logits);
}

void Session::attention(int layer, int n) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t d = c_.n_embd, hd = c_.head_dim, q_w = q_w_, kv_w = kv_w_;
  const int n_head = n_head_, group = c_.n_head / c_.n_head_kv;
  Stopwatch clock;
  for (int t = 0; t < n; ++t)
    rmsnorm(x_.data() + t * d, L.attn_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), n, d, L.wq.wants_q8() || L.wk.wants_q8() || L.wv.wants_q8());
  parallel_rows({{L.wq, L.bq, q_.data()}, {L.wk, L.bk, k_.data()}, {L.wv, L.bv, v_.data()}}, n);
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
    prepare(attn_.data(), n, q_w, L.wo.wants_q8());
    parallel_rows({{L.wo, nullptr, proj_.data()}}, n);
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

void Session::moe(int layer, int n) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t d = c_.n_embd, ff = shard_.share.ff.size();
  const int E = c_.n_expert, K = c_.n_expert_used;
  const Range mine = shard_.share.experts;
  Stopwatch clock;
  for (int t = 0; t < n; ++t)
    rmsnorm(x_.data() + t * d, L.post_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), n, d, L.router.wants_q8());
  parallel_rows({{L.router, L.router_b, router_.data()}}, n);

  // Top-k experts by raw logit, softmax over the chosen: every rank routes
  // every token the same way (the same inputs on every rank).
  for (int t = 0; t < n; ++t)
    select_experts({router_.data() + t * E, static_cast<size_t>(E)}, K, topk_.data() + t * K,
                   topk_w_.data() + t * K);
  clock.lap(timings_.router);

  // Group (token, choice) entries by this rank's experts: entries of one
  // expert are contiguous, so each expert's rows are read once for all its
  // tokens.
  struct Group {
    int expert, first, count;  // local expert index; entries [first, first + count)
  };
  std::vector<Group> groups;
  std::vector<int> entry_token, entry_choice;
  for (int e = static_cast<int>(mine.begin); e < mine.end && ff > 0; ++e) {
    const int first = static_cast<int>(entry_token.size());
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < K; ++j)
        if (topk_[t * K + j] == e) {
          entry_token.push_back(t);
          entry_choice.push_back(t * K + j);
        }
    if (static_cast<int>(entry_token.size()) > first)
      groups.push_back({e - static_cast<int>(mine.begin), first,
                        static_cast<int>(entry_token.size()) - first});
  }
  const int entries = static_cast<int>(entry_token.size());
  // Gathered inputs, [entries][d], and quantized.
  float* xg = gathered_.data();
  for (int i = 0; i < entries; ++i) std::copy_n(xn_.data() + entry_token[i] * d, d, xg + i * d);
  const bool q8 = L.gate.wants_q8() || L.up.wants_q8();
  if (q8) quantize(xq_, xg, entries, d);

  // Gate and up of every active expert in one parallel pass, by features: a
  // thread computes both rows of each feature it takes and then their
  // clamped SwiGLU with the expert's biases.
  float* gate_out = gate_up_.data();
  float* up_out = gate_up_.data() + static_cast<int64_t>(entries) * ff;
  float* act = swiglu_.data();
  const int64_t n_groups = static_cast<int64_t>(groups.size());
  ThreadPool::Chunks features(n_groups * ff, row_grain(L.gate), pool_.size());
  pool_.run([&](int, int) {
    take_group_runs(features, ff, [&](size_t gi, int64_t f0, int64_t f1) {
      const Group& g = groups[gi];
      const Activations a = token_rows(xg, d, g.first, g.count, q8 ? &xq_ : nullptr);
      matmul_rows(kernels_, L.gate.slice(g.expert * ff, ff), f0, f1, a, gate_out + g.first * ff, ff);
      matmul_rows(kernels_, L.up.slice(g.expert * ff, ff), f0, f1, a, up_out + g.first * ff, ff);
      const float* bg = L.gate_b + g.expert * ff;
      const float* bu = L.up_b + g.expert * ff;
      for (int e = g.first; e < g.first + g.count; ++e)
        kernels_.swiglu(gate_out + e * ff + f0, up_out + e * ff + f0, bg + f0, bu + f0, f1 - f0, c_.swiglu_alpha,
                        c_.swiglu_limit, act + e * ff + f0);
    });
  });
  const bool dq8 = L.down.wants_q8();
  if (dq8) quantize(act_q_, act, entries, ff);
  ThreadPool::Chunks down_rows(n_groups * d, row_grain(L.down), pool_.size());
  pool_.run([&](int, int) {
    take_group_runs(down_rows, d, [&](size_t gi, int64_t row0, int64_t row1) {
      const Group& g = groups[gi];
      const Activations a = token_rows(act, ff, g.first, g.count, dq8 ? &act_q_ : nullptr);
      matmul_rows(kernels_, L.down.slice(g.expert * d, d), row0, row1, a, down_.data() + g.first * d, d);
    });
  });

  // This rank's part: the sum over its entries of weight * down, in top-k
  // order per token; summed over ranks, then the chosen experts' weighted
  // down biases once.
  std::fill_n(moe_.data(), n * d, 0.0f);
  std::vector<int> entry_of(n * K, -1);
  for (int i = 0; i < entries; ++i) entry_of[entry_choice[i]] = i;
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < K; ++j) {
      const int i = entry_of[t * K + j];
      if (i < 0) continue;
      const float wgt = topk_w_[t * K + j];
      const float* y = down_.data() + static_cast<int64_t>(i) * d;
      float* out = moe_.data() + t * d;
      for (int64_t k = 0; k < d; ++k) out[k] += wgt * y[k];
    }
  clock.lap(timings_.experts);
  if (shard_.sums_per_layer()) exchange_.sum(moe_.data(), n * d);
  clock.lap(timings_.exchange);
  for (int t = 0; t < n; ++t) {
    float* x = x_.data() + t * d;
    const float* part = moe_.data() + t * d;
    for (int64_t k = 0; k < d; ++k) {
      float bias = 0;
      for (int j = 0; j < K; ++j) bias += topk_w_[t * K + j] * L.down_b[topk_[t * K + j] * d + k];
      x[k] += part[k] + bias;
    }
  }
  clock.lap(timings_.experts);
}

}  // namespace tps
