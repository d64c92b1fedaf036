#include "engine/cache/prompt_cache.h"

#include <algorithm>

namespace tps {

uint64_t tier_unit_bytes(KvType type, const ModelConfig& c, const Shard& shard) {
  return kTierFullPerSliding * KvPool::block_bytes(c, shard, type, BlockKind::full) +
         KvPool::block_bytes(c, shard, type, BlockKind::sliding);
}

int tier_units(uint64_t cap_bytes, KvType type, const ModelConfig& c, const Shard& shard) {
  if (cap_bytes == 0) return 0;
  const uint64_t unit = std::max<uint64_t>(tier_unit_bytes(type, c, shard), 1);
  return static_cast<int>(std::min<uint64_t>(cap_bytes / unit, 1 << 24));
}

namespace {

// The least of every rank's units: every rank mirrors rank 0's slots.
int agreed_units(Exchange& ex, int32_t mine) {
  std::vector<int32_t> all(ex.size(), mine);
  if (ex.size() > 1) ex.all_gather(&mine, all.data(), sizeof mine);
  return *std::min_element(all.begin(), all.end());
}

// Each rank's yes (1) or no (0) for every item, and'ed over the ranks.
std::vector<uint8_t> on_every_rank(Exchange& ex, std::vector<uint8_t> mine) {
  if (ex.size() == 1 || mine.empty()) return mine;
  std::vector<uint8_t> all(mine.size() * ex.size());
  ex.all_gather(mine.data(), all.data(), mine.size());
  for (int r = 0; r < ex.size(); ++r)
    for (size_t i = 0; i < mine.size(); ++i) mine[i] &= all[r * mine.size() + i];
  return mine;
}

}  // namespace

PromptCache::PromptCache(const Model& m, Exchange& exchange, const PromptCacheOptions& o)
    : exchange_(exchange),
      started_(Clock::now()),
      kv_(m.config, m.shard, o.kv_type, o.full_blocks, o.sliding_blocks),
      disk_(std::make_unique<DiskTier>()) {
  const int units = agreed_units(exchange, tier_units(o.ram_bytes, o.kv_type, m.config, m.shard));
  tier_ = RamTier(KvPool::block_bytes(m.config, m.shard, o.kv_type, BlockKind::full),
                  KvPool::block_bytes(m.config, m.shard, o.kv_type, BlockKind::sliding), units * kTierFullPerSliding,
                  units);
  disk_asked_ = !o.dir.empty() && units > 0;
  if (disk_asked_) {
    const Shard& sh = m.shard;
    disk_ = std::make_unique<DiskTier>(
        o.dir, DiskIdentity{model_identity(m.file, m.weights_salt), o.kv_type, sh.ranks, sh.mode, sh.rank}, o.ram_bytes,
        tier_.block_bytes(BlockKind::full), tier_.block_bytes(BlockKind::sliding));
  }
}

std::vector<PromptCache::Loaded> PromptCache::load() {
  if (!disk_asked_) return {};
  std::vector<DiskTier::Block> blocks = exchange_.rank() == 0 ? disk_->blocks() : std::vector<DiskTier::Block>();
  exchange_.broadcast_vector(blocks, 0);
  const size_t n = blocks.size();
  std::vector<uint8_t> valid(n);
  for (size_t i = 0; i < n; ++i) valid[i] = disk_->has(blocks[i]);
  valid = on_every_rank(exchange_, std::move(valid));
  std::vector<int> slot(n, -1);
  int next[2] = {0, 0};
  for (size_t i = 0; i < n; ++i) {
    const BlockKind k = blocks[i].kind;
    if (valid[i] && next[int(k)] < tier_.slots(k)) slot[i] = next[int(k)]++;
  }
  std::vector<uint8_t> read(n);
  for (size_t i = 0; i < n; ++i) read[i] = slot[i] >= 0 && disk_->read(blocks[i], tier_.fill(blocks[i].kind, slot[i]));
  read = on_every_rank(exchange_, std::move(read));
  std::vector<Loaded> loaded;
  for (size_t i = n; i-- > 0;)  // oldest first: the newest end most recently used
    if (read[i]) loaded.push_back(Loaded{blocks[i].kind, slot[i], blocks[i].key});
  disk_->count_loaded(static_cast<int64_t>(loaded.size()), seconds_since(started_));
  return loaded;
}

void PromptCache::copy(std::span<const BlockCopy> copies) {
  tier_.apply(copies, kv_);
  if (!disk_->on()) return;
  for (const BlockCopy& c : copies)
    if (c.to_tier)
      disk_->write(DiskTier::Block{c.kind, c.key}, tier_.data(c.kind, c.slot));
    else
      disk_->touch(DiskTier::Block{c.kind, c.key});
}

void PromptCache::save(std::vector<BlockCopy> blocks) {
  if (!disk_asked_) return;
  exchange_.broadcast_vector(blocks, 0);
  std::vector<uint8_t> block(std::max(tier_.block_bytes(BlockKind::full), tier_.block_bytes(BlockKind::sliding)));
  for (const BlockCopy& c : blocks) {
    if (!disk_->on()) break;
    kv_.copy_out(c.kind, c.block, block.data());
    disk_->write(DiskTier::Block{c.kind, c.key}, block.data());
  }
  disk_->flush();
}

}  // namespace tps
