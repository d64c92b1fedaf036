// An error an API request gets back: its HTTP status and its body in the
// shape its API's clients read -- OpenAI's ({"error": {"message", "type",
// "param", "code"}}) or Anthropic's ({"type": "error", "error": {"type",
// "message"}}, the type said by the status, as Anthropic's API and SDK do).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tps {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = "", std::string type = "invalid_request_error",
           std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type, param, code;

  nlohmann::json body() const {
    return {{"error",
             {{"message", what()},
              {"type", type},
              {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
              {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}}}};
  }

  // Anthropic's error types are one per status; the message names the parameter already.
  nlohmann::json anthropic_body() const {
    const char* kind = status == 400   ? "invalid_request_error"
                       : status == 401 ? "authentication_error"
                       : status == 403 ? "permission_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "overloaded_error"
                       : status < 500  ? "invalid_request_error"
                                       : "api_error";
    return {{"type", "error"}, {"error", {{"type", kind}, {"message", what()}}}};
  }
};

// Which of the two an API's routes answer with.
enum class ErrorShape { openai, anthropic };

inline nlohmann::json error_body(const ApiError& e, ErrorShape shape) {
  return shape == ErrorShape::anthropic ? e.anthropic_body() : e.body();
}

}  // namespace tps
