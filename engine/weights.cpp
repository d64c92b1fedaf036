#include "engine/weights.h"

#include "engine/gguf_reader.h"
#include "runtime/error.h"

namespace tps {

ModelWeights map_weights(const GgufFile& f, const ModelConfig& c, const uint8_t* tensor_data) {
  auto where = [&](const TensorView& t) {
    return tensor_data ? tensor_data + (t.offset - f.data_offset()) : t.data;
  };
  auto matrix = [&](const std::string& name) {
    const TensorView& t = f.tensor(name);
    return Matrix{t.type, static_cast<int64_t>(t.rows()), static_cast<int64_t>(t.ne[0]), where(t),
                  t.row_bytes};
  };
  // Vectors are F32 (checked with the config) and 32-byte aligned in GGUF.
  auto vec = [&](const std::string& name) {
    return reinterpret_cast<const float*>(where(f.tensor(name)));
  };
  ModelWeights w;
  w.embd = matrix("token_embd.weight");
  w.output = matrix("output.weight");
  w.out_norm = vec("output_norm.weight");
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string b = cat("blk.", l, ".");
    LayerWeights L;
    L.attn_norm = vec(b + "attn_norm.weight");
    L.wq = matrix(b + "attn_q.weight"), L.bq = vec(b + "attn_q.bias");
    L.wk = matrix(b + "attn_k.weight"), L.bk = vec(b + "attn_k.bias");
    L.wv = matrix(b + "attn_v.weight"), L.bv = vec(b + "attn_v.bias");
    L.wo = matrix(b + "attn_output.weight"), L.bo = vec(b + "attn_output.bias");
    L.sinks = vec(b + "attn_sinks.weight");
    L.post_norm = vec(b + "post_attention_norm.weight");
    L.router = matrix(b + "ffn_gate_inp.weight"), L.router_b = vec(b + "ffn_gate_inp.bias");
    L.gate = matrix(b + "ffn_gate_exps.weight"), L.gate_b = vec(b + "ffn_gate_exps.bias");
    L.up = matrix(b + "ffn_up_exps.weight"), L.up_b = vec(b + "ffn_up_exps.bias");
    L.down = matrix(b + "ffn_down_exps.weight"), L.down_b = vec(b + "ffn_down_exps.bias");
    w.layers.push_back(L);
  }
  return w;
}

uint64_t decode_bytes_per_token(const ModelWeights& w, const ModelConfig& c) {
  auto bytes = [](const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; };
  const uint64_t d = c.n_embd, q = c.q_width(), kv = c.kv_width(), ff = c.n_ff_exp;
  uint64_t total = w.embd.row_bytes + bytes(w.output) + 4 * d;
  for (const LayerWeights& L : w.layers) {
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.router);
    total += 4 * (3 * d + q + 2 * kv + c.n_head + c.n_expert);  // norms, biases, sinks
    // The chosen experts: gate and up (ff rows each), down (d rows), biases.
    total += c.n_expert_used * (2 * ff * L.gate.row_bytes + d * L.down.row_bytes + 4 * (2 * ff + d));
  }
  return total;
}

}  // namespace tps
