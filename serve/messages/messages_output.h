// What a Messages API request's generated tokens say, as Anthropic's
// content blocks, built token by token: each harmony message of the output
// is one block -- the analysis channel a `thinking` block (with the
// signature a client hands back: serve/api/reasoning_blob.h), unless
// thinking is hidden; a message to functions.NAME a `tool_use` block (id
// "toolu_...", name, input: the arguments parsed); anything else the
// assistant says (final, commentary preambles, output that does not follow
// harmony) a `text` block, stop sequences ending it. Each token gives the
// stream events it causes (content_block_start, content_block_delta with a
// text_delta, thinking_delta, signature_delta or input_json_delta,
// content_block_stop), each an object whose "type" is its event's name.
// Text is never split inside a UTF-8 character. The output is also cut into
// messages of token ids for the next turn (OutputMessages).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/text/conversation_ids.h"
#include "engine/text/harmony.h"
#include "engine/text/tokenizer.h"
#include "serve/api/stop_strings.h"

namespace tps {

class MessagesOutput {
 public:
  // ids: what tool_use ids are made of; tail: the prompt's last ids, which
  // the first output message continues; stop: the stop sequences.
  MessagesOutput(const Tokenizer& tokenizer, std::string ids, std::vector<int32_t> tail, bool show_thinking,
                 std::vector<std::string> stop);

  // A generated token; the events it causes.
  std::vector<nlohmann::ordered_json> push(int32_t id);
  // The end; the events closing what was open.
  std::vector<nlohmann::ordered_json> finish();

  const nlohmann::ordered_json& content() const { return content_; }  // the blocks as they ended
  bool stopped() const { return stop_.stopped(); }                    // a stop sequence was found
  // end_turn, max_tokens (length: the job ran out of tokens), tool_use or stop_sequence.
  const char* stop_reason(bool length) const;
  nlohmann::ordered_json stop_sequence() const;  // the one found, or null
  // After finish(): the output's messages with their ids.
  const std::vector<MessageIds>& messages() const { return messages_.messages(); }

 private:
  enum class Type { text, thinking, tool_use };
  void open(Type type, const std::string& name, std::vector<nlohmann::ordered_json>& events);
  void add(const std::string& text, std::vector<nlohmann::ordered_json>& events);
  void close(std::vector<nlohmann::ordered_json>& events);

  const Tokenizer& tok_;
  std::string ids_;
  bool show_thinking_;
  StopStrings stop_;
  HarmonyStream harmony_;
  OutputMessages messages_;
  nlohmann::ordered_json content_ = nlohmann::ordered_json::array();
  // The block being written (hidden: a thinking block not shown).
  bool open_ = false, hidden_ = false;
  Type type_ = Type::text;
  nlohmann::ordered_json block_;
  std::string text_;
  Utf8Stream stream_;
  bool called_ = false;
};

}  // namespace tps
