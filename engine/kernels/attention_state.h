// The state of decode attention's online softmax for a group of query heads
// over some positions (flash-decoding): per head the largest score seen,
// the sum of e^(score - that max), and the values weighted by
// e^(score - that max). A KernelSet's attend_run adds a run of positions to
// a state; a run of positions' states merge in position order, and a sink
// (spec §2.3: a logit that joins only the denominator) finishes one.
//
// States of chunks of a fixed number of positions, merged in chunk order,
// give the same bits whichever thread computed each chunk: what keeps
// attention split-invariant (engine/cache/kv_pool.h).
#pragma once

#include <cstdint>

namespace tps {

// A state's floats for `heads` heads of head_dim: max[heads], sum[heads],
// acc[heads][head_dim], in that order.
inline int64_t attention_state_floats(int heads, int head_dim) { return int64_t{heads} * (head_dim + 2); }

struct AttentionState {
  float* max;
  float* sum;
  float* acc;
};
// The state laid out in `floats` (attention_state_floats of them).
inline AttentionState attention_state(float* floats, int heads) {
  return {floats, floats + heads, floats + 2 * int64_t{heads}};
}

// A state of no positions: max -inf, sums 0.
void clear_attention_state(AttentionState s, int heads, int head_dim);

// into = the state of into's positions and then from's (from's max finite:
// of at least one position). Into a cleared state, from's bits.
void merge_attention_state(AttentionState from, AttentionState into, int heads, int head_dim);

// out[h][head_dim] = the attention of each head: its weighted values over
// the sum of its weights and e^(sink[h]).
void finish_attention(AttentionState s, const float* sinks, int heads, int head_dim, float* out);

}  // namespace tps
