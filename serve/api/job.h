// One generation request as its HTTP thread and the engine loop share it
// (Job), how a streamed answer is written from it (JobEvents, Job::stream),
// and what an API's endpoints are given by the server to make one
// (ApiContext: the model's tokenizer and limits, the constraint cache, the
// queue to the engine loop). The queue and the engine loop's side are the
// server's (serve/server.h); an API only submits and reads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/sched/generator.h"
#include "runtime/clock.h"
#include "serve/api/generation_request.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace tps {

class ApiKeys;
class ConstraintCache;
class Tokenizer;

// What a streamed answer writes: the events before any token, those of each
// token, and the last ones once the job ended (job.error says whether it
// failed); while nothing comes, what keeps the connection alive (absent: an
// SSE comment; the Messages API sends its `ping` event).
struct JobEvents {
  std::function<std::string()> opening;
  std::function<std::string(const Pick&)> token;
  std::function<std::string()> closing;
  std::function<std::string()> idle = {};
};

struct Job {
  std::vector<int32_t> prompt;
  SequenceParams params;
  Clock::time_point deadline;
  // Engine loop -> HTTP thread, under m.
  std::mutex m;
  std::condition_variable cv;
  std::deque<Pick> picks;
  bool done = false;
  std::string finish;  // "stop", "length", "cancelled"
  int status = 200;    // the engine's refusal, with error
  std::string error;
  int reused = 0;
  int generated = 0;      // tokens, and when the first came (the request log's)
  int drafted_taken = 0;  // of those, drafted ones taken (--speculate)
  Clock::time_point first_token{};
  // HTTP thread -> engine loop.
  std::atomic<bool> cancelled{false};
  // Engine loop only.
  int seq = -1;
  bool started = false;

  void end(const std::string& why) {
    std::lock_guard<std::mutex> lock(m);
    done = true, finish = why;
    cv.notify_all();
  }
  void fail(int s, const std::string& e) {
    std::lock_guard<std::mutex> lock(m);
    done = true, status = s, error = e;
    cv.notify_all();
  }
  // For the request log (serve/http/request_log.h): " (stop): prompt P
  // tokens (C cached), G generated (D drafted), first token T s" (T since
  // `since`; "(D drafted)" when speculation took some).
  std::string describe(Clock::time_point since);
  // Waits for tokens or the end, up to `seconds`; takes what came.
  std::deque<Pick> take(double seconds, bool& finished) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done || !picks.empty(); });
    std::deque<Pick> out;
    out.swap(picks);
    finished = done;
    return out;
  }
  // Waits for the whole answer, giving each token to on_token; a client
  // that went away ends its sequence at the next step. Throws the engine's
  // refusal.
  void collect(const std::function<void(const Pick&)>& on_token);
  // Answers with the job's server-sent events as they come, a keep-alive
  // comment while none does; a client that went away ends its sequence.
  // HTTP/1.0 has no chunked encoding: its stream goes without one, and the
  // connection closes after it (an HTTP/1.0 connection is never kept).
  static void stream(std::shared_ptr<Job> job, httplib::Response& res, bool http10, JobEvents events);
};

// The queue to the engine loop, as an API sees it (the server's: serve/server.h).
class JobQueue {
 public:
  // Queues a prompt (param: the request parameter a prompt too long is
  // refused by). Throws ApiError: the prompt does not fit the context, the
  // queue is full, the server is shutting down.
  virtual std::shared_ptr<Job> submit(std::vector<int32_t> prompt, const GenerationRequest& r, const char* param) = 0;

 protected:
  ~JobQueue() = default;
};

// What an API's endpoints are given by the server. The server fills it in
// when the model is ready; routes that generate run only after that
// (RouteNeeds::new_work, serve/http/route.h), so they find it whole.
struct ApiContext {
  const Tokenizer* tokenizer = nullptr;
  ConstraintCache* constraints =
      nullptr;  // a request's constraint is compiled on its own thread, not on the engine loop
  ApiLimits limits;
  JobQueue* jobs = nullptr;
  const ApiKeys* keys = nullptr;  // whose a request's stored things are
};

}  // namespace tps
