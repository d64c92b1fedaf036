// The server's connections: accepted, read and bounded here; cpp-httplib
// (Debian's 0.11.4) parses each request, routes it and writes the response.
// httplib's own connection loop is not used: it bounds each read but not a
// request (a client trickling a byte just inside the read timeout held a
// thread forever), drops the bytes it read past a request (a pipelined
// request was lost), bounds only bodies with a Content-Length, and lets idle
// and slow connections take every thread of its pool, /health's turn
// included. Here:
//   - a connection has a thread of its own, up to max_connections; at the
//     bound, a new connection takes the place of the one that has waited
//     longest for its next request, or else of the slowest to send one (for
//     over kSlowSeconds), so that slow or idle clients cannot keep /health
//     and /metrics from an answer while every request handler is busy; when
//     none is idle or slow (a burst), the newcomer gets 503;
//   - a request is read whole (serve/http/request_framing.h: head and body,
//     bounded) before any handler runs, within request_seconds and without a
//     silence over silence_seconds, or answered 408 and closed;
//   - the requests of a connection are answered in the order they came,
//     pipelined ones included; an idle connection is closed after
//     idle_seconds, an HTTP/1.0 one after its response;
//   - stop_serving() ends accepting whatever start-up was doing: its
//     thread checks the stop itself, with nothing to race.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/clock.h"

namespace tps {

struct ConnectionLimits {
  int max_connections = 256;
  size_t max_body_bytes = 8 << 20;
  double request_seconds = 30;  // to send a whole request, head and body
  double silence_seconds = 10;  // the longest pause within a request
  double idle_seconds = 5;      // between a connection's requests
  double write_seconds = 30;    // the longest a response's write may stall
};

class ConnectionServer : public httplib::Server {
 public:
  explicit ConnectionServer(const ConnectionLimits& limits);
  ~ConnectionServer() override;
  ConnectionServer(const ConnectionServer&) = delete;
  ConnectionServer& operator=(const ConnectionServer&) = delete;

  // Listens on host:port (0: a free port) and accepts on a thread of its
  // own; returns the port. Throws InputError naming --host (a name that
  // does not resolve) or --host and --port (cannot bind) and why.
  int start(const std::string& host, int port);
  // Stops accepting, closes the connections that wait for or send a
  // request, and returns once the requests being handled are answered.
  void stop_serving();

  // Whether the client of the request this thread handles has closed its
  // connection: a handler's way to stop work nobody will read.
  static bool client_gone();

 private:
  // A connection sending a request for this long may give its place.
  static constexpr double kSlowSeconds = 1;
  static constexpr int kRequestsPerConnection = 1000;

  enum class Phase { waiting, reading, handling };
  struct Connection {
    Phase phase = Phase::waiting;
    Clock::time_point since;
    bool served = false;   // waiting after a response: idle
    bool evicted = false;  // told to close, to make room
  };

  void accept_loop();
  void admit(int fd);
  bool evict_locked();
  void work();
  void serve(int fd);
  bool serve_request(int fd, std::string& buffer, bool last);
  bool enter(int fd, Phase phase);
  void forget(int fd);

  ConnectionLimits limits_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};

  std::mutex m_;
  std::condition_variable cv_;
  std::map<int, Connection> connections_;  // by socket, accepted and not yet closed
  int evicting_ = 0;                       // of them, told to close
  std::deque<int> pending_;                // accepted, for a thread to take
  std::vector<std::thread> threads_;
  int idle_threads_ = 0;
};

}  // namespace tps
