// What every API's generation request shares, and how its body is read:
// the server's limits a request is checked against (ApiLimits), the body
// parsed with bounds (parse_request_body), text too long for the context
// refused before it is tokenized (check_prompt_bytes), and the fields every
// API's request comes to (GenerationRequest: streaming, sampling, length,
// stop strings, log-probabilities, the output constraint).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/step/sampler.h"
#include "serve/api/output_constraint.h"

namespace tps {

// What the server was started with that requests are checked against.
struct ApiLimits {
  std::string model_id;        // the one model served ("gpt-oss-20b", from the file name)
  int context = 4096;          // positions per sequence
  size_t longest_token = 128;  // bytes of the vocabulary's longest token (o200k's)
  // The final answer's content when a request asks for no format (serve's
  // --json-schema or --grammar); kind text: free.
  ContentSpec default_final = {};
  // Text longer than this cannot fit the context, however it tokenizes.
  size_t prompt_bytes() const { return static_cast<size_t>(context) * longest_token; }
};

// How deep and how large a request body may be, checked while it is parsed,
// before anything past a bound is built: every later step (rendering the
// tools, dumping arguments) recurses over what the parse built, and an
// ordered_json object finds a key by scanning its members (n members cost
// n^2: 40,000 took 5 s).
inline constexpr int kMaxBodyDepth = 64;
inline constexpr size_t kMaxBodyValues = size_t{1} << 18;
inline constexpr size_t kMaxObjectMembers = 256;

// The body as JSON (ordered: the tools' properties keep their order). Throws
// ApiError 400 for what is not JSON, nests deeper than kMaxBodyDepth, holds
// more than kMaxBodyValues values, an object of more than kMaxObjectMembers
// members or a number past a double's range.
nlohmann::ordered_json parse_request_body(std::string_view text);

// Text that cannot fit the context is refused before it is tokenized
// (which takes time linear in it; the context check after only counts):
// ApiError 400 context_length_exceeded naming `param`.
void check_prompt_bytes(size_t bytes, const ApiLimits& limits, const std::string& param);

// What every API's request comes to.
struct GenerationRequest {
  bool stream = false, include_usage = false;
  SamplerParams sampler;
  bool seed_given = false;
  int max_new_tokens = 0;  // max_tokens or max_completion_tokens; 0: until the context is full
  std::vector<std::string> stop;
  bool logprobs = false;
  int top_logprobs = 0;
  OutputConstraint output;  // response_format, strict tools, tool_choice
};

}  // namespace tps
