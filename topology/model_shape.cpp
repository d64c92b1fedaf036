#include "topology/model_shape.h"

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
  if (ranks > layers)
    throw InputError(cat(ranks, " ranks cannot split ", layers,
                         " layers by layer (each rank needs at least one; use at most ", layers,
                         " ranks)"));
  // Walk the layers once; a rank's range ends where the running total passes
  // its share of the whole, leaving at least one layer for each later rank.
  std::vector<LayerRange> out(ranks);
  const double share = static_cast<double>(s.total()) / ranks;
  uint64_t running = s.input_bytes;
  int layer = 0;
  for (int r = 0; r < ranks; ++r) {
    LayerRange& range = out[r];
    range.begin = layer;
    range.bytes = r == 0 ? s.input_bytes : 0;
    const int must_leave = ranks - r - 1;
    while (layer < layers - must_leave &&
           (layer == range.begin || r == ranks - 1 ||
            static_cast<double>(running + s.layer_bytes[layer] / 2) <= share * (r + 1))) {
      running += s.layer_bytes[layer];
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

SplitMode parse_split_mode(const std::string& name) {
  for (SplitMode m : {SplitMode::layers, SplitMode::experts, SplitMode::tensor})
    if (name == split_mode_name(m)) return m;
  throw InputError(cat("split mode '", name, "': expected layers, experts or tensor"));
}

Range even_share(int64_t n, int64_t granule, int rank, int ranks) {
  const int64_t units = n / granule;
  return {units * rank / ranks * granule, units * (rank + 1) / ranks * granule};
}

std::vector<RankShare> plan_split(const ModelShape& s, SplitMode mode, int ranks) {
  if (ranks < 1) throw InputError(cat("ranks: got ", ranks, ", expected 1 or more"));
  const int layers = static_cast<int>(s.layer_bytes.size());
  std::vector<RankShare> out(ranks);
  if (mode == SplitMode::layers) {
    std::vector<LayerRange> ranges = split_layers(s, ranks);
    for (int r = 0; r < ranks; ++r) {
      out[r].layers = {ranges[r].begin, ranges[r].end};
      out[r].bytes = ranges[r].bytes;
    }
    return out;
  }
  if (mode == SplitMode::experts && ranks > s.experts)
    throw InputError(cat(ranks, " ranks cannot split ", s.experts,
                         " experts (experts mode gives each rank whole experts: use at most ",
                         s.experts, " ranks)"));
  if (mode == SplitMode::tensor && ranks > s.ff / 32)
    throw InputError(cat(ranks, " ranks cannot split ", s.ff, " expert features in blocks of 32 ",
                         "(tensor mode: use at most ", s.ff / 32, " ranks)"));
  auto part = [](uint64_t bytes, int64_t share, int64_t whole) {
    return whole > 0 ? static_cast<uint64_t>(static_cast<double>(bytes) * share / whole) : 0;
  };
  for (int r = 0; r < ranks; ++r) {
    RankShare& x = out[r];
    x.layers = {0, layers};
    x.kv_heads = even_share(s.kv_heads, 1, r, ranks);
    x.vocab = even_share(s.vocab, 1, r, ranks);
    if (mode == SplitMode::experts) {
      x.experts = even_share(s.experts, 1, r, ranks);
      x.ff = {0, s.ff};
    } else {
      x.experts = {0, s.experts};
      x.ff = even_share(s.ff, 32, r, ranks);
    }
    x.bytes = s.input_bytes + s.replicated_bytes +
              part(s.attention_bytes, x.kv_heads.size(), s.kv_heads) +
              part(s.output_bytes, x.vocab.size(), s.vocab) +
              (mode == SplitMode::experts ? part(s.expert_bytes, x.experts.size(), s.experts)
                                          : part(s.expert_bytes, x.ff.size(), s.ff));
  }
  return out;
}

}  // namespace tps
