#include "serve/messages/generated_turns.h"

namespace tps {

size_t GeneratedTurns::bytes_of(const std::string& key, const std::vector<MessageIds>& messages) {
  size_t n = key.size();
  for (const MessageIds& m : messages) n += m.ids.size() * sizeof(int32_t);
  return n;
}

void GeneratedTurns::put(const std::string& key, std::vector<MessageIds> messages) {
  const size_t bytes = bytes_of(key, messages);
  if (bytes > max_bytes_) return;
  std::lock_guard<std::mutex> lock(m_);
  // The same content generated again (other ids, as sampling may give):
  // the latest ids, whose KV blocks are the likelier to be cached.
  if (const auto same = turns_.find(key); same != turns_.end()) {
    bytes_ += bytes - bytes_of(same->first, same->second);
    same->second = std::move(messages);
    return;
  }
  while (!order_.empty() && (turns_.size() >= max_turns_ || bytes_ + bytes > max_bytes_)) {
    const auto oldest = turns_.find(order_.front());
    bytes_ -= bytes_of(oldest->first, oldest->second);
    turns_.erase(oldest);
    order_.pop_front();
  }
  bytes_ += bytes;
  turns_.emplace(key, std::move(messages));
  order_.push_back(key);
}

std::optional<std::vector<MessageIds>> GeneratedTurns::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(m_);
  const auto it = turns_.find(key);
  if (it == turns_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> render_prompt(const MessagesRequest& r, const EncodeText& encode, const GeneratedTurns& turns,
                                   std::vector<int32_t>& tail) {
  RenderedConversation parts = render_parts(r.conversation, encode);
  std::vector<MessageIds> messages;
  size_t next = 0;
  for (const MessagesRequest::AssistantTurn& turn : r.assistant_turns) {
    messages.insert(messages.end(), parts.messages.begin() + next, parts.messages.begin() + turn.first);
    const std::optional<std::vector<MessageIds>> generated = turns.find(turn.key);
    const auto rendered_end = parts.messages.begin() + turn.end;
    if (generated)
      messages.insert(messages.end(), generated->begin(), generated->end());
    else
      messages.insert(messages.end(), parts.messages.begin() + turn.first, rendered_end);
    next = turn.end;
  }
  messages.insert(messages.end(), parts.messages.begin() + next, parts.messages.end());
  drop_earlier_reasoning(messages);
  tail = parts.tail;
  return join_prompt(parts.header, messages, parts.tail);
}

}  // namespace tps
