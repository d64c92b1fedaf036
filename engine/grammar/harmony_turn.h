// gpt-oss's assistant turn in the harmony format (spec §5) as a grammar,
// so that a constraint holds the output's structure and never breaks it:
// the prompt ends with <|start|>assistant, and the turn is
//
//   [ <|channel|>analysis<|message|> any text <|end|><|start|>assistant ]
//   then one of
//   <|channel|>final<|message|> CONTENT <|return|>
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|> ARGUMENTS <|call|>
//
// CONTENT is the response format's JSON (a schema's, with whitespace
// around it) or any text; a tool call's ARGUMENTS are its parameters'
// JSON (strict tools) or any JSON object. Which answers are allowed follows
// tool_choice: none (final only), auto (final or a call), required (a call),
// a named function (a call of it). The analysis is free text -- the
// sampler closes it when the reasoning budget is spent (engine/sched).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/text/tokenizer.h"

namespace tps {

struct HarmonyTurn {
  bool analysis = true;              // an analysis message may come first
  bool final_answer = true;          // a final message may be the answer
  std::optional<int> final_content;  // its content's rule; none: any text
  struct Tool {
    std::string name;
    std::optional<int> arguments;  // their rule (strict); none: any JSON object
  };
  std::vector<Tool> tools;  // a call of one of these may be the answer
};

// Adds the turn's rules to g; returns the start rule. Throws InputError
// when the tokenizer lacks harmony's special tokens or the turn allows no
// answer.
int add_harmony_turn(Grammar& g, const Tokenizer& tokenizer, const HarmonyTurn& turn);

}  // namespace tps
