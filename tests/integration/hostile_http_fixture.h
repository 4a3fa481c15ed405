// The fixture of issue 23's HTTP tests: a real router with a real worker, raw loopback
// connections, and an honest client's completion to compare with after an attack.
#ifndef PAGODA_TESTS_INTEGRATION_HOSTILE_HTTP_FIXTURE_H_
#define PAGODA_TESTS_INTEGRATION_HOSTILE_HTTP_FIXTURE_H_

#include <httplib.h>
#include <poll.h>

#include <chrono>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/integration/serving_fixture.h"

namespace pagoda {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
inline constexpr char kApiKey[] = "test-api-key";

// A blocking loopback connection.
class RawConnection {
 public:
  // `receive_buffer` > 0: the socket's receive buffer, set before connecting (a small one
  // makes a client that never reads fill up, and its server pause, after a few KB).
  explicit RawConnection(int port, int receive_buffer = 0) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    if (receive_buffer > 0) {
      setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // Whether the peer has sent something (or closed) already.
  bool HasReply() const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  // False once the peer no longer takes bytes (it closed, or answered and closed).
  bool Send(std::string_view data) {
    while (!data.empty()) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, 5000) != 1) return false;
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(n);
    }
    return true;
  }
  // What arrives until the peer closes, or `timeout` passes.
  std::string ReadUntilClose(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::string out;
    const auto end = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) != 1) return out;
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return out;
      out.append(buf, n);
    }
  }
  // Whether the peer closed within `timeout` (bytes it sent first are skipped).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto start = Clock::now();
    ReadUntilClose(timeout);
    return Clock::now() - start < timeout;
  }

 private:
  const int fd_;
  bool connected_ = false;
};

inline std::string Head(const std::string& request_line, const std::string& fields = "") {
  return absl::StrCat(request_line, "\r\nHost: x\r\nAuthorization: Bearer ", kApiKey, "\r\n",
                      fields, "\r\n");
}

inline std::string JsonPost(const std::string& path, const std::string& body,
                            const std::string& fields = "Connection: close\r\n") {
  return Head("POST " + path + " HTTP/1.1",
              absl::StrCat("Content-Type: application/json\r\nContent-Length: ", body.size(),
                           "\r\n", fields)) +
         body;
}

inline int StatusOf(const std::string& response) {
  if (!absl::StartsWith(response, "HTTP/1.1 ") || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

inline int64_t RssKb(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, "VmRSS:")) return std::stoll(line.substr(6));
  }
  return -1;
}

class HostileHttpTest : public ServingTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--chat-template=" + template_path_};
  }
  void SetUp() override {
    template_path_ = testing::TempDir() + "/chat.jinja";
    testing::WriteFile(template_path_,
                       "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}");
    ServingTest::SetUp();
    StartWorker();
    WaitForWorkers(1);
    baseline_ = HonestCompletion();
    ASSERT_FALSE(baseline_.empty());
  }

  // An honest /v1/completions call's text ("" when it failed).
  std::string HonestCompletion(const std::string& scheme = "Bearer") {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(30, 0);
    client.set_default_headers({{"Authorization", absl::StrCat(scheme, " ", kApiKey)}});
    const Json body = {{"prompt", golden_[0].prompt}, {"max_tokens", 24}, {"temperature", 0}};
    httplib::Result r = client.Post("/v1/completions", body.dump(), "application/json");
    if (!r || r->status != 200) return "";
    const Json j = Json::parse(r->body, nullptr, false);
    return j.is_object() ? j["choices"][0]["text"].get<std::string>() : "";
  }

  // The router is up, both APIs answer an honest client correctly within `latency`.
  void ExpectHonestClientsServed(std::chrono::milliseconds latency = std::chrono::seconds(3)) {
    const auto start = Clock::now();
    EXPECT_EQ(HonestCompletion(), baseline_);
    if (!keyed_) {  // the gRPC API wants the key too, which an insecure channel cannot send
      const testing::StreamOutput out = Generate(Greedy(golden_[0].prompt));
      ASSERT_EQ(out.ids.size(), 1u);
      EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
    }
    EXPECT_LT(Clock::now() - start, latency);
    httplib::Client metrics("127.0.0.1", metrics_port_);
    httplib::Result m = metrics.Get("/metrics");
    EXPECT_TRUE(m && m->status == 200);
  }

  std::string template_path_;
  std::string baseline_;
  bool keyed_ = false;
};

// A router that wants an API key: ready when HTTP /health says so (gRPC calls need the key).
class HostileHttpKeyTest : public HostileHttpTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {absl::StrCat("--api-key=", kApiKey)};
  }
  void SetUp() override {
    keyed_ = true;
    ServingTest::SetUp();
    StartWorker();
    testing::WaitUntil(
        [&] { return HttpGet("127.0.0.1", http_port_, "/health", 1000).status == 200; },
        std::chrono::seconds(60), "a worker is ready");
    baseline_ = HonestCompletion();
    ASSERT_FALSE(baseline_.empty());
  }
  void TearDown() override {
    for (pid_t pid : workers_) Kill(pid);
    Kill(router_);
  }
};

}  // namespace pagoda

#endif  // PAGODA_TESTS_INTEGRATION_HOSTILE_HTTP_FIXTURE_H_
