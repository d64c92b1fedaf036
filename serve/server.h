// The OpenAI-compatible HTTP server (rank 0): cpp-httplib threads take the
// requests, and each API's routes (serve/chat/, serve/responses/) check and
// render them and hand them to the engine loop (engine/sched/generator.h)
// through the job queue kept here; every rank runs the engine loop on the
// main thread, and tokens come back to each request's thread as they are
// chosen, which turns them into the answer or its stream of server-sent
// events.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions
// (serve/chat/chat_endpoint.h), the Responses API (POST /v1/responses; GET
// and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items:
// serve/responses/responses_endpoint.h), GET /v1/models, GET /health (503
// "loading" until the model is ready), GET /metrics (Prometheus), GET
// /v1/status (the web page's panel; both from serve/metrics.h's table), GET
// / (the web page). With API keys, /v1/* need one of them (serve/http/api_keys.h).
//
// Serving: a bounded queue (503 with Retry-After when full), a time limit
// per request, a client that goes away frees its sequence at the next step,
// and stop() lets what runs finish, then ends the engine loop on every rank.
// Connections are accepted, read and bounded by serve/http/connection_server.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/sched/generator.h"
#include "engine/text/tokenizer.h"
#include "serve/api/job.h"
#include "serve/http/api_keys.h"
#include "serve/http/route.h"
#include "serve/messages/generated_turns.h"
#include "serve/metrics.h"
#include "serve/responses/response_store.h"

namespace tps {

struct ServeOptions {
  // Each waiting request holds a connection and its thread.
  static constexpr int kMaxQueue = 4096;
  // Past this, a deadline's arithmetic is near overflow (1e30 s wrapped
  // around and ended every request at once, with nothing generated).
  static constexpr double kMaxRequestSeconds = 7 * 24 * 3600;

  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> api_keys;  // none: no authentication
  std::string api_keys_file;          // more keys, one a line (read by the command)
  int max_queue = 64;                 // requests waiting for a place (1..kMaxQueue); more get 503
  double request_seconds = 600;       // a request's time limit, queue included (0..kMaxRequestSeconds]
  size_t max_body_bytes = 8 << 20;
  // Open at once: the waiting and running requests', and room for /health,
  // /metrics and idle clients (serve/http/connection_server.h).
  int max_connections = 256;
  // The Responses API's stored responses (serve/responses/response_store.h): at most
  // this many, and this many MiB; past either the least recently used goes.
  static constexpr int kMaxResponses = 1 << 20;
  static constexpr int kMaxResponsesMib = 1 << 20;
  int responses_max = 1024;
  int responses_mib = 256;
  bool log_requests = true;  // a line on stderr per request (serve/http/request_log.h)
};

class ConnectionServer;

// Each API's routes submit their jobs to the Server (JobQueue,
// serve/api/job.h); the engine loop takes them between steps.
class Server : JobQueue {
 public:
  explicit Server(const ServeOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts listening (before the model is loaded: /health says so). Throws
  // Error naming the address when it cannot bind.
  void listen();
  // The model is ready: requests are served through this generator, which
  // the caller runs with events().
  void ready(Generator& generator, const Tokenizer& tokenizer, const ApiLimits& limits, nlohmann::json status);
  // The engine loop's side (the main thread of rank 0).
  Generator::Events events();
  // Stops taking requests and ends what waits or runs at the next step
  // (answered 503, a stream with an error event); then the engine loop ends.
  // Safe from a signal handler's flag poll (see request_stop). Destroying
  // the Server ends what has not ended (start-up that failed): waiting
  // requests are answered 503 and the connections closed.
  void request_stop() { state_.stopping = true; }
  int port() const { return port_; }

 private:
  void route();
  // JobQueue: into the inbox, bounded by --max-queue.
  std::shared_ptr<Job> submit(std::vector<int32_t> prompt, const GenerationRequest& r, const char* param) override;
  bool between_steps(bool idle);

  ServeOptions opt_;
  std::unique_ptr<ConnectionServer> http_;
  int port_ = 0;
  ServerState state_;
  ApiKeys keys_;
  Generator* gen_ = nullptr;
  ApiContext api_;         // what the APIs' routes are given; filled in by ready()
  nlohmann::json status_;  // what does not change: model, ranks
  Metrics metrics_;
  std::unique_ptr<Routes> routes_;
  ResponseStore responses_;
  GeneratedTurns messages_;  // the Messages API's turns, for its follow-ups' prompts

  std::mutex inbox_m_;
  std::condition_variable inbox_cv_;
  std::deque<std::shared_ptr<Job>> inbox_;
  bool closed_ = false;                       // under inbox_m_: the Server is being destroyed
  std::atomic<int> queued_{0};                // in the inbox or waiting for a place
  std::map<int, std::shared_ptr<Job>> live_;  // engine loop only: by sequence
};

}  // namespace tps
