// How every route of the server answers, whatever API it belongs to:
//   - in JSON (send_json), bytes that are not UTF-8 as U+FFFD;
//   - through answer(): the handler throws an ApiError for its status and
//     error body (OpenAI's, or Anthropic's for the Messages API) (503s say Retry-After: 1), anything else is a 500
//     "internal error"; a route that needs the model is refused 503 while
//     it loads, one that takes new work also while the server stops; and
//     the answer is counted under the route's label (request_counts.h)
//     and logged (request_log.h).
// An API registers its routes here (Routes::post, get, remove) and never
// writes this wrapper again. Routes that are not counted (/health, /metrics,
// /v1/status, the web page) go to httplib::Server directly.
#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "serve/http/api_error.h"
#include "serve/http/request_counts.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tps {

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_ordered_json(httplib::Response& res, int status, const nlohmann::ordered_json& body);

// Set by the server, read by every route's thread.
struct ServerState {
  std::atomic<bool> ready{false};     // the model is loaded
  std::atomic<bool> stopping{false};  // no new work is taken
};

// When a route may run.
enum class RouteNeeds {
  nothing,   // always (stored responses, ...)
  model,     // once the model is loaded: 503 "Loading model" before
  new_work,  // loaded and not stopping: 503 "the server is shutting down" after
};

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

class Routes {
 public:
  // All three outlive the Routes and the server's threads.
  // log_requests: one line on stderr per request (serve/http/request_log.h).
  Routes(httplib::Server& server, const ServerState& state, RequestCounts& counts, bool log_requests)
      : server_(server), state_(state), counts_(counts), log_(log_requests) {}

  // pattern: httplib's (a regex for a path with ids); label: the route as
  // counted ("/v1/responses/{id}").
  // shape: the error bodies' (the Messages API's are Anthropic's).
  void get(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle);
  void post(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle,
            ErrorShape shape = ErrorShape::openai);
  void remove(const std::string& pattern, const char* label, RouteNeeds needs, RouteHandler handle);

  // The wrapper itself.
  RouteHandler answer(const char* label, RouteNeeds needs, RouteHandler handle,
                      ErrorShape shape = ErrorShape::openai) const;

 private:
  httplib::Server& server_;
  const ServerState& state_;
  RequestCounts& counts_;
  bool log_;
};

}  // namespace tps
