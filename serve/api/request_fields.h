// A request body's members read and checked: numbers in range, integers,
// booleans, fields the API defines that this server does not do (refused by
// name unless at their no-op value), the model's name. Each refusal is an
// ApiError 400 (404 for an unknown model) naming the parameter, before any
// work is queued. Shared by every endpoint's parser.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/http/api_error.h"

namespace tps {

inline ApiError bad_param(const std::string& param, const std::string& message) {
  return ApiError(400, message, param);
}

// Each reads body[key], named `param` in messages (default: the key):
// absent or null gives the fallback.
double number_field(const nlohmann::ordered_json& body, const std::string& key, double lo, double hi, double fallback,
                    const std::string& param = "");
int64_t integer_field(const nlohmann::ordered_json& body, const std::string& key, int64_t lo, int64_t hi,
                      int64_t fallback, const std::string& param = "");
bool boolean_field(const nlohmann::ordered_json& body, const std::string& key, bool fallback,
                   const std::string& param = "");

// A value as a message shows it: its JSON, cut short.
std::string shown(const nlohmann::ordered_json& v);

// A field of the API that would change the answer, which this server does
// not do: accepted only absent, null or at its no-op value, else refused by
// name with its value -- never taken and ignored.
void only_default(const nlohmann::ordered_json& body, const char* key, const nlohmann::ordered_json& noop,
                  const std::string& param = "");

// "model": absent, empty or the served model's id; else 404 model_not_found.
void check_model(const nlohmann::ordered_json& body, const std::string& model_id);

}  // namespace tps
