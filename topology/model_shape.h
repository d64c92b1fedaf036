// The few facts about a model that planning needs, filled by the engine
// from a model file so that topology/ never reads model formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tps {

struct ModelShape {
  std::vector<uint64_t> layer_bytes;  // weight bytes of each transformer block
  uint64_t input_bytes = 0;           // token embeddings (read one row per token)
  uint64_t output_bytes = 0;          // final norm and unembedding
  uint64_t total() const;
  // Bytes one decoded token reads: of each block (every attention and router
  // weight, the routed share of the experts), of the embeddings (one row)
  // and of the output head (all of it). A pipeline balances these: they,
  // not the bytes held, set each stage's time per token.
  std::vector<uint64_t> layer_read_bytes;
  uint64_t input_read_bytes = 0, output_read_bytes = 0;

  // What the splits that cut through layers cut, summed over all layers.
  int kv_heads = 0;               // attention is cut by KV-head group
  uint64_t attention_bytes = 0;   // q, k, v, output projections, biases, sinks
  int experts = 0;                // experts mode cuts whole experts
  int ff = 0;                     // tensor mode cuts expert features, in blocks of 32
  uint64_t expert_bytes = 0;      // expert gate, up, down and their biases
  uint64_t replicated_bytes = 0;  // norms and routers: every rank holds them
  int vocab = 0;                  // the output head is cut by vocabulary rows
};

// Pipeline split: each rank owns a contiguous range of layers, balanced by
// the bytes a decoded token reads (when the shape has them; bytes held
// otherwise); rank 0 also holds the embeddings, the last rank the output head.
// With more ranks than layers the ranks beyond get none (they pass the
// hidden state on). Throws InputError when ranks < 1.
struct LayerRange {
  int begin = 0, end = 0;  // [begin, end) layers
  uint64_t bytes = 0;      // everything the rank holds
};
std::vector<LayerRange> split_layers(const ModelShape& shape, int ranks);

// The three ways to split gpt-oss across ranks (docs/ARCHITECTURE.md):
//   layers  -- a contiguous range of layers each (pipeline);
//   experts -- whole experts of every layer, attention by KV-head group, the
//              output head by vocabulary rows;
//   tensor  -- a slice of every expert's features (whole 32-value blocks),
//              attention by KV-head group, the output head by vocabulary rows.
enum class SplitMode { layers, experts, tensor };
const char* split_mode_name(SplitMode mode);
// "layers", "experts" or "tensor"; InputError otherwise.
SplitMode parse_split_mode(const std::string& name);
// The mode of that name; nullopt for any other.
std::optional<SplitMode> find_split_mode(const std::string& name);
inline constexpr SplitMode kSplitModes[] = {SplitMode::layers, SplitMode::experts, SplitMode::tensor};
// Every name, for messages and help: "layers, experts or tensor".
std::string split_mode_names();

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
// Rank r's contiguous share of n units cut in granules (the last granule may
// be short): shares differ by at most one granule; with more ranks than
// granules some shares are empty.
Range even_share(int64_t n, int64_t granule, int rank, int ranks);

// The output head is cut by vocabulary rows in chunks of this many, and
// sampling sums probabilities per chunk: the same sums in the same order
// whatever the rank count, so a seed draws the same token on 1 rank or 4.
constexpr int64_t kVocabGranule = 256;

// A rank's share of every part of the model, in global indices. What a mode
// does not cut is the whole range (layers mode: all heads, experts and
// features of its layers; the output head on the last rank only).
struct RankShare {
  Range layers;        // layers mode: [begin, end) layers; others: all layers
  Range kv_heads;      // experts/tensor: KV heads (and their query heads)
  Range experts;       // experts mode: whole experts
  Range ff;            // tensor mode: expert features, whole blocks of 32
  Range vocab;         // output rows (chunks of kVocabGranule)
  uint64_t bytes = 0;  // weights the rank holds (embeddings on every rank)
  // Weight bytes one decoded token reads on the rank: of its layers (a
  // pipeline), or its share of every layer's attention, routed experts (in
  // experts mode the expected share) and head, and all of the norms and
  // routers; one embedding row where it holds the embeddings.
  uint64_t read_bytes = 0;
};
// Every rank's share. Counts that do not divide evenly give uneven shares;
// more ranks than units of a part leave some ranks without any of it (they
// still take part in every exchange). Throws InputError when ranks < 1.
std::vector<RankShare> plan_split(const ModelShape& shape, SplitMode mode, int ranks);

// What a share holds, in the words of its mode: "layers 0-11, output head",
// "KV heads 0-3, experts 0-15, vocabulary rows 0-100607", ...
std::string share_text(const RankShare& share, SplitMode mode);

// The parts a mode cuts of which the share holds nothing ("layers",
// "experts", ...): for the start-up log's warning.
std::vector<std::string> idle_parts(const RankShare& share, SplitMode mode);

}  // namespace tps
