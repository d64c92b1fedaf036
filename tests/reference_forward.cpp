#include "tests/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/gguf/quant_blocks.h"

namespace tps::testing {
namespace {

std::vector<float> dequantize(const TensorView& t, uint64_t first_row, uint64_t rows) {
  std::vector<float> out(rows * t.ne[0]);
  for (uint64_t r = 0; r < rows; ++r)
    dequantize_row(t.type, t.data + (first_row + r) * t.row_bytes, out.data() + r * t.ne[0], t.ne[0]);
  return out;
}

}  // namespace

// y = W x for each x, with x rounded through Q8_0 first when the weights
// are quantized and the model was asked to do so. Each y[r] is summed in
// column order; a row meets several x at once only so that it is read
// once for them (the vocabulary's rows, over every position).
std::vector<std::vector<double>> ReferenceModel::matmul(const Matrix& m, std::vector<std::vector<double>> xs) const {
  if (m.q8_inputs)
    for (std::vector<double>& x : xs) {
      std::vector<float> f(x.begin(), x.end()), back(m.cols);
      std::vector<uint8_t> q(row_bytes(GgmlType::Q8_0, m.cols));
      quantize_row(GgmlType::Q8_0, f.data(), q.data(), m.cols);
      dequantize_row(GgmlType::Q8_0, q.data(), back.data(), m.cols);
      x.assign(back.begin(), back.end());
    }
  constexpr size_t kTogether = 8;
  std::vector<std::vector<double>> ys(xs.size(), std::vector<double>(m.rows));
  for (size_t t0 = 0; t0 < xs.size(); t0 += kTogether) {
    const size_t n = std::min(kTogether, xs.size() - t0);
    for (int r = 0; r < m.rows; ++r) {
      double s[kTogether] = {};
      const float* row = m.row(r);
      for (int c = 0; c < m.cols; ++c)
        for (size_t i = 0; i < n; ++i) s[i] += static_cast<double>(row[c]) * xs[t0 + i][c];
      for (size_t i = 0; i < n; ++i) ys[t0 + i][r] = s[i];
    }
  }
  return ys;
}

std::vector<double> ReferenceModel::matvec(const Matrix& m, const double* x) const {
  return matmul(m, {std::vector<double>(x, x + m.cols)})[0];
}

namespace {

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& g, float eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = g[i] * x[i] * inv;
  return y;
}

}  // namespace

ReferenceModel::Matrix ReferenceModel::matrix(const GgufFile& f, const std::string& name, int expert) const {
  const TensorView& t = f.tensor(name);
  Matrix m;
  m.cols = static_cast<int>(t.ne[0]);
  m.rows = static_cast<int>(t.ne[1]);
  m.w = dequantize(t, expert < 0 ? 0 : uint64_t(expert) * t.ne[1], t.ne[1]);
  m.q8_inputs = q8_ && t.type != GgmlType::F32 && t.type != GgmlType::F16 && t.type != GgmlType::BF16;
  return m;
}

std::vector<float> ReferenceModel::vec(const GgufFile& f, const std::string& name, int row) const {
  const TensorView& t = f.tensor(name);
  return dequantize(t, row < 0 ? 0 : row, 1);
}

ReferenceModel::ReferenceModel(const GgufFile& f, bool yarn_truncate, bool q8_inputs)
    : c_(read_model_config(f)), truncate_(yarn_truncate), q8_(q8_inputs) {
  embd_ = matrix(f, "token_embd.weight");
  out_ = matrix(f, "output.weight");
  out_norm_ = vec(f, "output_norm.weight");
  for (uint32_t l = 0; l < c_.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Layer L;
    L.attn_norm = vec(f, b + "attn_norm.weight");
    L.post_norm = vec(f, b + "post_attention_norm.weight");
    L.wq = matrix(f, b + "attn_q.weight"), L.bq = vec(f, b + "attn_q.bias");
    L.wk = matrix(f, b + "attn_k.weight"), L.bk = vec(f, b + "attn_k.bias");
    L.wv = matrix(f, b + "attn_v.weight"), L.bv = vec(f, b + "attn_v.bias");
    L.wo = matrix(f, b + "attn_output.weight"), L.bo = vec(f, b + "attn_output.bias");
    L.sinks = vec(f, b + "attn_sinks.weight");
    L.router = matrix(f, b + "ffn_gate_inp.weight"), L.router_b = vec(f, b + "ffn_gate_inp.bias");
    for (uint32_t e = 0; e < c_.n_expert; ++e) {
      L.gate.push_back(matrix(f, b + "ffn_gate_exps.weight", e));
      L.up.push_back(matrix(f, b + "ffn_up_exps.weight", e));
      L.down.push_back(matrix(f, b + "ffn_down_exps.weight", e));
      L.gate_b.push_back(vec(f, b + "ffn_gate_exps.bias", e));
      L.up_b.push_back(vec(f, b + "ffn_up_exps.bias", e));
      L.down_b.push_back(vec(f, b + "ffn_down_exps.bias", e));
    }
    layers_.push_back(std::move(L));
  }
}

