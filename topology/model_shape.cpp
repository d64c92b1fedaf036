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

}  // namespace tps
