// The token ids of the assistant turns tps generated, found again by their
// content when a client sends the conversation back. The Messages API keeps
// no state (every request carries the whole conversation), and the text of
// an earlier turn, encoded again, is not always the ids the model generated
// (a tokenizer's encoding of a text is one of many): a follow-up whose
// assistant turns are rendered from here begins with exactly the ids of the
// turn before, so the prefix cache finds their KV blocks. Bounded (oldest
// first out); a turn not found is rendered from its text. Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/text/conversation_ids.h"
#include "serve/messages/messages_request.h"

namespace tps {

class GeneratedTurns {
 public:
  explicit GeneratedTurns(size_t max_turns = 4096, size_t max_bytes = size_t{64} << 20)
      : max_turns_(max_turns), max_bytes_(max_bytes) {}

  // key: assistant_turn_key of the turn as the response shows it.
  void put(const std::string& key, std::vector<MessageIds> messages);
  std::optional<std::vector<MessageIds>> find(const std::string& key) const;

 private:
  static size_t bytes_of(const std::string& key, const std::vector<MessageIds>& messages);
  const size_t max_turns_, max_bytes_;
  mutable std::mutex m_;
  std::map<std::string, std::vector<MessageIds>> turns_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

// A request's prompt: its conversation rendered, each earlier assistant turn
// tps generated as the ids it generated, harmony's rule for earlier
// reasoning applied. tail: its "<|start|>assistant", which the output continues.
std::vector<int32_t> render_prompt(const MessagesRequest& r, const EncodeText& encode, const GeneratedTurns& turns,
                                   std::vector<int32_t>& tail);

}  // namespace tps
