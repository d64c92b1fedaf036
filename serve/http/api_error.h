// An error an API request gets back: its HTTP status and the OpenAI error
// body ({"error": {"message", "type", "param", "code"}}), which the official
// clients read.
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
};

}  // namespace tps
