#include "serve/http/connection_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "runtime/error.h"
#include "serve/http/api_error.h"
#include "serve/http/request_framing.h"

// This file, and no other, leans on two protected members of
// httplib::Server, as cpp-httplib 0.11.4 (Debian 12's libcpp-httplib-dev)
// declares them: process_request(), which parses one request from a stream,
// routes it and writes the response -- the part of httplib this server
// keeps while it reads connections itself (connection_server.h says why) --
// and svr_sock_, the listening socket, which httplib checks to go on writing
// a streamed response (an invalid one ends every stream). No public API
// offers either. tests/connection_server_test.cpp fails to compile if an
// upgrade changes their types, and fails if a stream no longer runs while
// svr_sock_ is set; on such an upgrade, re-read both uses below.
namespace tps {

namespace {

// The socket of the request this thread handles (client_gone).
thread_local int handled_socket = -1;

int milliseconds(double seconds) { return static_cast<int>(std::clamp(seconds * 1000, 0.0, 1e9)); }

Clock::duration span(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool wait_for(int fd, short events, double seconds) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, milliseconds(seconds)) > 0 && (p.revents & events);
}

// Sends all of `data`, none of it stalling more than `seconds`.
bool send_all(int fd, std::string_view data, double seconds) {
  while (!data.empty()) {
    if (!wait_for(fd, POLLOUT, seconds)) return false;
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (n > 0) data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

enum class Read { data, closed, timeout };

// Appends what the client sends next, waiting up to `silence` seconds and
// not past `deadline`.
Read read_some(int fd, std::string& buffer, Clock::time_point deadline, double silence) {
  const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  if (!wait_for(fd, POLLIN, std::min(left, silence))) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 ? Read::closed : Read::timeout;  // POLLHUP/POLLERR: gone
  }
  char chunk[16384];
  const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n <= 0) return n < 0 && errno == EINTR ? Read::data : Read::closed;
  buffer.append(chunk, static_cast<size_t>(n));
  return Read::data;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    default: return "Service Unavailable";
  }
}

// A refusal before any handler ran: an OpenAI error body, then the
// connection closes (what the client sent after cannot be framed).
std::string refusal(int status, const std::string& message) {
  const std::string body =
      ApiError(status, message, "", status == 503 ? "unavailable_error" : "invalid_request_error").body().dump();
  return cat("HTTP/1.1 ", status, " ", reason_phrase(status),
             "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n",
             status == 503 ? "Retry-After: 1\r\n" : "", "\r\n", body);
}

// Closes after the client has read what was sent: a close with unread bytes
// from the client resets the connection, and a reset may discard the
// response before the client reads it. Waits a second at most.
void close_lingering(int fd) {
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point until = Clock::now() + span(1);
  std::string discard;
  while (read_some(fd, discard, until, 1) == Read::data && discard.size() < (1 << 20)) discard.clear();
  ::close(fd);
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if ((peer ? ::getpeername : ::getsockname)(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, service, sizeof service,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    ip = host, port = std::atoi(service);
}

// What httplib reads one request from (the whole of it, in memory) and
// writes the response to (the socket).
class RequestStream : public httplib::Stream {
 public:
  RequestStream(std::string_view request, int fd, double write_seconds)
      : request_(request), fd_(fd), write_seconds_(write_seconds) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_seconds_); }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size());
    std::memcpy(ptr, request_.data(), n);
    request_.remove_prefix(n);
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    return send_all(fd_, std::string_view(ptr, size), write_seconds_) ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  // httplib asks for the socket only to refuse one past FD_SETSIZE, which
  // its select() cannot watch; this stream is never select()ed.
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string_view request_;
  int fd_;
  double write_seconds_;
};

}  // namespace

ConnectionServer::ConnectionServer(const ConnectionLimits& limits) : limits_(limits) {
  // What httplib's Keep-Alive header says.
  set_keep_alive_timeout(static_cast<time_t>(limits.idle_seconds));
  set_keep_alive_max_count(kRequestsPerConnection);
}

ConnectionServer::~ConnectionServer() { stop_serving(); }

int ConnectionServer::start(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC, hints.ai_socktype = SOCK_STREAM, hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw InputError(cat("--host ", host, ": the host name does not resolve (",
                         rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc), ")"));
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
  int error = 0;
  for (const addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    // SO_REUSEADDR, not SO_REUSEPORT: a restart takes the port at once, a
    // second server on it is refused.
    const int yes = 1;
    if (fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) == 0 &&
        ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      error = errno;
      if (fd >= 0) ::close(fd);
    }
  }
  if (listen_fd_ < 0)
    throw InputError(cat("--host ", host, " --port ", port, ": cannot listen there (", std::strerror(error), ")"));
  svr_sock_ = listen_fd_;  // protected (see the top): httplib ends a streamed response when this is invalid
  std::string ip;
  int bound = port;
  address_of(listen_fd_, false, ip, bound);
  acceptor_ = std::thread([this] { accept_loop(); });
  return bound;
}

