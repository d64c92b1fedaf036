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

Session::Session(const ModelConfig& c, const ModelWeights& w, const SessionOptions& o,
                 ThreadPool& pool, const DotKernels& k)
    : c_(c), w_(w), opt_(o), pool_(pool), dot_(k), rope_(make_yarn_rope(c, o.yarn_truncate)) {
  if (o.n_ctx < 1) throw InputError(cat("--ctx ", o.n_ctx, ": expected at least 1 position"));
  if (o.max_batch < 1) throw InputError(cat("batch size ", o.max_batch, ": expected >= 1"));
  const int64_t B = o.max_batch, d = c.n_embd, q = c.q_width(), kv = c.kv_width(),
                ff = c.n_ff_exp, kk = c.n_expert_used;
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    // A sliding layer needs the window behind the oldest token of a batch.
    int slots = c.is_sliding_layer(l) ? std::min<int>(o.n_ctx, c.sliding_window + o.max_batch)
                                      : o.n_ctx;
    slots_.push_back(slots);
    k_cache_.emplace_back(static_cast<size_t>(slots) * kv);
    v_cache_.emplace_back(static_cast<size_t>(slots) * kv);
  }
  x_.resize(B * d), xn_.resize(B * d), q_.resize(B * q), k_.resize(B * kv), v_.resize(B * kv);
  attn_.resize(B * q), proj_.resize(B * d), router_.resize(B * c.n_expert);
  const int64_t widest = std::max({d, q, ff});
  xq_.resize(B * kk * widest / 32 + B * widest / 32);
  topk_.resize(B * kk), topk_w_.resize(B * kk);
  gate_up_.resize(2 * B * kk * ff), act_ff_.resize(B * kk * ff), act_q_.resize(B * kk * ff / 32);
  down_.resize(B * kk * d);
  scores_.assign(pool.size(), std::vector<float>(static_cast<size_t>(o.n_ctx) + 1));
}

void Session::prepare(const float* x, int n, int64_t cols, bool quantize) {
  act_ = Activations{x, nullptr, cols, n};
  if (quantize) {
    quantize_activations(x, n, cols, xq_.data());
    act_.q = xq_.data();
  }
}

