// Why the generator ended a sequence. It ends one itself -- at a stop
// token, at its max_new_tokens, when the context is full -- so that no
// front end has to count tokens or know the stop tokens, and no sequence
// runs past the KV blocks the scheduler promised it. Front ends end a
// sequence only for their own reasons (a stop string, a client gone, a
// deadline) and name those themselves.
#pragma once

#include <cstdint>
#include <span>

namespace tps {

enum class SequenceEnd : uint8_t {
  none,     // it goes on
  stop,     // it drew one of its stop tokens
  length,   // it generated its max_new_tokens
  context,  // no position is left for its next token
  // Its constraint gave up: a token's mask needed more work than a matcher
  // may take (engine/grammar/matcher.h). No token comes with this end.
  constraint,
};

// "stop token", "length", "context full", "constraint too costly" (the
// words tpsrun and chat report; the server says the API's finish_reason),
// or "none".
const char* sequence_end_name(SequenceEnd end);

// Why a sequence ends with the token it just drew, its generated-th (from
// 1), in that order of precedence; none when it goes on.
SequenceEnd sequence_end(int32_t token, std::span<const int32_t> stop_tokens, int generated, int max_new_tokens,
                         bool context_full);

}  // namespace tps