std::vector<std::vector<float>> ReferenceModel::forward(const std::vector<int32_t>& tokens, bool last_only) const {
  const int T = static_cast<int>(tokens.size()), d = c_.n_embd, hd = c_.head_dim;
  const int n_head = c_.n_head, n_kv = c_.n_head_kv, group = n_head / n_kv;

  // YaRN RoPE (spec §2.4), written out again here on purpose.
  const int half = hd / 2;
  const double ln_base = std::log(static_cast<double>(c_.rope_base));
  auto corr = [&](double beta) { return hd * std::log(c_.rope_orig_ctx / (2 * M_PI * beta)) / (2 * ln_base); };
  double low = corr(c_.yarn_beta_fast), high = corr(c_.yarn_beta_slow);
  if (truncate_) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, hd - 1.0);
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    double extrap = std::pow(static_cast<double>(c_.rope_base), -2.0 * i / hd);
    double t = std::clamp((i - low) / std::max(high - low, 0.001), 0.0, 1.0);
    inv_freq[i] = extrap / c_.rope_scaling_factor * t + extrap * (1 - t);
  }
  const double mscale = 1 + 0.1 * std::log(static_cast<double>(c_.rope_scaling_factor));
  auto rope = [&](std::vector<double>& v, int heads, int pos) {
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        double th = pos * inv_freq[i], cs = std::cos(th) * mscale, sn = std::sin(th) * mscale;
        double a = v[h * hd + i], b = v[h * hd + i + half];
        v[h * hd + i] = a * cs - b * sn;
        v[h * hd + i + half] = b * cs + a * sn;
      }
  };

  // Residual stream x[t][d].
  std::vector<std::vector<double>> x(T, std::vector<double>(d));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d; ++i) x[t][i] = embd_.row(tokens[t])[i];

  for (uint32_t l = 0; l < c_.n_layer; ++l) {
    const Layer& L = layers_[l];
    // Attention: project every position, rotate q and k.
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      std::vector<double> a = rmsnorm(x[t], L.attn_norm, c_.rms_eps);
      q[t] = matvec(L.wq, a.data());
      k[t] = matvec(L.wk, a.data());
      v[t] = matvec(L.wv, a.data());
      for (int i = 0; i < L.wq.rows; ++i) q[t][i] += L.bq[i];
      for (int i = 0; i < L.wk.rows; ++i) k[t][i] += L.bk[i], v[t][i] += L.bv[i];
      rope(q[t], n_head, t);
      rope(k[t], n_kv, t);
    }
    const bool sliding = c_.is_sliding_layer(l);
    for (int t = 0; t < T; ++t) {
      std::vector<double> o(static_cast<size_t>(n_head) * hd, 0.0);
      for (int h = 0; h < n_head; ++h) {
        const int g = h / group;
        // Allowed keys: s <= t, and t - s < window on sliding layers.
        int first = sliding ? std::max(0, t - static_cast<int>(c_.sliding_window) + 1) : 0;
        std::vector<double> z;
        for (int s = first; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[s][g * hd + i];
          z.push_back(dot / std::sqrt(static_cast<double>(hd)));
        }
        // The sink joins the softmax's denominator only, unscaled.
        double m = L.sinks[h];
        for (double zi : z) m = std::max(m, zi);
        double denom = std::exp(L.sinks[h] - m);
        for (double zi : z) denom += std::exp(zi - m);
        for (int s = first; s <= t; ++s) {
          double w = std::exp(z[s - first] - m) / denom;
          for (int i = 0; i < hd; ++i) o[h * hd + i] += w * v[s][g * hd + i];
        }
      }
      std::vector<double> attn = matvec(L.wo, o.data());
      for (int i = 0; i < d; ++i) x[t][i] += attn[i] + L.bo[i];
    }
    // MoE: router top-k by raw logit, softmax over the chosen, clamped SwiGLU.
    for (int t = 0; t < T; ++t) {
      std::vector<double> m = rmsnorm(x[t], L.post_norm, c_.rms_eps);
      std::vector<double> r = matvec(L.router, m.data());
      for (uint32_t e = 0; e < c_.n_expert; ++e) r[e] += L.router_b[e];
      std::vector<int> order(c_.n_expert);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r[a] > r[b]; });
      order.resize(c_.n_expert_used);
      double mx = r[order[0]], sum = 0;
      for (int e : order) sum += std::exp(r[e] - mx);
      std::vector<double> out(d, 0.0);
      const double limit = c_.swiglu_limit, alpha = c_.swiglu_alpha;
      for (int e : order) {
        double w = std::exp(r[e] - mx) / sum;
        std::vector<double> g = matvec(L.gate[e], m.data());
        std::vector<double> u = matvec(L.up[e], m.data());
        std::vector<double> act(c_.n_ff_exp);
        for (uint32_t i = 0; i < c_.n_ff_exp; ++i) {
          double gi = std::min(g[i] + L.gate_b[e][i], limit);
          double ui = std::clamp(u[i] + L.up_b[e][i], -limit, limit);
          act[i] = gi / (1 + std::exp(-alpha * gi)) * (ui + 1);
        }
        std::vector<double> y = matvec(L.down[e], act.data());
        for (int i = 0; i < d; ++i) out[i] += w * (y[i] + L.down_b[e][i]);
      }
      for (int i = 0; i < d; ++i) x[t][i] += out[i];
    }
  }
  std::vector<std::vector<double>> normed;
  for (int t = last_only ? T - 1 : 0; t < T; ++t) normed.push_back(rmsnorm(x[t], out_norm_, c_.rms_eps));
  std::vector<std::vector<float>> logits;
  for (const std::vector<double>& lg : matmul(out_, std::move(normed))) logits.emplace_back(lg.begin(), lg.end());
  return logits;
}

}  // namespace tps::testing
