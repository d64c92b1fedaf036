#include "engine/model/model_config.h"

#include <cmath>

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/kv_format.h"
#include "engine/kernels/packed_rows.h"
#include "runtime/error.h"

namespace tps {

bool ModelConfig::is_sliding_layer(uint32_t layer) const {
  return swa_pattern == 0 || layer % swa_pattern < swa_pattern - 1;
}

std::vector<TensorSpec> gpt_oss_tensors(const ModelConfig& c) {
  using Role = TensorSpec::Role;
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, Role role, std::vector<uint64_t> ne) {
    TensorSpec t;
    t.name = std::move(name);
    t.role = role;
    t.n_dims = static_cast<int>(ne.size());
    for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
    out.push_back(std::move(t));
  };
  const uint64_t d = c.n_embd, q = c.q_width(), kv = c.kv_width(), ff = c.n_ff_exp, E = c.n_expert;
  add("token_embd.weight", Role::matrix, {d, c.n_vocab});
  for (uint32_t l = 0; l < c.n_layer; ++l) {
    const std::string b = cat("blk.", l, ".");
    add(b + "attn_norm.weight", Role::vector, {d});
    add(b + "attn_q.weight", Role::matrix, {d, q});
    add(b + "attn_q.bias", Role::vector, {q});
    add(b + "attn_k.weight", Role::matrix, {d, kv});
    add(b + "attn_k.bias", Role::vector, {kv});
    add(b + "attn_v.weight", Role::matrix, {d, kv});
    add(b + "attn_v.bias", Role::vector, {kv});
    add(b + "attn_output.weight", Role::matrix, {q, d});
    add(b + "attn_output.bias", Role::vector, {d});
    add(b + "attn_sinks.weight", Role::vector, {c.n_head});
    add(b + "post_attention_norm.weight", Role::vector, {d});
    add(b + "ffn_gate_inp.weight", Role::router, {d, E});
    add(b + "ffn_gate_inp.bias", Role::vector, {E});
    add(b + "ffn_gate_exps.weight", Role::expert_matrix, {d, ff, E});
    add(b + "ffn_gate_exps.bias", Role::vector, {ff, E});
    add(b + "ffn_up_exps.weight", Role::expert_matrix, {d, ff, E});
    add(b + "ffn_up_exps.bias", Role::vector, {ff, E});
    add(b + "ffn_down_exps.weight", Role::expert_matrix, {ff, d, E});
    add(b + "ffn_down_exps.bias", Role::vector, {d, E});
  }
  add("output_norm.weight", Role::vector, {d});
  add("output.weight", Role::matrix, {d, c.n_vocab});
  return out;
}

bool type_supported(TensorSpec::Role role, GgmlType type) {
  switch (role) {
    case TensorSpec::Role::vector: return type == GgmlType::F32;
    case TensorSpec::Role::router: return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
    case TensorSpec::Role::matrix:
    case TensorSpec::Role::expert_matrix:
      return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 || is_packed_type(type);
  }
  return false;
}

namespace {
std::string shape_text(int n_dims, const uint64_t* ne) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) s += cat(i ? ", " : "", ne[i]);
  return s + "]";
}
}  // namespace

