#include "engine/model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/gguf/quant_blocks.h"
#include "engine/model/role_types.h"
#include "runtime/error.h"
#include "runtime/hash.h"

namespace tps {
namespace {

// Mean square of the 16 E2M1 values, each code equally likely: 68.5 / 8.
constexpr double kMxfp4MeanSquare = 8.5625;
// Standard deviation of an int8 uniform on [-127, 127]: sqrt((255^2 - 1) / 12).
constexpr float kQ8UniformStd = 73.6116f;
constexpr float kSqrt3 = 1.7320508f;

struct Scale {
  float stddev;
  float mean = 0;
};

// Weight scales (see the header comment for where they come from).
Scale scale_for(const TensorSpec& t, const ModelConfig& c) {
  auto ends_with = [&](const char* suffix) {
    size_t n = std::strlen(suffix);
    return t.name.size() >= n && t.name.compare(t.name.size() - n, n, suffix) == 0;
  };
  auto fan_in = [](uint32_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  if (ends_with("norm.weight")) return {0.1f, 1.0f};  // RMSNorm gains near 1
  if (ends_with("attn_sinks.weight")) return {0.5f};
  if (ends_with(".bias")) return {ends_with("ffn_gate_inp.bias") ? 0.1f : 0.02f};
  if (t.name == "token_embd.weight") return {1.0f};
  if (t.name == "output.weight") return {2.0f * fan_in(c.n_embd)};
  if (ends_with("attn_output.weight")) return {0.5f * fan_in(c.q_width())};
  if (ends_with("ffn_down_exps.weight")) return {0.5f * fan_in(c.n_ff_exp)};
  if (ends_with("ffn_gate_inp.weight")) return {3.0f * fan_in(c.n_embd)};
  return {fan_in(c.n_embd)};  // q, k, v, expert gate and up
}

// A matrix's kind: its name without "blk.N." and ".weight".
std::string matrix_kind(const std::string& name) {
  std::string k = name.starts_with("blk.") ? name.substr(name.find('.', 4) + 1) : name;
  return k.substr(0, k.rfind('.'));
}

bool role_names(const std::string& role, const TensorSpec& t) {
  if (t.role != TensorSpec::Role::matrix && t.role != TensorSpec::Role::expert_matrix) return false;
  const std::string kind = matrix_kind(t.name);
  if (role == "experts") return t.role == TensorSpec::Role::expert_matrix;
  if (role == "dense") return t.role == TensorSpec::Role::matrix;
  if (role == "attn") return kind.starts_with("attn_");
  return role == kind;
}

const char* const kRoles[] = {"token_embd",    "output",      "attn_q",        "attn_k", "attn_v",  "attn_output",
                              "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "attn",   "experts", "dense"};

}  // namespace

GgmlType synthetic_type(const TensorSpec& t, const SyntheticSpec& s) {
  GgmlType type = t.role == TensorSpec::Role::matrix          ? s.dense_type
                  : t.role == TensorSpec::Role::expert_matrix ? s.expert_type
                                                              : GgmlType::F32;
  for (const auto& [role, as] : s.types)
    if (role_names(role, t)) type = as;
  return type;
}

void set_synthetic_types(SyntheticSpec& spec, const std::string& text) {
  auto refusal = [](const std::string& item) { return cat("--type '", item, "': expected ROLE=TYPE"); };
  for (const auto& [item, role, name] : split_role_types(text, refusal)) {
    if (std::find(std::begin(kRoles), std::end(kRoles), role) == std::end(kRoles)) {
      std::string roles;
      for (const char* r : kRoles) roles += (roles.empty() ? "" : ", ") + std::string(r);
      throw InputError(cat("--type '", item, "': unknown role '", role, "' (expected one of: ", roles, ")"));
    }
    std::optional<GgmlType> type = type_from_name(name);
    if (!type || !can_decode(*type))
      throw InputError(
          cat("--type '", item, "': unknown type '", name, "' (expected one of ", type_names(can_decode), ")"));
    const uint64_t block = ggml_type_info(static_cast<uint32_t>(*type))->block_elems;
    for (const TensorSpec& t : gpt_oss_tensors(spec.config))
      if (role_names(role, t) && t.ne[0] % block)
        throw InputError(cat("--type '", item, "': tensor ", t.name, " has rows of ", t.ne[0], " values, not whole ",
                             block, "-value blocks of ", name));
    spec.types.emplace_back(role, *type);
  }
}

namespace {

uint64_t rows_of(const TensorSpec& t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

ModelConfig base_config() {
  ModelConfig c;
  c.n_ctx_train = 131072;
  c.rope_base = 150000.0f;
  c.rope_scaling_factor = 32.0f;
  c.rope_orig_ctx = 4096;
  c.n_vocab = 201088;
  return c;
}

}  // namespace

TensorGenerator::TensorGenerator(const TensorSpec& t, GgmlType type, float stddev, float mean, uint64_t seed,
                                 bool rounded)
    : type_(type),
      rounded_(rounded),
      row_elems_(t.ne[0]),
      row_bytes_(tps::row_bytes(type, t.ne[0])),
      std_(stddev),
      mean_(mean),
      state_(seed ^ fnv1a(t.name)) {
  if (type == GgmlType::MXFP4) {
    // Pick exponents k and k+1 (value = code * 2^k) and a mix of the two whose
    // mean square is stddev^2; exact arithmetic only, no libm.
    double target = static_cast<double>(stddev) * stddev / kMxfp4MeanSquare;
    int k = 0;
    while (std::ldexp(1.0, 2 * k) > target) --k;
    while (std::ldexp(1.0, 2 * (k + 1)) <= target) ++k;
    double lo = std::ldexp(1.0, 2 * k), hi = std::ldexp(1.0, 2 * (k + 1));
    exp_lo_ = k;
    p_hi_ = static_cast<uint64_t>((target - lo) / (hi - lo) * 4294967296.0);
  }
}

uint64_t TensorGenerator::next() { return splitmix64(state_); }

size_t TensorGenerator::rounded_rows(uint8_t* out, uint64_t rows) {
  std::vector<float> row(row_elems_);
  for (uint64_t r = 0; r < rows; ++r) {
    for (float& v : row) {
      const float u = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      v = mean_ + std_ * kSqrt3 * (2.0f * u - 1.0f);
    }
    quantize_row(type_, row.data(), out + r * row_bytes_, row_elems_);
  }
  return rows * row_bytes_;
}

size_t TensorGenerator::next_rows(uint8_t* out, uint64_t rows) {
  uint64_t n = rows * row_elems_;
  if (rounded_ && type_ != GgmlType::F32) return rounded_rows(out, rows);
  switch (type_) {
    case GgmlType::F32: {
      float* f = reinterpret_cast<float*>(out);
      for (uint64_t i = 0; i < n; ++i) {
        float u = static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        f[i] = mean_ + std_ * kSqrt3 * (2.0f * u - 1.0f);
      }
      break;
    }
    case GgmlType::Q8_0: {
      uint16_t d = fp32_to_fp16(std_ / kQ8UniformStd);
      for (uint64_t b = 0; b < n / 32; ++b) {
        uint8_t* block = out + b * 34;
        std::memcpy(block, &d, 2);
        for (int i = 0; i < 32; i += 4) {
          uint64_t r = next();
          for (int j = 0; j < 4; ++j)
            block[2 + i + j] = static_cast<uint8_t>(static_cast<int>((r >> (16 * j)) % 255) - 127);
        }
      }
      break;
    }
    case GgmlType::MXFP4: {
      for (uint64_t b = 0; b < n / 32; ++b) {
        uint8_t* block = out + b * 17;
        uint64_t r0 = next(), r1 = next(), r2 = next();
        int k = exp_lo_ + ((r2 & 0xFFFFFFFFull) < p_hi_ ? 1 : 0);
        block[0] = static_cast<uint8_t>(std::clamp(k + 127, 1, 254));  // E8M0: 2^(e-127)
        std::memcpy(block + 1, &r0, 8);
        std::memcpy(block + 9, &r1, 8);
      }
      break;
    }
    default:  // every other type: the values as F32 would have them, rounded (quant_blocks.h)
      return rounded_rows(out, rows);
  }
  return rows * row_bytes_;
}

std::vector<std::string> synthetic_preset_names() { return {"tiny", "small", "20b-4l", "20b", "120b-4l", "120b"}; }

SyntheticSpec synthetic_preset(const std::string& name) {
  SyntheticSpec s;
  s.preset = name;
  ModelConfig c = base_config();
  if (name == "tiny") {  // unit tests: every code path at the smallest widths
    c.n_layer = 2, c.n_embd = 64, c.n_head = 4, c.n_head_kv = 2, c.head_dim = 16;
    c.n_expert = 4, c.n_expert_used = 2, c.n_ff_exp = 64, c.sliding_window = 16;
  } else if (name == "small") {  // end-to-end tests
    c.n_layer = 4, c.n_embd = 128, c.n_head = 8, c.n_head_kv = 2, c.head_dim = 32;
    c.n_expert = 8, c.n_expert_used = 4, c.n_ff_exp = 128, c.sliding_window = 32;
  } else if (name == "20b" || name == "20b-4l") {  // gpt-oss-20b widths (spec §1)
    c.n_layer = name == "20b" ? 24 : 4;
    c.n_embd = 2880, c.n_head = 64, c.n_head_kv = 8, c.head_dim = 64;
    c.n_expert = 32, c.n_expert_used = 4, c.n_ff_exp = 2880, c.sliding_window = 128;
  } else if (name == "120b" || name == "120b-4l") {  // gpt-oss-120b: 20b's widths, 36 layers, 128 experts
    c.n_layer = name == "120b" ? 36 : 4;
    c.n_embd = 2880, c.n_head = 64, c.n_head_kv = 8, c.head_dim = 64;
    c.n_expert = 128, c.n_expert_used = 4, c.n_ff_exp = 2880, c.sliding_window = 128;
    // In 3 parts, as the release ships.
    if (name == "120b") s.split_max_bytes = 22ull << 30;
  } else {
    std::string names;
    for (const std::string& n : synthetic_preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw InputError(cat("unknown preset '", name, "' (expected one of: ", names, ")"));
  }
  c.name = "tps synthetic gpt-oss " + name;
  s.config = c;
  return s;
}

namespace {

uint64_t tensor_bytes(const TensorSpec& t, const SyntheticSpec& s) {
  return row_bytes(synthetic_type(t, s), t.ne[0]) * rows_of(t);
}

}  // namespace

uint64_t synthetic_tensor_bytes(const SyntheticSpec& s) {
  uint64_t total = 0;
  for (const TensorSpec& t : gpt_oss_tensors(s.config)) total += tensor_bytes(t, s);
  return total;
}

ModelShape synthetic_model_shape(const SyntheticSpec& s, const QuantizePlan& plan) {
  const std::vector<TensorSpec> specs = gpt_oss_tensors(s.config);
  std::vector<TensorView> tensors;  // names, types and shapes: model_shape sizes them
  for (const TensorSpec& t : specs)
    tensors.push_back({.name = t.name, .type = synthetic_type(t, s), .n_dims = t.n_dims, .ne = t.ne});
  return model_shape(tensors, s.config, plan, "preset " + s.preset);
}

namespace {

// The release's metadata (spec §4.2), plus tps.synthetic.* provenance
// (llama.cpp ignores unknown keys). No chat template: tps renders harmony
// itself.
void write_metadata(GgufWriter& w, const SyntheticSpec& s, const Vocab& vocab) {
  const ModelConfig& c = s.config;
  const std::string a = c.architecture;
  w.add_string("general.architecture", a);
  w.add_string("general.type", "model");
  w.add_string("general.name", c.name);
  w.add_string("general.basename", "gpt-oss");
  w.add_string("general.size_label", s.preset);
  w.add_u32(a + ".block_count", c.n_layer);
  w.add_u32(a + ".context_length", c.n_ctx_train);
  w.add_u32(a + ".embedding_length", c.n_embd);
  w.add_u32(a + ".feed_forward_length", c.n_ff_exp);
  w.add_u32(a + ".attention.head_count", c.n_head);
  w.add_u32(a + ".attention.head_count_kv", c.n_head_kv);
  w.add_f32(a + ".rope.freq_base", c.rope_base);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w.add_u32(a + ".expert_count", c.n_expert);
  w.add_u32(a + ".expert_used_count", c.n_expert_used);
  w.add_u32(a + ".attention.key_length", c.head_dim);
  w.add_u32(a + ".attention.value_length", c.head_dim);
  w.add_u32(a + ".attention.sliding_window", c.sliding_window);
  w.add_u32(a + ".expert_feed_forward_length", c.n_ff_exp);
  w.add_string(a + ".rope.scaling.type", "yarn");
  w.add_f32(a + ".rope.scaling.factor", c.rope_scaling_factor);
  w.add_u32(a + ".rope.scaling.original_context_length", c.rope_orig_ctx);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "gpt-4o");
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_i32_array("tokenizer.ggml.token_type", vocab.token_types);
  w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  w.add_u32("tokenizer.ggml.bos_token_id", vocab.bos);
  w.add_u32("tokenizer.ggml.eos_token_id", vocab.eos);
  w.add_u32("tokenizer.ggml.padding_token_id", vocab.pad);
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.file_type", 38);  // MOSTLY_MXFP4_MOE
  w.add_string("tps.synthetic.preset", s.preset);
  w.add_u64("tps.synthetic.seed", s.seed);
  if (s.rounded) w.add_bool("tps.synthetic.rounded", true);
}

// Whole tensors in file order, a new part when the next would take a part
// past max_bytes (0: one part).
std::vector<std::vector<TensorSpec>> split_parts(const std::vector<TensorSpec>& tensors, const SyntheticSpec& s) {
  std::vector<std::vector<TensorSpec>> parts(1);
  uint64_t bytes = 0;
  for (const TensorSpec& t : tensors) {
    const uint64_t b = tensor_bytes(t, s);
    if (s.split_max_bytes && !parts.back().empty() && bytes + b > s.split_max_bytes) parts.emplace_back(), bytes = 0;
    parts.back().push_back(t);
    bytes += b;
  }
  return parts;
}

}  // namespace

std::vector<std::string> synthetic_model_paths(const SyntheticSpec& spec, const std::string& path) {
  const size_t n = split_parts(gpt_oss_tensors(spec.config), spec).size();
  if (n == 1) return {path};
  const std::string prefix = path.ends_with(".gguf") ? path.substr(0, path.size() - 5) : path;
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back(split_part_path(prefix, static_cast<int>(i), static_cast<int>(n)));
  return out;
}

void write_synthetic_model(const SyntheticSpec& s, const Vocab& vocab, const std::string& path,
                           const std::function<void(uint64_t, uint64_t)>& progress,
                           const std::vector<std::string>& inputs) {
  const ModelConfig& c = s.config;
  if (vocab.tokens.size() != c.n_vocab)
    throw InputError(cat("vocabulary has ", vocab.tokens.size(), " tokens, the model ", c.n_vocab));
  const std::vector<TensorSpec> tensors = gpt_oss_tensors(c);
  const std::vector<std::vector<TensorSpec>> parts = split_parts(tensors, s);
  const std::vector<std::string> paths = synthetic_model_paths(s, path);

  const uint64_t total = synthetic_tensor_bytes(s);
  const uint64_t chunk_target = 8ull << 20;
  std::vector<uint8_t> buffer;
  uint64_t done = 0, reported = 0;
  // A split model goes in place whole: every part is written beside its
  // path first, and only then are they renamed, so that a failure leaves
  // what was there (and no temporary: each writer removes its own).
  std::vector<std::unique_ptr<GgufWriter>> written;
  for (size_t p = 0; p < parts.size(); ++p) {
    GgufWriter& w = *written.emplace_back(std::make_unique<GgufWriter>(paths[p], 32, inputs));
    if (p == 0) write_metadata(w, s, vocab);
    if (parts.size() > 1) {  // llama.cpp's gguf-split keys, in every part
      w.add_u16("split.no", static_cast<uint16_t>(p));
      w.add_u16("split.count", static_cast<uint16_t>(parts.size()));
      w.add_i32("split.tensors.count", static_cast<int32_t>(tensors.size()));
    }
    for (const TensorSpec& t : parts[p])
      w.add_tensor(t.name, synthetic_type(t, s), std::vector<uint64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    w.begin_data();
    for (const TensorSpec& t : parts[p]) {
      GgmlType type = synthetic_type(t, s);
      Scale sc = scale_for(t, c);
      TensorGenerator gen(t, type, sc.stddev, sc.mean, s.seed, s.rounded);
      uint64_t rows = rows_of(t);
      uint64_t rows_per_chunk = std::max<uint64_t>(1, chunk_target / gen.row_bytes());
      buffer.resize(std::min(rows, rows_per_chunk) * gen.row_bytes());
      for (uint64_t r = 0; r < rows; r += rows_per_chunk) {
        uint64_t n = std::min(rows_per_chunk, rows - r);
        size_t bytes = gen.next_rows(buffer.data(), n);
        w.write_tensor_data(t.name, buffer.data(), bytes);
        done += bytes;
        if (progress && (done - reported >= (64ull << 20) || done == total)) {
          progress(done, total);
          reported = done;
        }
      }
    }
    w.complete();
  }
  for (const std::unique_ptr<GgufWriter>& w : written) w->commit();
}

}  // namespace tps
