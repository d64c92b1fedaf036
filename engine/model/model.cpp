#include "engine/model/model.h"

namespace tps {

Model load_model(GgufFile file, ThreadPool& pool, SplitMode mode, int rank, int ranks, const QuantizePlan& plan,
                 const std::function<void(uint64_t, uint64_t)>& progress) {
  ModelConfig config = read_model_config(file);
  check_vector_tensors(file, config);
  Tokenizer tokenizer = Tokenizer::from_gguf(file);
  Shard shard = plan_shard(model_shape(file, config, plan), mode, rank, ranks);
  RankWeights weights = load_shard(file, config, shard, plan, pool, progress);
  std::string salt = plan.empty() ? "" : plan.describe(file);
  return Model{std::move(file), config, shard, std::move(weights), std::move(tokenizer), std::move(salt)};
}

}  // namespace tps
