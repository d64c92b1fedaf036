// A conversation as the token ids the model saw, message by message, so that
// a next turn's prompt can begin with exactly the ids of the turns before it
// (what the model generated stays as it generated it, never re-encoded from
// its text) and the paged KV cache's prefix keys find the blocks those ids
// left behind.
//
// A prompt is the header (the system message and, with instructions or
// functions, the developer message), the messages, and the tail
// "<|start|>assistant" that the model's first output message continues.
// Harmony's rule for earlier turns (spec §6.4, openai/harmony's
// auto_drop_analysis): analysis messages before the last final message are
// dropped; reasoning before a tool call is kept while the turn goes on.
// The Responses API keeps its stored conversations this way
// (serve/responses/); nothing here is the server's.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/text/harmony.h"

namespace tps {

// What harmony's rule needs to know of a message.
enum class MessageKind { other, analysis, final };

struct MessageIds {
  std::vector<int32_t> ids;  // from its <|start|> to its <|end|> or <|call|>
  MessageKind kind = MessageKind::other;
};

// The kind of a message as rendered or read from the model's output.
MessageKind message_kind(const HarmonyMessage& m);

// A conversation rendered and cut into its parts (render_conversation's ids,
// each message's ids separately; their concatenation is its rendering).
struct RenderedConversation {
  std::vector<int32_t> header;
  std::vector<MessageIds> messages;
  std::vector<int32_t> tail;  // <|start|>assistant
};
RenderedConversation render_parts(const Conversation& c, const EncodeText& encode_text);

// Drops the analysis messages that come before the last final message.
void drop_earlier_reasoning(std::vector<MessageIds>& messages);

// The model's output cut into messages for the next turn's prompt, token by
// token: the first continues the prompt's tail ("<|start|>assistant"), a
// <|return|> (or <|endoftext|>) becomes <|end|> as harmony stores history,
// <|call|> stays, and finish() closes an unfinished message with <|end|>.
// Every API that keeps a conversation's ids cuts its output here.
class OutputMessages {
 public:
  explicit OutputMessages(std::vector<int32_t> tail) : ids_(std::move(tail)) {}
  // A generated token and its text (the message's header is read from it).
  void push(int32_t id, const std::string& piece);
  const std::vector<MessageIds>& finish();
  const std::vector<MessageIds>& messages() const { return messages_; }

 private:
  void close(bool ended);
  HarmonyStream harmony_;
  std::vector<int32_t> ids_;  // the message being cut
  MessageKind kind_ = MessageKind::other;
  std::vector<MessageIds> messages_;
};

// header + each message + tail.
std::vector<int32_t> join_prompt(const std::vector<int32_t>& header, const std::vector<MessageIds>& messages,
                                 const std::vector<int32_t>& tail);

}  // namespace tps
