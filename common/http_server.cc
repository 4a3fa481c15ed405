#include "common/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr size_t kMaxRequestBytes = 8192;

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // the client went away
    }
    done += static_cast<size_t>(n);
  }
}

std::string Reply(int code, const char* reason, const std::string& type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& host, int port, std::map<std::string, Handler> handlers) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 16) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", error));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<HttpServer>(new HttpServer(fd, ntohs(addr.sin_port), std::move(handlers)));
}

HttpServer::HttpServer(int fd, int port, std::map<std::string, Handler> handlers)
    : fd_(fd), port_(port), handlers_(std::move(handlers)) {
  thread_ = std::thread([this] { Serve(); });
}

HttpServer::~HttpServer() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void HttpServer::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;  // a timeout re-checks stop_
    const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    Answer(client);
    close(client);
  }
}

void HttpServer::Answer(int client) {
  const timeval timeout{2, 0};
  setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      WriteAll(client, Reply(431, "Request Header Fields Too Large", "text/plain", "too large\n"));
      return;
    }
    const ssize_t n = recv(client, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed or timed out before a whole request
    request.append(buf, static_cast<size_t>(n));
  }
  // Request line: METHOD SP PATH SP VERSION
  const size_t sp1 = request.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : request.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) {
    WriteAll(client, Reply(400, "Bad Request", "text/plain", "bad request line\n"));
    return;
  }
  const std::string method = request.substr(0, sp1);
  std::string path = request.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  auto it = handlers_.find(path);
  if (it == handlers_.end()) {
    WriteAll(client, Reply(404, "Not Found", "text/plain", "not found\n"));
  } else if (method != "GET" && method != "HEAD") {
    WriteAll(client, Reply(405, "Method Not Allowed", "text/plain", "only GET\n"));
  } else {
    const HttpResponse r = it->second();
    std::string reply =
        Reply(r.status, r.status == 200 ? "OK" : "Service Unavailable", r.content_type, r.body);
    if (method == "HEAD") reply.resize(reply.size() - r.body.size());
    WriteAll(client, reply);
  }
}

}  // namespace pagoda
