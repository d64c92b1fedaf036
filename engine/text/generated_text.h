// One generated sequence as tpsrun follows it: its prompt, the tokens made so
// far, why it stopped, and the text it shows -- all of it, or with --chat the
// harmony final channel (and the analysis with --show-analysis), never half
// a UTF-8 character.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "engine/text/tokenizer.h"
#include "launch/run_options.h"

namespace tps {

// The prompt's tokens: the text as is (control tokens parsed), or rendered
// as a harmony chat with --chat.
std::vector<int32_t> encode_prompt(const RunOptions& options, const Tokenizer& tokenizer, const std::string& text);

class Sequence {
 public:
  Sequence(const RunOptions& options, std::vector<int32_t> prompt);

  // Takes a generated token; returns the text it adds to what is shown.
  // done() once it is a stop token or the -n limit is reached.
  std::string accept(int32_t id, const Tokenizer& tokenizer);
  // Ends the sequence early ("context full").
  void finish(const std::string& why) { stop_ = why; }
  // The text held back for a character not yet complete.
  std::string flush() { return text_.flush(); }

  const std::vector<int32_t>& prompt() const { return prompt_; }
  const std::vector<int32_t>& generated() const { return out_; }
  bool done() const { return !stop_.empty(); }
  const std::string& stop() const { return stop_; }

 private:
  const RunOptions& o_;
  std::vector<int32_t> prompt_, out_;
  std::string stop_;
  Utf8Stream text_;
  HarmonyStream harmony_;
};

}  // namespace tps