void ConnectionServer::stop_serving() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);  // wakes the acceptor's poll at once
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(m_);
    for (auto& [fd, c] : connections_)
      if (c.phase != Phase::handling) ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  svr_sock_ = INVALID_SOCKET;
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool ConnectionServer::client_gone() {
  if (handled_socket < 0) return false;
  pollfd p{handled_socket, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void ConnectionServer::accept_loop() {
  while (!stopping_) {  // checked every 100 ms: a stop at any moment is seen
    if (!wait_for(listen_fd_, POLLIN, 0.1)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd);
    } else if (errno == EMFILE || errno == ENFILE) {  // out of descriptors: make room; the backlog waits
      {
        std::lock_guard<std::mutex> lock(m_);
        evict_locked();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void ConnectionServer::admit(int fd) {
  std::unique_lock<std::mutex> lock(m_);
  if (static_cast<int>(connections_.size()) - evicting_ >= limits_.max_connections && !evict_locked()) {
    lock.unlock();  // every connection has a request in hand
    const std::string text = refusal(503, cat("the server has ", limits_.max_connections, " connections; try again"));
    (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    return;
  }
  connections_[fd] = Connection{Phase::waiting, Clock::now()};
  pending_.push_back(fd);
  if (pending_.size() > static_cast<size_t>(idle_threads_) &&
      threads_.size() < static_cast<size_t>(limits_.max_connections))
    threads_.emplace_back([this] { work(); });
  cv_.notify_one();
}

// Makes room: the connection that has waited longest for its next request,
// or else the one that has been sending a request (or nothing) the longest,
// for over kSlowSeconds, is told to close. A new connection whose request
// has not come yet is left alone: in a burst, it is the newcomer that waits.
bool ConnectionServer::evict_locked() {
  const Clock::time_point slow = Clock::now() - span(kSlowSeconds);
  auto victim = connections_.end();
  auto order = [](const Connection& c) { return std::pair(!c.served, c.since); };  // idle first, then oldest
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    const Connection& c = it->second;
    const bool idle = c.phase == Phase::waiting && c.served;
    if (c.evicted || c.phase == Phase::handling || (!idle && c.since > slow)) continue;
    if (victim == connections_.end() || order(c) < order(victim->second)) victim = it;
  }
  if (victim == connections_.end()) return false;
  victim->second.evicted = true, ++evicting_;
  ::shutdown(victim->first, SHUT_RDWR);  // its thread reads the end
  return true;
}

void ConnectionServer::work() {
  std::unique_lock<std::mutex> lock(m_);
  while (true) {
    ++idle_threads_;
    cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    --idle_threads_;
    if (pending_.empty()) return;
    const int fd = pending_.front();
    pending_.pop_front();
    lock.unlock();
    serve(fd);
    lock.lock();
  }
}

bool ConnectionServer::enter(int fd, Phase phase) {
  std::lock_guard<std::mutex> lock(m_);
  Connection& c = connections_.at(fd);
  if (c.evicted || (stopping_ && phase == Phase::waiting)) return false;
  c.served |= c.phase == Phase::handling;
  c.phase = phase, c.since = Clock::now();
  return true;
}

void ConnectionServer::forget(int fd) {
  {
    std::lock_guard<std::mutex> lock(m_);
    const auto it = connections_.find(fd);
    if (it->second.evicted) --evicting_;
    connections_.erase(it);
  }
  close_lingering(fd);  // the descriptor's number is free again only now, out of the registry
}

void ConnectionServer::serve(int fd) {
  handled_socket = fd;
  std::string buffer;  // what the client sent that no request has taken yet
  for (int served = 0; enter(fd, Phase::waiting); ++served) {
    const Clock::time_point idle_until = Clock::now() + span(limits_.idle_seconds);
    if (buffer.empty() && read_some(fd, buffer, idle_until, limits_.idle_seconds) != Read::data) break;
    if (!enter(fd, Phase::reading) || !serve_request(fd, buffer, served + 1 == kRequestsPerConnection)) break;
  }
  handled_socket = -1;
  forget(fd);
}

// Reads one request whole and has httplib answer it (`last`: then close).
// Returns whether the connection goes on to the next request.
bool ConnectionServer::serve_request(int fd, std::string& buffer, bool last) {
  RequestFramer framer(limits_.max_body_bytes);
  const Clock::time_point deadline = Clock::now() + span(limits_.request_seconds);
  bool continued = false;
  RequestFramer::State state;
  while ((state = framer.feed(buffer)) == RequestFramer::State::incomplete) {
    if (framer.expects_continue() && !continued)
      continued = send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", limits_.write_seconds);
    const Read r = read_some(fd, buffer, deadline, limits_.silence_seconds);
    if (r == Read::closed) return false;
    if (r == Read::timeout) {
      send_all(fd,
               refusal(408, cat("the request did not arrive within ", limits_.request_seconds, " s (or paused over ",
                                limits_.silence_seconds, " s)")),
               limits_.write_seconds);
      return false;
    }
  }
  if (state == RequestFramer::State::refused) {
    send_all(fd, refusal(framer.status(), framer.reason()), limits_.write_seconds);
    return false;
  }
  if (!enter(fd, Phase::handling)) return false;
  RequestStream stream(framer.request(), fd, limits_.write_seconds);
  last = last || !framer.keep_alive() || stopping_;
  bool closed = false;
  const bool answered = process_request(stream, last, closed, nullptr);  // protected (see the top)
  buffer.erase(0, framer.size());
  return answered && !closed && !last;
}

}  // namespace tps