void Session::parallel_rows(const Matrix& w, const float* bias, float* y, int n) {
  pool_.run([&](int t, int nt) {
    auto [begin, end] = ThreadPool::split(w.rows, t, nt);
    matmul_rows(dot_, w, begin, end, act_, y, w.rows);
    if (bias)
      for (int i = 0; i < n; ++i)
        for (int64_t r = begin; r < end; ++r) y[i * w.rows + r] += bias[r];
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
  logits.resize((all_logits ? n : 1) * static_cast<size_t>(c_.n_vocab));
  for (int64_t done = 0; done < n;) {
    const int m = static_cast<int>(std::min<int64_t>(opt_.max_batch, n - done));
    const bool last = done + m == n;
    float* out = all_logits ? logits.data() + done * c_.n_vocab : last ? logits.data() : nullptr;
    step(tokens.data() + done, m, all_logits, out);
    done += m;
  }
}

void Session::step(const int32_t* tokens, int n, bool all_logits, float* logits) {
  const int64_t d = c_.n_embd;
  for (int t = 0; t < n; ++t)
    dequantize_row(w_.embd.type, w_.embd.row(tokens[t]), x_.data() + t * d, d);
  for (uint32_t l = 0; l < c_.n_layer; ++l) {
    attention(static_cast<int>(l), n);
    moe(static_cast<int>(l), n);
  }
  pos_ += n;
  if (!logits) return;
  // Final norm and unembedding, for every token or the last one only.
  Stopwatch clock;
  const int first = all_logits ? 0 : n - 1, count = n - first;
  for (int t = 0; t < count; ++t)
    rmsnorm(x_.data() + (first + t) * d, w_.out_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), count, d, w_.output.wants_q8());
  parallel_rows(w_.output, nullptr, logits, count);
  clock.lap(timings_.logits);
}

void Session::attention(int layer, int n) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t d = c_.n_embd, hd = c_.head_dim, q_w = c_.q_width(), kv_w = c_.kv_width();
  const int n_head = c_.n_head, group = c_.n_head / c_.n_head_kv;
  Stopwatch clock;
  for (int t = 0; t < n; ++t)
    rmsnorm(x_.data() + t * d, L.attn_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), n, d, L.wq.wants_q8() || L.wk.wants_q8() || L.wv.wants_q8());
  parallel_rows(L.wq, L.bq, q_.data(), n);
  parallel_rows(L.wk, L.bk, k_.data(), n);
  parallel_rows(L.wv, L.bv, v_.data(), n);
  clock.lap(timings_.qkv);

  // Rotate q and k, then store k and v at their positions' slots.
  const int slots = slots_[layer];
  float* kc = k_cache_[layer].data();
  float* vc = v_cache_[layer].data();
  for (int t = 0; t < n; ++t) {
    const int p = pos_ + t;
    apply_rope(rope_, q_.data() + t * q_w, n_head, p);
    apply_rope(rope_, k_.data() + t * kv_w, c_.n_head_kv, p);
    std::copy_n(k_.data() + t * kv_w, kv_w, kc + static_cast<int64_t>(p % slots) * kv_w);
    std::copy_n(v_.data() + t * kv_w, kv_w, vc + static_cast<int64_t>(p % slots) * kv_w);
  }

  // Scaled dot-product attention with a sink per head, over (token, head).
  const bool sliding = c_.is_sliding_layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  pool_.run([&](int th, int nt) {
    std::vector<float>& z = scores_[th];
    auto [begin, end] = ThreadPool::split(static_cast<int64_t>(n) * n_head, th, nt);
    for (int64_t item = begin; item < end; ++item) {
      const int t = static_cast<int>(item / n_head), h = static_cast<int>(item % n_head);
      const int p = pos_ + t, g = h / group;
      const int first = first_visible(p, static_cast<int>(c_.sliding_window), sliding);
      const float* qh = q_.data() + t * q_w + h * hd;
      for (int s = first; s <= p; ++s) {
        const float* ks = kc + static_cast<int64_t>(s % slots) * kv_w + g * hd;
        float dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += qh[i] * ks[i];
        z[s - first] = dot * scale;
      }
      std::span<float> weights(z.data(), static_cast<size_t>(p - first + 1));
      softmax_with_sink(weights, L.sinks[h]);
      float* out = attn_.data() + t * q_w + h * hd;
      std::fill_n(out, hd, 0.0f);
      for (int s = first; s <= p; ++s) {
        const float wgt = weights[s - first];
        const float* vs = vc + static_cast<int64_t>(s % slots) * kv_w + g * hd;
        for (int64_t i = 0; i < hd; ++i) out[i] += wgt * vs[i];
      }
    }
  });

  clock.lap(timings_.attention);
  prepare(attn_.data(), n, q_w, L.wo.wants_q8());
  parallel_rows(L.wo, L.bo, proj_.data(), n);
  for (int64_t i = 0; i < n * d; ++i) x_[i] += proj_[i];
  clock.lap(timings_.output_proj);
}

