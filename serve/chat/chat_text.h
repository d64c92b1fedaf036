// What a request's generated tokens say, as the API returns it, built token
// by token: for a chat, harmony's channels -- analysis as reasoning
// (`reasoning_content`, as llama-server and vLLM name it for gpt-oss), the
// final channel and commentary preambles as `content`, a message to
// functions.NAME as a tool call with its arguments -- and for a completion
// the raw text. Text is never split inside a UTF-8 character; stop strings
// end the content before them (and are held back while they may be
// starting); each step's delta is what a stream sends. Output that does not
// follow harmony is content (HarmonyStream's raw text).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/sched/pick.h"
#include "engine/text/harmony.h"
#include "engine/text/tokenizer.h"
#include "serve/api/stop_strings.h"

namespace tps {

class ChatText {
 public:
  struct ToolCall {
    std::string id, name, arguments;
  };
  // What one token added.
  struct Delta {
    std::string reasoning, content;
    int tool_call = -1;  // index of a tool call that started or grew
    bool tool_call_started = false;
    std::string arguments;                              // the arguments it added
    nlohmann::json logprobs = nlohmann::json::array();  // entries for its content tokens
    bool empty() const { return reasoning.empty() && content.empty() && tool_call < 0 && logprobs.empty(); }
  };

  // chat: harmony channels, else raw text. top_logprobs: < 0 none.
  ChatText(const Tokenizer& tokenizer, bool chat, std::vector<std::string> stop, int top_logprobs,
           std::string call_id_prefix);

  // Takes a generated token (with its log-probabilities when asked).
  Delta push(const Pick& pick);
  // The end: what was held back.
  Delta finish();
  // A stop string was found: the content is complete.
  bool stopped() const { return stop_.stopped(); }

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }
  nlohmann::json logprobs() const { return logprobs_; }
  int reasoning_tokens() const { return reasoning_tokens_; }

 private:
  void add_content(const std::string& text, Delta& d);
  nlohmann::json logprob_entry(const Pick& pick) const;

  const Tokenizer& tok_;
  bool chat_;
  StopStrings stop_;
  int top_logprobs_;
  std::string call_id_prefix_;
  HarmonyStream harmony_;
  Utf8Stream reasoning_stream_, content_stream_, args_stream_;
  std::string reasoning_, content_;
  std::vector<ToolCall> calls_;
  bool in_call_ = false;
  int reasoning_tokens_ = 0;
  nlohmann::json logprobs_ = nlohmann::json::array();
};

}  // namespace tps
