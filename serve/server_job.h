// The server's private parts that its endpoints' files share: a Job (one
// request as its HTTP thread and the engine loop share it) and the helpers
// that answer in JSON and in server-sent events. Not for use outside serve/.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "serve/server.h"

namespace tps {

// What a streamed answer writes: the events before any token, those of each
// token, and the last ones once the job ended (job.error says whether it
// failed).
struct JobEvents {
  std::function<std::string()> opening;
  std::function<std::string(const Pick&)> token;
  std::function<std::string()> closing;
};

// One request as its HTTP thread and the engine loop share it.
struct Server::Job {
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

void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_ordered_json(httplib::Response& res, int status, const nlohmann::ordered_json& body);

}  // namespace tps
