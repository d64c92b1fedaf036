// One line on stderr per request a route answered, when it is over (a
// stream's when its last event is written or its client left), as
// llama-server and vLLM users expect to see what their clients send:
//
//   POST /v1/responses 200 (completed): prompt 8123 tokens (8096 cached), 42 generated,
//   first token 0.84 s, 3.10 s; "OpenAI/JS 7.57.0"
//
// The route is its counted label (never the client's bytes), the user agent
// is printable ASCII, cut to kMaxAgent bytes. The route wrapper
// (serve/http/route.h) opens a request's record and logs it; what ran on
// the engine for it (its tokens and times) is added by whoever queued the
// work, through current().
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/clock.h"

namespace tps {

// "0.84 s": a time as the log line says it.
std::string seconds_text(double seconds);

class RequestRecord {
 public:
  static constexpr size_t kMaxAgent = 200;

  RequestRecord(std::string route, const std::string& user_agent);
  // What the engine did for the request, asked when the line is written.
  void set_work(std::function<std::string()> describe) { work_ = std::move(describe); }
  // The answer goes on after the handler returns (a stream): finish() is
  // called when it ends, not the route wrapper.
  void defer() { deferred_ = true; }
  bool deferred() const { return deferred_; }
  Clock::time_point start() const { return start_; }
  // Writes the line (once).
  void finish(int status);

  // The record of the request this thread answers; null when requests are
  // not logged, or outside a route's handler.
  static std::shared_ptr<RequestRecord> current();

  // Makes a record current on this thread while it lives.
  class Scope {
   public:
    explicit Scope(std::shared_ptr<RequestRecord> record);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

 private:
  std::string route_, agent_;
  Clock::time_point start_;
  std::function<std::string()> work_;
  bool deferred_ = false, written_ = false;
};

}  // namespace tps
