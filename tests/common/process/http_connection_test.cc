// A connection's buffer as the pool thread splits it: the current request's body taken out,
// the head and the pipelined bytes kept. Over a socket pair, no server.
#include "common/process/http_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

// A connection on one end of a socket pair; the other end is `*peer`.
HttpConnection* Open(int* peer) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  *peer = fds[1];
  return new HttpConnection(fds[0]);
}

TEST(HttpConnectionTest, TakeBodyLeavesTheHeadAndThePipelinedBytes) {
  int peer;
  std::unique_ptr<HttpConnection> c(Open(&peer));
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  c->buf = head + "hello" + "GET /next HTTP/1.1\r\n";
  c->head_done = true;
  c->head.head_bytes = head.size();
  c->head.body = HttpHead::Body::kSized;
  c->head.content_length = 5;
  EXPECT_FALSE(c->BodyPending());
  EXPECT_EQ(c->TakeBody(), "hello");
  EXPECT_EQ(c->buf, head + "GET /next HTTP/1.1\r\n");
  close(peer);
}

TEST(HttpConnectionTest, ABodyIsPendingUntilAllOfItArrived) {
  int peer;
  std::unique_ptr<HttpConnection> c(Open(&peer));
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  c->buf = head + "hel";
  c->head_done = true;
  c->head.head_bytes = head.size();
  c->head.body = HttpHead::Body::kSized;
  c->head.content_length = 5;
  EXPECT_TRUE(c->BodyPending());
  c->buf += "lo";
  EXPECT_FALSE(c->BodyPending());
  // A chunked body is read by the pool thread: pending whatever the buffer holds.
  c->head.body = HttpHead::Body::kChunked;
  EXPECT_TRUE(c->BodyPending());
  c->head.body = HttpHead::Body::kNone;
  EXPECT_FALSE(c->BodyPending());
  close(peer);
}

TEST(HttpConnectionTest, DestroyingItClosesTheSocket) {
  int peer;
  delete Open(&peer);
  char byte;
  EXPECT_EQ(read(peer, &byte, 1), 0) << "the peer sees the end of the stream";
  close(peer);
}

}  // namespace
}  // namespace pagoda
