// What a message of the model's output is to an API, read from its harmony
// header -- one reading, so that every API (serve/chat, serve/responses,
// the next) shows the same output the same way: a call (any recipient but
// "assistant"; `function` is the recipient without "functions."), reasoning
// (the analysis channel), the final answer (the final channel), or other
// text the assistant says (commentary preambles). Apart from harmony.h,
// which the engine includes everywhere: only what shows output needs it.
#pragma once

#include <string>

#include "engine/text/harmony.h"

namespace tps {

struct HarmonyItem {
  enum class Kind { call, reasoning, final, text } kind;
  std::string function;  // call: the function's name
};

HarmonyItem classify(const HarmonyStream::Header& header);

}  // namespace tps
