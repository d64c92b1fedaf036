#include "serve/http/route.h"

#include <httplib.h>

#include "runtime/error.h"
#include "runtime/json_text.h"
#include "serve/http/api_error.h"
#include "serve/http/request_log.h"

namespace tps {

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void send_ordered_json(httplib::Response& res, int status, const nlohmann::ordered_json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

RouteHandler Routes::answer(const char* label, RouteNeeds needs, RouteHandler handle, ErrorShape shape) const {
  return [this, label, needs, shape, handle = std::move(handle)](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<RequestRecord> record;
    if (log_) record = std::make_shared<RequestRecord>(cat(req.method, " ", label), req.get_header_value("User-Agent"));
    const RequestRecord::Scope scope(record);
    try {
      if (needs != RouteNeeds::nothing && !state_.ready) throw ApiError(503, "Loading model", "", "unavailable_error");
      if (needs == RouteNeeds::new_work && state_.stopping)
        throw ApiError(503, "the server is shutting down", "", "unavailable_error");
      handle(req, res);
    } catch (const ApiError& e) {
      if (e.status == 503) res.set_header("Retry-After", "1");
      send_json(res, e.status, error_body(e, shape));
    } catch (const std::exception& e) {
      send_json(res, 500, error_body(ApiError(500, cat("internal error: ", e.what()), "", "server_error"), shape));
    }
    counts_.add(label, res.status);
    if (record && !record->deferred()) record->finish(res.status);
  };
}

void Routes::get(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle) {
  server_.Get(pattern, answer(label, needs, std::move(handle)));
}

void Routes::post(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle,
                  ErrorShape shape) {
  server_.Post(pattern, answer(label, needs, std::move(handle), shape));
}

void Routes::remove(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle) {
  server_.Delete(pattern, answer(label, needs, std::move(handle)));
}

}  // namespace tps
