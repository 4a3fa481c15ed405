#include "common/process/http_request_stream.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/time/clock.h"

namespace pagoda {
namespace {

void IpAndPort(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

}  // namespace

bool WaitFor(int fd, short events, absl::Duration timeout) {
  pollfd p{fd, events, 0};
  const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout));
  int r;
  do {
    r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
  } while (r < 0 && errno == EINTR);
  return r == 1;
}

HttpRequestStream::HttpRequestStream(int fd, const std::string& buf, size_t limit,
                                     uint64_t max_socket_bytes, absl::Time deadline,
                                     absl::Duration write_timeout)
    : fd_(fd),
      buf_(buf),
      limit_(std::min(limit, buf.size())),
      chunked_(limit == std::string::npos),
      max_socket_bytes_(max_socket_bytes),
      deadline_(deadline),
      write_timeout_(write_timeout) {}

bool HttpRequestStream::is_readable() const {
  return pos_ < limit_ || (chunked_ && WaitFor(fd_, POLLIN, deadline_ - absl::Now()));
}

bool HttpRequestStream::is_writable() const { return WaitFor(fd_, POLLOUT, write_timeout_); }

ssize_t HttpRequestStream::read(char* ptr, size_t size) {
  if (pos_ < limit_) {
    const size_t n = std::min(size, limit_ - pos_);
    memcpy(ptr, buf_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  if (!chunked_) return 0;
  if (socket_bytes_ >= max_socket_bytes_) {
    failed_ = cut_off_ = true;
    return -1;
  }
  if (!WaitFor(fd_, POLLIN, deadline_ - absl::Now())) {
    failed_ = true;
    return -1;
  }
  const ssize_t n =
      recv(fd_, ptr, std::min<uint64_t>(size, max_socket_bytes_ - socket_bytes_), MSG_DONTWAIT);
  if (n < 0) {
    failed_ = true;
    return -1;
  }
  socket_bytes_ += n;
  return n;
}

ssize_t HttpRequestStream::write(const char* ptr, size_t size) {
  for (;;) {
    if (!WaitFor(fd_, POLLOUT, write_timeout_)) return -1;
    const ssize_t n = send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) return n;
  }
}

void HttpRequestStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) IpAndPort(addr, ip, port);
}

void HttpRequestStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) IpAndPort(addr, ip, port);
}

}  // namespace pagoda