ModelConfig read_model_config(const GgufFile& f) {
  const std::string& path = f.path();
  ModelConfig c;
  std::optional<std::string_view> arch = f.find_string("general.architecture");
  if (!arch)
    throw InputError(cat(path,
                         ": metadata key 'general.architecture' is missing (expected "
                         "'gpt-oss')"));
  if (*arch != "gpt-oss")
    throw InputError(cat(path, ": general.architecture is '", *arch, "'; tps runs 'gpt-oss' models only"));
  const std::string a = "gpt-oss.";
  if (auto name = f.find_string("general.name")) c.name = std::string(*name);
  c.n_layer = f.get_u32(a + "block_count");
  c.n_embd = f.get_u32(a + "embedding_length");
  c.n_head = f.get_u32(a + "attention.head_count");
  c.n_head_kv = f.get_u32(a + "attention.head_count_kv");
  c.head_dim = f.get_u32(a + "attention.key_length");
  c.n_expert = f.get_u32(a + "expert_count");
  c.n_expert_used = f.get_u32(a + "expert_used_count");
  c.n_ff_exp = f.get_u32(a + "expert_feed_forward_length");
  c.n_ctx_train = f.get_u32(a + "context_length");
  c.sliding_window = f.get_u32(a + "attention.sliding_window");
  c.rms_eps = f.get_f32(a + "attention.layer_norm_rms_epsilon");
  c.rope_base = f.get_f32(a + "rope.freq_base");
  if (auto p = f.find_u32(a + "attention.sliding_window_pattern")) c.swa_pattern = *p;
  if (auto v = f.find_string(a + "rope.scaling.type"); v && *v != "yarn")
    throw InputError(cat(path, ": ", a, "rope.scaling.type is '", *v, "' (expected 'yarn')"));
  if (auto v = f.find_f32(a + "rope.scaling.factor")) c.rope_scaling_factor = *v;
  if (auto v = f.find_u32(a + "rope.scaling.original_context_length")) c.rope_orig_ctx = *v;
  if (auto v = f.find_f32(a + "rope.scaling.yarn_beta_fast")) c.yarn_beta_fast = *v;
  if (auto v = f.find_f32(a + "rope.scaling.yarn_beta_slow")) c.yarn_beta_slow = *v;
  if (auto v = f.find_u32(a + "attention.value_length"); v && *v != c.head_dim)
    throw InputError(cat(path, ": ", a, "attention.value_length is ", *v, " but key_length is ", c.head_dim,
                         " (expected them equal)"));
  if (auto v = f.find_u32(a + "rope.dimension_count"); v && *v != c.head_dim)
    throw InputError(
        cat(path, ": ", a, "rope.dimension_count is ", *v, " (tps rotates whole heads: expected ", c.head_dim, ")"));

  auto require = [&](bool ok, const std::string& what) {
    if (!ok) throw InputError(cat(path, ": ", what));
  };
  require(c.n_layer >= 1, "block_count is 0 (expected at least 1 layer)");
  require(c.n_head_kv >= 1 && c.n_head % c.n_head_kv == 0,
          cat("head_count ", c.n_head, " is not a multiple of head_count_kv ", c.n_head_kv));
  require(c.head_dim % 2 == 0, cat("key_length ", c.head_dim, " is odd (RoPE needs pairs)"));
  require(c.n_expert_used >= 1 && c.n_expert_used <= c.n_expert,
          cat("expert_used_count ", c.n_expert_used, " is not in 1..expert_count (", c.n_expert, ")"));
  require(c.sliding_window >= 1, "attention.sliding_window is 0 (expected a window in tokens)");
  require(c.n_expert >= 1 && c.n_expert <= 256,
          cat("expert_count ", c.n_expert, " is not in 1..256 (tps supports up to 256 experts)"));
  require(c.head_dim <= kMaxHeadDim, cat("key_length ", c.head_dim, " is over ", kMaxHeadDim,
                                         " (tps supports head dimensions up to ", kMaxHeadDim, ")"));
  // Every layer has 19 tensors: a count past the file's is corrupt (and
  // would take long to find tensor by tensor).
  require(uint64_t{c.n_layer} * 19 <= f.tensors().size(),
          cat("block_count ", c.n_layer, " is more than the file's ", f.tensors().size(), " tensors can hold"));
  require(c.n_ctx_train >= 1, "context_length is 0 (expected positions)");
  // The numbers the math divides by, raises to or scales with: finite and
  // in range, or every token comes out garbage.
  auto in_range = [&](float v, float lo, float hi, const std::string& key, const std::string& expected) {
    require(std::isfinite(v) && v >= lo && v <= hi, cat(a, key, " is ", v, " (expected ", expected, ")"));
  };
  in_range(c.rope_base, 1.0f, 1e12f, "rope.freq_base", "a finite base >= 1");
  in_range(c.rope_scaling_factor, 1.0f, 1e6f, "rope.scaling.factor", "a finite factor >= 1");
  in_range(c.yarn_beta_fast, 1e-6f, 1e6f, "rope.scaling.yarn_beta_fast", "a finite value > 0");
  in_range(c.yarn_beta_slow, 1e-6f, 1e6f, "rope.scaling.yarn_beta_slow", "a finite value > 0");
  in_range(c.rms_eps, 1e-12f, 0.1f, "attention.layer_norm_rms_epsilon", "a small positive epsilon");
  require(c.rope_orig_ctx >= 1, "rope.scaling.original_context_length is 0 (expected positions)");

  const TensorView* embd = f.find_tensor("token_embd.weight");
  require(embd != nullptr, "tensor 'token_embd.weight' is missing");
  c.n_vocab = static_cast<uint32_t>(embd->ne[1]);
  for (const char* key : {"bos", "eos", "padding", "unknown"}) {
    const std::string name = cat("tokenizer.ggml.", key, "_token_id");
    if (auto id = f.find_u32(name))
      require(*id < c.n_vocab, cat(name, " is ", *id, ", outside the vocabulary of ", c.n_vocab, " tokens"));
  }

  for (const TensorSpec& t : gpt_oss_tensors(c)) {
    const TensorView* v = f.find_tensor(t.name);
    require(v != nullptr, cat("tensor '", t.name, "' is missing (a gpt-oss model needs it)"));
    bool same = true;
    for (int i = 0; i < 4; ++i) same &= v->ne[i] == t.ne[i];
    require(same, cat("tensor '", t.name, "' has shape ", shape_text(v->n_dims, v->ne.data()), ", expected ",
                      shape_text(t.n_dims, t.ne.data())));
    require(
        type_supported(t.role, v->type),
        cat("tensor '", t.name, "' has type ", type_name(v->type), ", which tps cannot compute with here (supported: ",
            type_names([&](GgmlType type) { return type_supported(t.role, type); }), ")"));
  }
  return c;
}

}  // namespace tps

