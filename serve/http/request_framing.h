// Where one HTTP/1.x request ends in the bytes a connection has sent, and
// the request as the HTTP library is then given it. The server reads whole
// requests before any handler runs (serve/http/connection_server.h), so this is
// where a request's size is bounded, whatever its framing:
//   - the head (request line and headers, up to the empty line) at most
//     kMaxHeadBytes: 431;
//   - a body of Content-Length bytes, or chunked (decoded here: the library
//     bounds only a Content-Length), at most max_body bytes: 413, decided
//     from the length before the body is sent where the length says so;
//   - a compressed body (Content-Encoding) is refused, 415: decompressed by
//     the library it would be bounded by nothing;
//   - a request both chunked and with a Content-Length, with Content-Lengths
//     that disagree, or another Transfer-Encoding, is refused (400): two
//     readers could frame it differently.
// The request handed on has a Content-Length body (a chunked one decoded)
// and no Expect header: the connection has answered "100 Continue" itself.
// Incremental: each feed() looks only at the bytes it has not seen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tps {

class RequestFramer {
 public:
  static constexpr size_t kMaxHeadBytes = 64 << 10;
  static constexpr size_t kMaxChunkLine = 1024;

  enum class State {
    incomplete,  // more bytes needed
    complete,    // request() is the request; it took size() bytes
    refused,     // answer status() with reason(), and close
  };

  explicit RequestFramer(size_t max_body) : max_body_(max_body) {}

  // `bytes`: what the connection has received since this request began;
  // each call passes the same bytes, grown.
  State feed(std::string_view bytes);

  // The head has been read and the client waits for "100 Continue" before
  // it sends the body.
  bool expects_continue() const { return expect_continue_ && state_ == State::incomplete && head_end_ > 0; }
  // HTTP/1.1 without "Connection: close" (HTTP/1.0 connections are not kept).
  bool keep_alive() const { return keep_alive_; }

  size_t size() const { return consumed_; }
  const std::string& request() const { return request_; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }

 private:
  State refuse(int status, std::string reason);
  State read_head(std::string_view bytes);
  State read_chunks(std::string_view bytes);
  State finish(std::string_view head, std::string_view body, size_t consumed);

  size_t max_body_;
  State state_ = State::incomplete;
  size_t scanned_ = 0;   // head: bytes searched for its end so far
  size_t head_end_ = 0;  // after the empty line; 0 while the head is incomplete
  size_t start_ = 0;     // empty lines before the request line, skipped
  std::string head_;     // the head to hand on: no Expect, Transfer-Encoding or Content-Length
  bool chunked_ = false, expect_continue_ = false, keep_alive_ = false;
  size_t length_ = 0;  // Content-Length
  size_t next_ = 0;    // chunked: where the next chunk-size line (or the trailers) begins
  bool trailers_ = false;
  std::string body_;  // chunked: decoded so far
  size_t consumed_ = 0;
  std::string request_;
  int status_ = 0;
  std::string reason_;
};

}  // namespace tps
