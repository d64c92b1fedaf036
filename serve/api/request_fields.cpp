#include "serve/api/request_fields.h"

#include <cmath>

#include "runtime/error.h"
#include "runtime/json_text.h"

namespace tps {

using json = nlohmann::ordered_json;

double number_field(const json& body, const std::string& key, double lo, double hi, double fallback,
                    const std::string& param) {
  const std::string name = param.empty() ? key : param;
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number()) throw bad_param(name, "'" + name + "' must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad_param(name, cat("'", name, "' is ", v.dump(), ", expected ", lo, " to ", hi));
  return x;
}

int64_t integer_field(const json& body, const std::string& key, int64_t lo, int64_t hi, int64_t fallback,
                      const std::string& param) {
  const std::string name = param.empty() ? key : param;
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const json& v = body[key];
  if (!v.is_number_integer() && !v.is_number_unsigned()) throw bad_param(name, "'" + name + "' must be an integer");
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi) throw bad_param(name, cat("'", name, "' is ", v.dump(), ", expected ", lo, " to ", hi));
  return x;
}

bool boolean_field(const json& body, const std::string& key, bool fallback, const std::string& param) {
  const std::string name = param.empty() ? key : param;
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean()) throw bad_param(name, "'" + name + "' must be true or false");
  return body[key].get<bool>();
}

std::string shown(const json& v) {
  const std::string text = json_text(v);
  return text.size() <= 60 ? text : text.substr(0, 57) + "...";
}

void only_default(const json& body, const char* key, const json& noop, const std::string& param) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null() || *it == noop) return;
  const std::string name = param.empty() ? key : param;
  throw bad_param(name, cat("'", name, "' ", shown(*it), " is not supported by this server (only ", shown(noop), ")"));
}

void check_model(const json& body, const std::string& model_id) {
  if (!body.contains("model") || body["model"].is_null()) return;
  if (!body["model"].is_string()) throw bad_param("model", "'model' must be a string");
  const std::string model = body["model"].get<std::string>();
  if (!model.empty() && model != model_id)
    throw ApiError(404, "The model '" + model + "' does not exist; this server serves '" + model_id + "'", "model",
                   "invalid_request_error", "model_not_found");
}

}  // namespace tps
