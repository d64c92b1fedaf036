#include "engine/step/session.h"

#include <algorithm>
#include <numeric>

#include "runtime/error.h"

namespace tps {

namespace {
ForwardOptions forward_options(const SessionOptions& o) {
  return ForwardOptions{.step_tokens = std::max(1, std::min(o.step_tokens, o.context)),
                        .context = o.context,
                        .yarn_truncate = o.yarn_truncate,
                        .kernels = o.kernels};
}
}  // namespace

Session::Session(const Model& m, const SessionOptions& o, ThreadPool& pool, Exchange& exchange)
    : opt_(o), pass_(m, forward_options(o), pool, exchange) {
  const int full = blocks_for(o.context);
  // A sliding layer needs the window behind the oldest token of a step.
  ring_ = std::min(full, blocks_for(static_cast<int>(m.config.sliding_window) + pass_.options().step_tokens) + 1);
  kv_ = KvPool(m.config, m.shard, o.kv_type, full, ring_);
  full_table_.resize(full);
  std::iota(full_table_.begin(), full_table_.end(), 0);
}

void Session::forward(std::span<const int32_t> tokens, bool all_logits, std::vector<float>& logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw InputError("no tokens to run (the prompt is empty)");
  if (pos_ + n > opt_.context)
    throw InputError(cat(pos_ + n, " tokens do not fit in the context of ", opt_.context,
                         " (use --ctx to make it larger, up to ", pass_.config().n_ctx_train, ")"));
  const int64_t rows = pass_.vocab_rows();
  logits.resize((all_logits ? n : 1) * static_cast<size_t>(rows));
  const int window = static_cast<int>(pass_.config().sliding_window);
  for (int done = 0; done < n;) {
    const int m = std::min(pass_.options().step_tokens, n - done);
    const bool last = done + m == n;
    // The sliding blocks this step's tokens see, by block number, in the ring.
    const int b0 = first_visible(pos_, window, true) / kKvBlock, b1 = (pos_ + m - 1) / kKvBlock;
    sliding_table_.clear();
    for (int b = b0; b <= b1; ++b) sliding_table_.push_back(b % ring_);
    batch_.clear();
    batch_.add(0, pos_, tokens.subspan(done, m),
               all_logits ? m
               : last     ? 1
                          : 0,
               std::span<const int32_t>(full_table_).first(b1 + 1), sliding_table_, b0);
    pass_.run(batch_, kv_, all_logits ? logits.data() + done * rows : logits.data());
    pos_ += m;
    done += m;
  }
}

}  // namespace tps
