// A model ready to run on this rank: the file (metadata, and the token
// embeddings read through its mapping), its checked config, the rank's shard
// of the weights in memory of its own (on the NUMA node its memory policy
// names), and the tokenizer. Immutable after load; sessions (conversations)
// refer to it.
#pragma once

#include <functional>
#include <string>

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/text/tokenizer.h"

namespace tps {

struct Model {
  GgufFile file;
  ModelConfig config;
  Shard shard;
  RankWeights weights;
  Tokenizer tokenizer;
  // What changed the weights at load: --quantize's plan as it applies to
  // this file (QuantizePlan::describe; empty for none). Saved KV blocks
  // (the disk tier's identity) are of these weights, not the file's.
  std::string weights_salt;
};

// Checks the opened file, takes rank `rank` of `ranks`'s shard in `mode`
// (the whole model for one rank) and copies it in on the pool's threads,
// converting the roles the plan names (--quantize). progress(done, total)
// is called as the bytes are copied. Throws InputError naming the file when
// it changes on disk meanwhile.
Model load_model(GgufFile file, ThreadPool& pool, SplitMode mode = SplitMode::tensor, int rank = 0, int ranks = 1,
                 const QuantizePlan& plan = {}, const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace tps