void Session::moe(int layer, int n) {
  const LayerWeights& L = w_.layers[layer];
  const int64_t d = c_.n_embd, ff = c_.n_ff_exp;
  const int E = c_.n_expert, K = c_.n_expert_used;
  Stopwatch clock;
  for (int t = 0; t < n; ++t)
    rmsnorm(x_.data() + t * d, L.post_norm, c_.rms_eps, d, xn_.data() + t * d);
  prepare(xn_.data(), n, d, L.router.wants_q8());
  parallel_rows(L.router, L.router_b, router_.data(), n);

  // Top-k experts by raw logit, softmax over the chosen.
  for (int t = 0; t < n; ++t)
    select_experts({router_.data() + t * E, static_cast<size_t>(E)}, K, topk_.data() + t * K,
                   topk_w_.data() + t * K);
  clock.lap(timings_.router);

  // Group (token, choice) entries by expert: entries of one expert are
  // contiguous, so each expert's rows are read once for all its tokens.
  struct Group {
    int expert, first, count;  // entries [first, first + count)
  };
  std::vector<Group> groups;
  std::vector<int> entry_token, entry_of(n * K);
  for (int e = 0; e < E; ++e) {
    const int first = static_cast<int>(entry_token.size());
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < K; ++j)
        if (topk_[t * K + j] == e) {
          entry_of[t * K + j] = static_cast<int>(entry_token.size());
          entry_token.push_back(t);
        }
    if (static_cast<int>(entry_token.size()) > first)
      groups.push_back({e, first, static_cast<int>(entry_token.size()) - first});
  }
  const int entries = static_cast<int>(entry_token.size());
  // Gathered inputs, [entries][d] (into act_ff_, large enough) and quantized.
  float* xg = act_ff_.data();
  for (int i = 0; i < entries; ++i) std::copy_n(xn_.data() + entry_token[i] * d, d, xg + i * d);
  const bool q8 = L.gate.wants_q8() || L.up.wants_q8();
  if (q8) quantize_activations(xg, entries, d, xq_.data());

  // Gate and up of every active expert in one parallel pass over their rows.
  float* gate_out = gate_up_.data();
  float* up_out = gate_up_.data() + static_cast<int64_t>(entries) * ff;
  const int64_t rows_per_group = 2 * ff;
  pool_.run([&](int th, int nt) {
    auto [begin, end] = ThreadPool::split(rows_per_group * groups.size(), th, nt);
    for (int64_t r = begin; r < end;) {
      const Group& g = groups[r / rows_per_group];
      const int64_t in_group = r % rows_per_group;
      const bool is_up = in_group >= ff;
      const int64_t row0 = in_group % ff;
      const int64_t row1 = std::min<int64_t>(ff, row0 + (end - r));
      const Matrix& w = is_up ? L.up : L.gate;
      Activations a{xg + g.first * d, q8 ? xq_.data() + g.first * (d / 32) : nullptr, d, g.count};
      matmul_rows(dot_, w.slice(g.expert * ff, ff), row0, row1, a,
                  (is_up ? up_out : gate_out) + g.first * ff, ff);
      r += row1 - row0;
    }
  });

  // Clamped SwiGLU with the expert's biases, then the down projection.
  float* act = act_ff_.data();
  for (const Group& g : groups) {
    const float* bg = L.gate_b + g.expert * ff;
    const float* bu = L.up_b + g.expert * ff;
    for (int i = g.first; i < g.first + g.count; ++i)
      for (int64_t f = 0; f < ff; ++f)
        act[i * ff + f] = swiglu_oai(gate_out[i * ff + f] + bg[f], up_out[i * ff + f] + bu[f],
                                     c_.swiglu_alpha, c_.swiglu_limit);
  }
  const bool dq8 = L.down.wants_q8();
  if (dq8) quantize_activations(act, entries, ff, act_q_.data());
  pool_.run([&](int th, int nt) {
    auto [begin, end] = ThreadPool::split(d * static_cast<int64_t>(groups.size()), th, nt);
    for (int64_t r = begin; r < end;) {
      const Group& g = groups[r / d];
      const int64_t row0 = r % d, row1 = std::min<int64_t>(d, row0 + (end - r));
      Activations a{act + g.first * ff, dq8 ? act_q_.data() + g.first * (ff / 32) : nullptr, ff,
                    g.count};
      matmul_rows(dot_, L.down.slice(g.expert * d, d), row0, row1, a, down_.data() + g.first * d, d);
      r += row1 - row0;
    }
  });

  // x += sum over the token's experts of weight * (down + bias), in top-k order.
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < K; ++j) {
      const int e = topk_[t * K + j], i = entry_of[t * K + j];
      const float wgt = topk_w_[t * K + j];
      const float* y = down_.data() + static_cast<int64_t>(i) * d;
      const float* bd = L.down_b + static_cast<int64_t>(e) * d;
      float* x = x_.data() + t * d;
      for (int64_t k = 0; k < d; ++k) x[k] += wgt * (y[k] + bd[k]);
    }
  clock.lap(timings_.experts);
}

}  // namespace tps
