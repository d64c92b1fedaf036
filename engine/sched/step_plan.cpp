#include "engine/sched/step_plan.h"

#include <cstring>
#include <type_traits>

#include "runtime/error.h"

namespace tps {

// The fixed-size parts first (a head of counts, then each array as it is),
// then each list: its count, then each sequence, its items' count and bytes.
std::vector<uint8_t> StepPlan::bytes() const {
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    if (n == 0) return;  // (an empty vector's data() may be null)
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  };
  const int32_t head[7] = {stop,
                           static_cast<int32_t>(batch.entries.size()),
                           static_cast<int32_t>(batch.tokens.size()),
                           static_cast<int32_t>(batch.blocks.size()),
                           static_cast<int32_t>(batch.copies.size()),
                           static_cast<int32_t>(joins.size()),
                           static_cast<int32_t>(leaves.size())};
  put(head, sizeof head);
  auto put_array = [&](const auto& v) { put(v.data(), v.size() * sizeof(v[0])); };
  put_array(batch.entries), put_array(batch.tokens), put_array(batch.blocks), put_array(batch.copies);
  put_array(joins), put_array(leaves);
  auto put_list = [&](const auto& list) {
    const uint64_t count = list.size();
    put(&count, sizeof count);
    for (const auto& [seq, items] : list) {
      const uint64_t n = items.size();
      put(&seq, sizeof seq), put(&n, sizeof n), put(items.data(), n * sizeof(items[0]));
    }
  };
  put_list(announces), put_list(forced);
  return out;
}

StepPlan StepPlan::parse(const std::vector<uint8_t>& in) {
  StepPlan p;
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    if (at + n > in.size()) throw Error("a step's plan arrived cut short");
    if (n) std::memcpy(dst, in.data() + at, n);  // (an empty vector's data() may be null)
    at += n;
  };
  int32_t head[7];
  take(head, sizeof head);
  p.stop = head[0];
  p.batch.entries.resize(head[1]), p.batch.tokens.resize(head[2]), p.batch.blocks.resize(head[3]);
  p.batch.copies.resize(head[4]), p.joins.resize(head[5]), p.leaves.resize(head[6]);
  auto take_array = [&](auto& v) { take(v.data(), v.size() * sizeof(v[0])); };
  take_array(p.batch.entries), take_array(p.batch.tokens), take_array(p.batch.blocks), take_array(p.batch.copies);
  take_array(p.joins), take_array(p.leaves);
  auto take_list = [&](auto& list) {
    uint64_t count = 0;
    take(&count, sizeof count);
    for (uint64_t i = 0; i < count; ++i) {
      int32_t seq = 0;
      uint64_t n = 0;
      take(&seq, sizeof seq), take(&n, sizeof n);
      auto& items = list.emplace_back(seq, typename std::decay_t<decltype(list)>::value_type::second_type()).second;
      if (n > (in.size() - at) / sizeof(items[0])) throw Error("a step's plan arrived cut short");
      items.resize(n);
      take(items.data(), n * sizeof(items[0]));
    }
  };
  take_list(p.announces), take_list(p.forced);
  return p;
}

void send_plan(Exchange& ex, const std::vector<uint8_t>& bytes, int to) {
  const uint64_t n = bytes.size();
  ex.send(&n, sizeof n, to);
  ex.send(bytes.data(), n, to);
}

std::vector<uint8_t> recv_plan(Exchange& ex, int from) {
  uint64_t n = 0;
  ex.recv(&n, sizeof n, from);
  std::vector<uint8_t> bytes(n);
  ex.recv(bytes.data(), n, from);
  return bytes;
}

void broadcast_plan(Exchange& ex, StepPlan& plan) {
  if (ex.size() == 1) return;
  std::vector<uint8_t> bytes = ex.rank() == 0 ? plan.bytes() : std::vector<uint8_t>();
  ex.broadcast_vector(bytes, 0);
  if (ex.rank() != 0) plan = StepPlan::parse(bytes);
}

}  // namespace tps
