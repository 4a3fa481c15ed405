#include "common/process/http_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace pagoda {

HttpConnection::~HttpConnection() {
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

bool HttpConnection::BodyPending() const {
  if (head.body == HttpHead::Body::kChunked) return true;
  return head.body == HttpHead::Body::kSized && buf.size() - head.head_bytes < head.content_length;
}

std::string HttpConnection::TakeBody() {
  const size_t head_end = head.head_bytes;
  const size_t end = head_end + static_cast<size_t>(head.content_length);
  std::string kept = buf.substr(0, head_end) + buf.substr(end);  // small: head, pipelined
  buf.resize(end);
  buf.erase(0, head_end);
  std::string body = std::move(buf);
  buf = std::move(kept);
  return body;
}

}  // namespace pagoda
