#include "tools/fleet_sim/http_load.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pagoda::fleet {

using Clock = std::chrono::steady_clock;

struct HttpLoad::Conn {
  int index = 0;
  int fd = -1;
  bool connected = false;
  std::string out;  // unsent request bytes
  std::string in;   // received, not yet consumed
  bool head_seen = false;
  int events = 0;  // text events of this reply
  bool first = true;
  Clock::time_point last;
  std::mt19937 rng;
  std::vector<float> token_ms, ttft;
};

HttpLoad::HttpLoad(LoadOptions options, LoadStats* stats)
    : options_(std::move(options)), stats_(stats) {}

HttpLoad::~HttpLoad() { Stop(); }

void HttpLoad::Start() {
  const std::string& a = options_.address;
  const size_t colon = a.rfind(':');
  int port = 0;
  CHECK(colon != std::string::npos && absl::SimpleAtoi(a.substr(colon + 1), &port))
      << "--http wants host:port, not " << a;
  std::string host = a.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  CHECK_EQ(inet_pton(AF_INET, host.c_str(), &host_), 1) << "an IPv4 address, not " << host;
  port_ = htons(static_cast<uint16_t>(port));
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  PCHECK(epoll_ >= 0);
  for (int i = 0; i < options_.streams; ++i) {
    auto c = std::make_unique<Conn>();
    c->index = i;
    c->rng.seed(static_cast<uint32_t>(i) * 15485863u + 3u);
    conns_.push_back(std::move(c));
  }
  for (auto& c : conns_) {
    if (!Open(*c)) stats_->failures.fetch_add(1);
  }
  thread_ = std::thread([this] { Loop(); });
}

void HttpLoad::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  for (auto& c : conns_) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    stats_->token_ms.Merge(c->token_ms);
    stats_->ttft_ms.Merge(c->ttft);
  }
  if (epoll_ >= 0) close(epoll_);
  epoll_ = -1;
}

bool HttpLoad::Open(Conn& c) {
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) return false;
  const int one = 1;
  setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = port_;
  addr.sin_addr.s_addr = host_;
  if (connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
      errno != EINPROGRESS) {
    close(c.fd);
    c.fd = -1;
    return false;
  }
  c.connected = false;
  c.in.clear();
  epoll_event ev = {};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u32 = static_cast<uint32_t>(c.index);
  epoll_ctl(epoll_, EPOLL_CTL_ADD, c.fd, &ev);
  Send(c);
  return true;
}

void HttpLoad::Send(Conn& c) {
  std::vector<int> prompt = MakePrompt(options_, c.rng);
  const std::string body =
      absl::StrCat(R"({"model":")", options_.model, R"(","prompt":[)", absl::StrJoin(prompt, ","),
                   R"(],"max_tokens":)", options_.max_tokens,
                   R"(,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}})");
  c.out = absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: fleet\r\n",
                       "Content-Type: application/json\r\nContent-Length: ", body.size(),
                       "\r\n\r\n", body);
  c.head_seen = false;
  c.events = 0;
  c.first = true;
  c.last = Clock::now();
}

void HttpLoad::Close(Conn& c, bool failed) {
  if (failed && !stop_.load()) stats_->failures.fetch_add(1);
  if (c.fd >= 0) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
  }
  c.fd = -1;
}

bool HttpLoad::Consume(Conn& c) {
  if (!c.head_seen) {
    const size_t end = c.in.find("\r\n\r\n");
    if (end == std::string::npos) return true;
    if (c.in.compare(0, 12, "HTTP/1.1 200") != 0) {
      LOG_EVERY_N(WARNING, 100) << "HTTP reply: " << c.in.substr(0, c.in.find("\r\n"));
      return false;
    }
    c.head_seen = true;
    c.in.erase(0, end + 4);
  }
  for (;;) {
    const size_t data = c.in.find("data: ");
    if (data == std::string::npos) return true;
    const size_t end = c.in.find("\n\n", data);
    if (end == std::string::npos) return true;
    const std::string_view event(c.in.data() + data + 6, end - data - 6);
    if (event.substr(0, 6) == "[DONE]") {
      // The chunked body's last chunk follows; the connection is reused once it is in.
      if (c.in.find("0\r\n\r\n", end) == std::string::npos) return true;
      stats_->requests.fetch_add(1, std::memory_order_relaxed);
      c.in.clear();
      Send(c);
      return true;
    }
    const size_t usage = event.find("\"completion_tokens\":");
    if (usage != std::string_view::npos && event.find("\"choices\":[]") != std::string_view::npos) {
      const int tokens = std::atoi(event.data() + usage + 20);
      stats_->tokens.fetch_add(tokens - c.events, std::memory_order_relaxed);
    } else {
      ++c.events;
      stats_->tokens.fetch_add(1, std::memory_order_relaxed);
      if (stats_->recording.load(std::memory_order_relaxed)) {
        const float gap = std::chrono::duration<float, std::milli>(Clock::now() - c.last).count();
        (c.first ? c.ttft : c.token_ms).push_back(gap);
      }
      c.first = false;
      c.last = Clock::now();
    }
    c.in.erase(0, end + 2);
  }
}

void HttpLoad::Loop() {
  std::vector<epoll_event> events(1024);
  char buffer[65536];
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      Conn& c = *conns_[events[i].data.u32];
      if (c.fd < 0) continue;
      bool ok = !(events[i].events & (EPOLLERR | EPOLLHUP)) || (events[i].events & EPOLLIN);
      if (ok && (events[i].events & EPOLLOUT) && !c.out.empty()) {
        const ssize_t sent = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
        if (sent > 0) c.out.erase(0, static_cast<size_t>(sent));
        if (sent < 0 && errno != EAGAIN) ok = false;
        if (ok && c.out.empty()) {
          epoll_event ev = {};
          ev.events = EPOLLIN;
          ev.data.u32 = static_cast<uint32_t>(c.index);
          epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
        }
      }
      if (ok && (events[i].events & EPOLLIN)) {
        const ssize_t got = recv(c.fd, buffer, sizeof(buffer), 0);
        if (got > 0) {
          c.in.append(buffer, static_cast<size_t>(got));
          const bool had_out = !c.out.empty();
          ok = Consume(c);
          if (ok && !had_out && !c.out.empty()) {  // the next request: wait for writability
            epoll_event ev = {};
            ev.events = EPOLLIN | EPOLLOUT;
            ev.data.u32 = static_cast<uint32_t>(c.index);
            epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd, &ev);
          }
        } else if (got == 0 || errno != EAGAIN) {
          ok = false;
          // The server closed a keep-alive connection between requests: not a failure.
          if (got == 0 && !c.head_seen && c.out.empty() && c.in.empty() && c.events == 0) {
            Close(c, false);
            if (!stop_.load() && !Open(c)) stats_->failures.fetch_add(1);
            continue;
          }
        }
      }
      if (!ok) {
        Close(c, true);
        if (!stop_.load() && !Open(c)) stats_->failures.fetch_add(1);
      }
    }
  }
}

}  // namespace pagoda::fleet
