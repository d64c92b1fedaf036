// One all_gather carrying the values of many rows (the sampler's sequences):
// each row puts its values, and after run() reads every rank's copy of them.
// A row's values sit at the same offset on every rank, so the ranks must put
// the same sizes in the same order -- sizes that follow from what every rank
// knows (the rows' parameters, the ranks' shares), never from its own data.
// So a step of n sequences pays one round trip per round, not n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "runtime/exchange.h"

namespace tps {

class GatherRound {
 public:
  // Appends this rank's values; returns where they are, for all() and one().
  template <typename T>
  size_t put(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = mine_.size();
    mine_.resize(at + values.size_bytes());
    if (!values.empty()) std::memcpy(mine_.data() + at, values.data(), values.size_bytes());
    return at;
  }
  template <typename T>
  size_t put(const T& value) {
    return put(std::span<const T>(&value, 1));
  }

  bool empty() const { return mine_.empty(); }

  // Collective over ex: every rank with the same sizes put.
  void run(Exchange& ex) {
    ranks_ = ex.size();
    all_.resize(mine_.size() * ranks_);
    ex.all_gather(mine_.data(), all_.data(), mine_.size());
  }

  // Every rank's `count` values put at `at`, rank by rank.
  template <typename T>
  std::vector<T> all(size_t at, size_t count) const {
    std::vector<T> out(count * ranks_);
    for (int r = 0; r < ranks_; ++r)
      if (count) std::memcpy(out.data() + r * count, all_.data() + r * mine_.size() + at, count * sizeof(T));
    return out;
  }

 private:
  std::vector<uint8_t> mine_, all_;
  int ranks_ = 1;
};

}  // namespace tps
