// Where a request ends, and what it is bounded by: heads, Content-Length
// and chunked bodies, pipelined requests, compressed and ambiguous framing.
#include <gtest/gtest.h>

#include <string>

#include "serve/http/request_framing.h"

namespace tps {
namespace {

using State = RequestFramer::State;

// Feeds `bytes` one at a time (as a trickling client sends them); returns
// the state after the last.
State feed_bytewise(RequestFramer& f, const std::string& bytes) {
  State s = State::incomplete;
  for (size_t n = 1; n <= bytes.size() && s == State::incomplete; ++n) s = f.feed(std::string_view(bytes).substr(0, n));
  return s;
}

TEST(RequestFraming, AContentLengthBodyEndsTheRequestAndTheNextOneIsLeft) {
  const std::string first = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  const std::string second = "GET /health HTTP/1.1\r\n\r\n";
  RequestFramer f(100);
  ASSERT_EQ(f.feed(first + second), State::complete);
  EXPECT_EQ(f.size(), first.size());
  EXPECT_EQ(f.request(), first);
  EXPECT_TRUE(f.keep_alive());
  RequestFramer g(100);
  ASSERT_EQ(g.feed((first + second).substr(f.size())), State::complete);
  EXPECT_EQ(g.request(), second);
}

TEST(RequestFraming, ByteByByteItIsTheSameRequest) {
  const std::string chunked =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  RequestFramer whole(100), trickled(100);
  ASSERT_EQ(whole.feed(chunked), State::complete);
  ASSERT_EQ(feed_bytewise(trickled, chunked), State::complete);
  EXPECT_EQ(trickled.request(), whole.request());
  EXPECT_EQ(trickled.size(), chunked.size());
}

// The library bounds only a Content-Length: a chunked body was unbounded.
TEST(RequestFraming, AChunkedBodyIsDecodedAndBoundedLikeAnyOther) {
  RequestFramer f(11);
  ASSERT_EQ(f.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\n\r\n5\r\nhello\r\n"
                   "6\r\n world\r\n0\r\nTrailer: t\r\n\r\n"),
            State::complete);
  EXPECT_EQ(f.request(), "POST /x HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world");
  RequestFramer over(10);
  EXPECT_EQ(over.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n"), State::refused);
  EXPECT_EQ(over.status(), 413);
  RequestFramer huge(10);  // a size past 2^64 is no wrap-around
  EXPECT_EQ(huge.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000001\r\n"), State::refused);
  EXPECT_EQ(huge.status(), 413);
  // Framing without a body: 1-byte chunks under long extensions.
  RequestFramer framing(1000);
  std::string slow = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  while (slow.size() < 200000) slow += "1;" + std::string(1000, 'e') + "\r\nx\r\n";
  EXPECT_EQ(framing.feed(slow), State::refused);
  EXPECT_EQ(framing.status(), 413);
}

TEST(RequestFraming, ALengthPastTheBoundIsRefusedBeforeTheBodyIsSent) {
  RequestFramer f(1000);
  EXPECT_EQ(f.feed("POST /x HTTP/1.1\r\nContent-Length: 104857600\r\nExpect: 100-continue\r\n\r\n"), State::refused);
  EXPECT_EQ(f.status(), 413);
  RequestFramer g(1000);
  EXPECT_EQ(g.feed("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n"), State::refused);
  EXPECT_EQ(g.status(), 413);
  RequestFramer waits(1000);  // within the bound: the client is told to go on
  EXPECT_EQ(waits.feed("POST /x HTTP/1.1\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n"), State::incomplete);
  EXPECT_TRUE(waits.expects_continue());
}

TEST(RequestFraming, AHeadPastTheBoundIsRefusedWithoutItsEnd) {
  RequestFramer f(1000);
  std::string head = "GET / HTTP/1.1\r\n";
  while (head.size() <= RequestFramer::kMaxHeadBytes) head += "X-Filler: 0123456789\r\n";
  EXPECT_EQ(f.feed(head), State::refused);
  EXPECT_EQ(f.status(), 431);
  RequestFramer blank(1000);  // empty lines before a request line count too
  EXPECT_EQ(blank.feed(std::string(RequestFramer::kMaxHeadBytes + 2, '\n')), State::refused);
}

// Decompressed by the library, a body would be bounded by nothing.
TEST(RequestFraming, ACompressedBodyIsRefused) {
  RequestFramer f(1000);
  EXPECT_EQ(f.feed("POST /x HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"), State::refused);
  EXPECT_EQ(f.status(), 415);
  EXPECT_NE(f.reason().find("gzip"), std::string::npos);
  RequestFramer identity(1000);
  EXPECT_EQ(identity.feed("POST /x HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 0\r\n\r\n"),
            State::complete);
}

// Framing two readers could read differently is refused.
TEST(RequestFraming, AmbiguousFramingIsRefused) {
  for (const char* head :
       {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n", "POST /x HTTP/1.1\r\nContent-Length : 3\r\n\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "POST /x HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n"}) {
    RequestFramer f(1000);
    EXPECT_EQ(f.feed(head), State::refused) << head;
    EXPECT_EQ(f.status(), 400) << head;
  }
}

// A head whose lines end in a bare LF is refused as soon as one does (it
// waited for the read timeout: such a client never sends the CRLF), byte
// by byte too; empty lines before the request line may be bare.
TEST(RequestFraming, ABareLineFeedIsRefusedAtOnce) {
  for (const char* head : {"GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/1.1\r\nHost: x\n\r\n"}) {
    RequestFramer whole(100), trickled(100);
    EXPECT_EQ(whole.feed(head), State::refused) << head;
    EXPECT_EQ(whole.status(), 400);
    EXPECT_EQ(feed_bytewise(trickled, head), State::refused) << head;
  }
  RequestFramer partial(100);
  EXPECT_EQ(partial.feed("GET / HTTP/1.1\n"), State::refused);  // before the head could end
  RequestFramer body(100);
  EXPECT_EQ(body.feed("\nPOST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n\n\n"), State::complete);
}

TEST(RequestFraming, HttpOneZeroAndConnectionCloseAreNotKept) {
  RequestFramer old(100), closing(100), kept(100);
  ASSERT_EQ(old.feed("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), State::complete);
  EXPECT_FALSE(old.keep_alive());
  ASSERT_EQ(closing.feed("GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n"), State::complete);
  EXPECT_FALSE(closing.keep_alive());
  ASSERT_EQ(kept.feed("\r\nGET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"), State::complete);
  EXPECT_TRUE(kept.keep_alive());
  EXPECT_EQ(kept.request(), "GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n");
}

}  // namespace
}  // namespace tps
