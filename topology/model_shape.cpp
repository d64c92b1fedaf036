#include "topology/model_shape.h"

#include <algorithm>

#include "runtime/error.h"

namespace tps {

uint64_t ModelShape::total() const {
  uint64_t t = input_bytes + output_bytes;
  for (uint64_t b : layer_bytes) t += b;
  return t;
}

std::vector<LayerRange> split_layers(const ModelShape& s, int ranks) {
  const int layers = static_cast<int>(s.layer_bytes.size());
  if (ranks < 1) throw InputError(cat("ranks: got ", ranks, ", expected 1 or more"));
  // The cost each stage balances: bytes read per token where known.
  const bool reads = s.layer_read_bytes.size() == s.layer_bytes.size();
  const std::vector<uint64_t>& cost = reads ? s.layer_read_bytes : s.layer_bytes;
  const uint64_t first = reads ? s.input_read_bytes : s.input_bytes;
  const uint64_t last = reads ? s.output_read_bytes : s.output_bytes;
  uint64_t total = first + last;
  for (uint64_t c : cost) total += c;
  // Walk the layers once; a rank's range ends where the running cost passes
  // its share of the whole, leaving at least one layer for each later rank
  // while there are layers to leave. Ranks beyond the layer count get none.
  std::vector<LayerRange> out(ranks);
  const double share = static_cast<double>(total) / ranks;
  uint64_t running = first;
  int layer = 0;
  for (int r = 0; r < ranks; ++r) {
    LayerRange& range = out[r];
    range.begin = layer;
    range.bytes = r == 0 ? s.input_bytes : 0;
    const int must_leave = std::max(0, std::min(ranks - r - 1, layers - layer - 1));
    while (layer < layers - must_leave && (layer == range.begin || r == ranks - 1 ||
                                           static_cast<double>(running + cost[layer] / 2) <= share * (r + 1))) {
      running += cost[layer];
      range.bytes += s.layer_bytes[layer];
      ++layer;
    }
    range.end = layer;
  }
  out.back().bytes += s.output_bytes;
  return out;
}

const char* split_mode_name(SplitMode mode) {
  switch (mode) {
    case SplitMode::layers: return "layers";
    case SplitMode::experts: return "experts";
    case SplitMode::tensor: return "tensor";
  }
  return "?";
}

std::optional<SplitMode> find_split_mode(const std::string& name) {
  for (SplitMode m : kSplitModes)
    if (name == split_mode_name(m)) return m;
  return std::nullopt;
}

SplitMode parse_split_mode(const std::string& name) {
  if (const std::optional<SplitMode> m = find_split_mode(name)) return *m;
  throw InputError(cat("split mode '", name, "': expected ", split_mode_names()));
}

std::string split_mode_names() {
  std::string names;
  const size_t n = std::size(kSplitModes);
  for (size_t i = 0; i < n; ++i)
    names += (i == 0 ? "" : i + 1 < n ? ", " : " or ") + std::string(split_mode_name(kSplitModes[i]));
  return names;
}

Range even_share(int64_t n, int64_t granule, int rank, int ranks) {
  const int64_t units = (n + granule - 1) / granule;
  return {std::min(n, units * rank / ranks * granule), std::min(n, units * (rank + 1) / ranks * granule)};
}

std::vector<RankShare> plan_split(const ModelShape& s, SplitMode mode, int ranks) {
  if (ranks < 1) throw InputError(cat("ranks: got ", ranks, ", expected 1 or more"));
  const int layers = static_cast<int>(s.layer_bytes.size());
  std::vector<RankShare> out(ranks);
  if (mode == SplitMode::layers) {
    std::vector<LayerRange> ranges = split_layers(s, ranks);
    for (int r = 0; r < ranks; ++r) {
      RankShare& x = out[r];
      x.layers = {ranges[r].begin, ranges[r].end};
      x.kv_heads = {0, s.kv_heads};
      x.experts = {0, s.experts};
      x.ff = {0, s.ff};
      x.vocab = r == ranks - 1 ? Range{0, s.vocab} : Range{0, 0};  // the last rank's head
      x.bytes = ranges[r].bytes;
      for (int l = x.layers.begin; l < x.layers.end && l < static_cast<int>(s.layer_read_bytes.size()); ++l)
        x.read_bytes += s.layer_read_bytes[l];  // a shape without reads (a test's) reads none
      x.read_bytes += (r == 0 ? s.input_read_bytes : 0) + (x.vocab.size() ? s.output_read_bytes : 0);
    }
    return out;
  }
  auto part = [](uint64_t bytes, int64_t share, int64_t whole) {
    return whole > 0 ? static_cast<uint64_t>(static_cast<double>(bytes) * share / whole) : 0;
  };
  // What a token reads of the experts: the routed share, all layers.
  uint64_t layers_read = 0;
  for (uint64_t b : s.layer_read_bytes) layers_read += b;
  const uint64_t experts_read = layers_read - std::min(layers_read, s.attention_bytes + s.replicated_bytes);
  for (int r = 0; r < ranks; ++r) {
    RankShare& x = out[r];
    x.layers = {0, layers};
    x.kv_heads = even_share(s.kv_heads, 1, r, ranks);
    x.vocab = even_share(s.vocab, kVocabGranule, r, ranks);
    if (mode == SplitMode::experts) {
      x.experts = even_share(s.experts, 1, r, ranks);
      x.ff = {0, s.ff};
    } else {
      x.experts = {0, s.experts};
      x.ff = even_share(s.ff, 32, r, ranks);
    }
    x.bytes = s.input_bytes + s.replicated_bytes + part(s.attention_bytes, x.kv_heads.size(), s.kv_heads) +
              part(s.output_bytes, x.vocab.size(), s.vocab) +
              (mode == SplitMode::experts ? part(s.expert_bytes, x.experts.size(), s.experts)
                                          : part(s.expert_bytes, x.ff.size(), s.ff));
    x.read_bytes = s.input_read_bytes + s.replicated_bytes + part(s.attention_bytes, x.kv_heads.size(), s.kv_heads) +
                   part(s.output_read_bytes, x.vocab.size(), s.vocab) +
                   (mode == SplitMode::experts ? part(experts_read, x.experts.size(), s.experts)
                                               : part(experts_read, x.ff.size(), s.ff));
  }
  return out;
}

namespace {
std::string range_text(const Range& r) { return r.size() == 0 ? "none" : cat(r.begin, "-", r.end - 1); }
}  // namespace

std::string share_text(const RankShare& x, SplitMode mode) {
  if (mode == SplitMode::layers) return cat("layers ", range_text(x.layers), x.vocab.size() ? ", output head" : "");
  return cat("KV heads ", range_text(x.kv_heads), ", ",
             mode == SplitMode::experts ? cat("experts ", range_text(x.experts))
                                        : cat("features ", range_text(x.ff), " of every expert"),
             ", vocabulary rows ", range_text(x.vocab));
}

std::vector<std::string> idle_parts(const RankShare& x, SplitMode mode) {
  std::vector<std::string> idle;
  if (x.layers.size() == 0) idle.push_back("layers");
  if (mode != SplitMode::layers) {
    if (x.kv_heads.size() == 0) idle.push_back("attention heads");
    if (mode == SplitMode::experts && x.experts.size() == 0) idle.push_back("experts");
    if (mode == SplitMode::tensor && x.ff.size() == 0) idle.push_back("expert features");
    if (x.vocab.size() == 0) idle.push_back("vocabulary rows");
  }
  return idle;
}

}  // namespace tps
