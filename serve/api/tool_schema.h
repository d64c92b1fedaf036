// OpenAI function tools as the harmony format gives them to gpt-oss: a
// TypeScript-like `functions` namespace in the developer message, rendered
// from each function's JSON schema as openai/harmony does (its
// json_schema_to_typescript): descriptions as // comments, optional
// properties with "?", enums as unions, arrays as T[], defaults as
// "// default:" comments, a function without parameters as `() => any`.
// Properties keep the request's order (an ordered_json body).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tps {

// The namespace's body for the request's `tools` ([{type: "function",
// function: {name, description?, parameters?}}]): one type per function,
// each followed by a blank line, in time and memory linear in what it
// writes. Throws ApiError (400, param "tools") for a tool that is not a
// function or has no name, and for a rendering past max_bytes (text that
// long cannot fit the context: ApiLimits::prompt_bytes).
std::string render_functions(const nlohmann::ordered_json& tools, size_t max_bytes);

}  // namespace tps