namespace tps {

void check_vector_tensors(const GgufFile& f, const ModelConfig& c) {
  for (const TensorSpec& t : gpt_oss_tensors(c)) {
    if (t.role != TensorSpec::Role::vector) continue;
    const TensorView& v = f.tensor(t.name);
    const float* x = reinterpret_cast<const float*>(v.data);
    const uint64_t n = v.ne[0] * v.ne[1] * v.ne[2] * v.ne[3];
    for (uint64_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i]))
        throw InputError(
            cat(f.path(), ": tensor '", t.name, "' holds ", x[i], " at index ", i, " (expected finite values)"));
  }
}

ModelShape model_shape(const GgufFile& f, const ModelConfig& c, const QuantizePlan& plan) {
  return model_shape(f.tensors(), c, plan, f.path());
}

ModelShape model_shape(std::span<const TensorView> tensors, const ModelConfig& c, const QuantizePlan& plan,
                       const std::string& where) {
  ModelShape s;
  s.layer_bytes.assign(c.n_layer, 0);
  s.layer_read_bytes.assign(c.n_layer, 0);
  s.kv_heads = static_cast<int>(c.n_head_kv);
  s.experts = static_cast<int>(c.n_expert);
  s.ff = static_cast<int>(c.n_ff_exp);
  s.vocab = static_cast<int>(c.n_vocab);
  for (const TensorView& file_tensor : tensors) {
    TensorView t = file_tensor;  // as the rank will hold it
    t.type = plan.type_for(file_tensor, where);
    t.row_bytes = row_bytes(t.type, t.ne[0]);
    t.bytes = t.row_bytes * t.rows();
    std::string_view n = t.name;
    if (n.starts_with("blk.")) {
      size_t dot = n.find('.', 4);
      uint32_t layer = static_cast<uint32_t>(std::stoul(std::string(n.substr(4, dot - 4))));
      std::string_view role = n.substr(dot + 1);
      // A token reads the routed k of the experts, all of everything else.
      const bool expert = role.find("_exps.") != std::string_view::npos;
      if (layer < c.n_layer) {
        s.layer_bytes[layer] += t.bytes;
        s.layer_read_bytes[layer] += expert ? t.bytes * c.n_expert_used / c.n_expert : t.bytes;
      }
      if (role.starts_with("attn_q") || role.starts_with("attn_k") || role.starts_with("attn_v") ||
          role.starts_with("attn_output") || role.starts_with("attn_sinks"))
        s.attention_bytes += t.bytes;
      else if (expert)
        s.expert_bytes += t.bytes;
      else
        s.replicated_bytes += t.bytes;  // norms, router
    } else if (n.starts_with("token_embd")) {
      s.input_bytes += t.bytes;
      s.input_read_bytes += t.row_bytes;
    } else if (n.starts_with("output")) {
      s.output_bytes += t.bytes;
      s.output_read_bytes += t.bytes;
    }
  }
  return s;
}

}  // namespace tps
