// A generated sequence as its reader sees it: the tokens so far, why it
// stopped (as the caller says: the generator decides where a sequence ends,
// engine/sched/sequence_end.h), and the text it shows -- all of it, or of a
// harmony chat only the final channel (and the analysis when asked) -- never
// half a UTF-8 character.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/text/harmony.h"
#include "engine/text/tokenizer.h"

namespace tps {

struct TextOptions {
  bool harmony = false;        // show harmony channels, not raw text
  bool show_analysis = false;  // with harmony: the analysis channel too
};

class GeneratedText {
 public:
  explicit GeneratedText(const TextOptions& options);

  // Takes a generated token; returns the text it adds to what is shown (a
  // stop token shows nothing).
  std::string accept(int32_t id, const Tokenizer& tokenizer);
  // The sequence ended, and why ("length", "stop token", "interrupted", ...).
  void finish(const std::string& why) { stop_ = why; }
  // The text held back for a character not yet complete.
  std::string flush() { return text_.flush(); }

  const std::vector<int32_t>& generated() const { return out_; }
  bool done() const { return !stop_.empty(); }
  const std::string& stop() const { return stop_; }

 private:
  TextOptions o_;
  std::vector<int32_t> out_;
  std::string stop_;
  Utf8Stream text_;
  HarmonyStream harmony_;
};

}  // namespace tps
