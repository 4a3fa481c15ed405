#include "common/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace pagoda {

HttpResult HttpExchange(const std::string& host, int port, const std::string& raw_request,
                        int timeout_ms) {
  HttpResult result;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return result;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return result;
  const timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, raw_request.data(), raw_request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(raw_request.size())) {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  // "HTTP/1.1 200 OK\r\n<headers>\r\n\r\n<body>"
  if (reply.rfind("HTTP/1.", 0) != 0 || reply.size() < 12) return result;
  result.status = std::atoi(reply.c_str() + 9);
  const size_t body = reply.find("\r\n\r\n");
  if (body != std::string::npos) result.body = reply.substr(body + 4);
  return result;
}

HttpResult HttpGet(const std::string& host, int port, const std::string& path) {
  return HttpExchange(host, port, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
}

}  // namespace pagoda
