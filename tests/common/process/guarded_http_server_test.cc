// The connection front of every HTTP port, served in-process over loopback.
#include "common/process/guarded_http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

int LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return addr.sin_family == AF_INET ? ntohs(addr.sin_port) : -1;
}

int PeerPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return addr.sin_family == AF_INET ? ntohs(addr.sin_port) : -1;
}

// A blocking client socket connected to 127.0.0.1:port.
int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// This process's socket that `server_port` accepted from `client_port`; -1 when none.
int AcceptedSocket(int server_port, int client_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (fd > 2 && LocalPort(fd) == server_port && PeerPort(fd) == client_port) found = fd;
  }
  closedir(dir);
  return found;
}

class GuardedHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<GuardedHttpServer>(HttpGuardOptions());
    server_->Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hi", "text/plain");
    });
    port_ = server_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = server_->ListenInBackground();
  }
  void TearDown() override {
    server_->stop();
    thread_.join();
    server_->Shutdown();
  }

  std::unique_ptr<GuardedHttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// A reply goes out in pieces; Nagle's algorithm held the second for the client's delayed ACK,
// ~40 ms on every request after the first on a keep-alive connection.
TEST_F(GuardedHttpServerTest, AcceptedSocketsSendWithoutDelay) {
  const int client = ConnectLoopback(port_);
  // Answered, and kept alive: the server's socket is open while we look at it.
  const std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(send(client, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  while (!absl::StrContains(response, "\r\n\r\nhi")) {
    const ssize_t n = recv(client, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0);
    response.append(buf, n);
  }
  const int accepted = AcceptedSocket(port_, LocalPort(client));
  ASSERT_GE(accepted, 0);
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
  // The client's own socket, as a control: the option is off unless set.
  ASSERT_EQ(getsockopt(client, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_EQ(nodelay, 0);
  close(client);
}

// Without the key, a head is refused before its body is read or budgeted.
TEST(GuardedHttpServerKeyTest, AHeadWithoutTheKeyIsRefusedBeforeItsBody) {
  HttpGuardOptions options;
  options.max_body_bytes_in_flight = 1 << 20;
  options.head_authorized = [](absl::string_view head) {
    return absl::StrContains(head, "Authorization: Bearer k\r\n");
  };
  GuardedHttpServer server(options);
  server.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(absl::StrCat(req.body.size()), "text/plain");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread thread = server.ListenInBackground();
  auto read_all = [](int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
    return out;
  };
  // Heads that would take the whole budget, without the key: each is answered 401 at once.
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    const int fd = ConnectLoopback(port);
    const std::string head =
        "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
        "Content-Length: 1048576\r\n\r\n";
    send(fd, head.data(), head.size(), MSG_NOSIGNAL);
    EXPECT_TRUE(absl::StartsWith(read_all(fd), "HTTP/1.1 401")) << i;
    held.push_back(fd);
  }
  // With the key, a body of the whole budget is served.
  const int fd = ConnectLoopback(port);
  const std::string body(1 << 20, 'a');
  const std::string request = absl::StrCat(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nConnection: close\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    sent += n;
  }
  const std::string response = read_all(fd);
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 200")) << response.substr(0, 200);
  EXPECT_TRUE(absl::EndsWith(response, "1048576"));
  close(fd);
  for (int h : held) close(h);
  server.stop();
  thread.join();
  server.Shutdown();
}

}  // namespace
}  // namespace pagoda
