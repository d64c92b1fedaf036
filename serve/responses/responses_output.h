// What a Responses API request's generated tokens say, as output items,
// built token by token: each harmony message of the output is one item --
// the analysis channel a `reasoning` item (its text as reasoning_text
// content, and as encrypted_content when asked), a message to
// functions.NAME a `function_call` (call_id, name, arguments), anything
// else the assistant says (final, commentary preambles, output that does
// not follow harmony) a `message` of output_text. Each token gives the
// stream events it causes (output_item added/done, content_part
// added/done, the text, reasoning and argument deltas and their .done),
// without sequence numbers: the stream numbers them. Text is never split
// inside a UTF-8 character.
//
// It also cuts the output's token ids into messages for the next turn
// (OutputMessages, engine/text/conversation_ids.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/text/conversation_ids.h"
#include "engine/text/harmony.h"
#include "engine/text/tokenizer.h"

namespace tps {

// Whether reasoning items also carry encrypted_content (serve/api/reasoning_blob.h),
// as a request's include: ["reasoning.encrypted_content"] asks.
enum class ReasoningItems { text, text_and_blob };

class ResponseOutput {
 public:
  // ids: what item ids and call ids are made of (unique per response);
  // tail: the prompt's last ids, which the first output message continues.
  ResponseOutput(const Tokenizer& tokenizer, std::string ids, std::vector<int32_t> tail, ReasoningItems reasoning);

  // A generated token; the events it causes.
  std::vector<nlohmann::ordered_json> push(int32_t id);
  // The end (incomplete: cut short by a limit); the events closing what was open.
  std::vector<nlohmann::ordered_json> finish(bool incomplete);

  const nlohmann::ordered_json& items() const { return items_; }  // each item as it ended
  std::string output_text() const;                                // every message's text
  int reasoning_tokens() const { return reasoning_tokens_; }
  bool called() const { return called_; }  // a function_call is among the items
  // After finish(): the output's messages with their ids.
  const std::vector<MessageIds>& messages() const { return messages_.messages(); }

 private:
  enum class Type { message, reasoning, function_call };
  // final: a message of the final channel (else a commentary preamble); name: a call's function.
  void open(Type type, const std::string& name, bool final, std::vector<nlohmann::ordered_json>& events);
  void add(const std::string& text, std::vector<nlohmann::ordered_json>& events);
  void close(const char* status, std::vector<nlohmann::ordered_json>& events);
  nlohmann::ordered_json part() const;

  const Tokenizer& tok_;
  std::string ids_;
  ReasoningItems reasoning_;
  HarmonyStream harmony_;
  nlohmann::ordered_json items_ = nlohmann::ordered_json::array();
  // The item being written.
  bool open_ = false;
  Type type_ = Type::message;
  nlohmann::ordered_json item_;
  std::string text_;
  Utf8Stream stream_;
  int reasoning_tokens_ = 0;
  bool called_ = false;
  OutputMessages messages_;  // the output cut into messages
};

}  // namespace tps
