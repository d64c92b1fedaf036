// The chat API's answers, shaped as the OpenAI API returns them -- the
// mirror of chat_request.h: a chat.completion or text_completion body
// from a ChatText (serve/chat/chat_text.h), and for a stream its
// server-sent events (the role chunk first, a chunk per delta, the finish
// chunk, the usage chunk when asked, [DONE]). One place for the envelope
// (id, object, created, model, system_fingerprint) every body and chunk of
// a response shares.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/chat/chat_text.h"

namespace tps {

// usage: tokens of the prompt, of the completion, of the prompt taken from
// the prefix cache, and of the completion spent reasoning.
nlohmann::json usage_json(int prompt, int completion, int cached, int reasoning);

class ChatResponse {
 public:
  // chat: chat.completion(s); else text_completion. logprobs: the request
  // asked for them; include_usage: stream_options.include_usage.
  ChatResponse(std::string id, int64_t created, std::string model, bool chat, bool logprobs, bool include_usage);

  // The whole answer, not streamed.
  nlohmann::json body(const ChatText& text, const std::string& finish_reason, const nlohmann::json& usage) const;

  // A stream's events.
  std::string first_event() const;  // the assistant's role (a completion: empty text)
  std::string delta_events(const ChatText& text, const ChatText::Delta& d) const;
  std::string last_events(const std::string& finish_reason, const nlohmann::json& usage) const;

 private:
  nlohmann::json envelope(bool chunk) const;
  std::string chunk(const nlohmann::json& delta, const nlohmann::json& finish, const nlohmann::json& logprobs) const;

  std::string id_;
  int64_t created_;
  std::string model_;
  bool chat_, logprobs_, include_usage_;
};

}  // namespace tps
