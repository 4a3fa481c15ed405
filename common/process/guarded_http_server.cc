#include "common/process/guarded_http_server.h"

#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/process/http_connection.h"
#include "common/process/http_refusal.h"
#include "common/process/http_request_stream.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr absl::Duration kDrainTime = absl::Seconds(2);

using ConnectionPtr = std::unique_ptr<HttpConnection>;

// httplib's accept loop hands each socket to process_and_close_socket through its task
// queue: run at once, it only passes the socket to our loop.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// The request the current pool thread serves.
thread_local const HttpRequestStream* current_stream = nullptr;

}  // namespace

class GuardedHttpServer::Loop {
 public:
  Loop(GuardedHttpServer* server, HttpGuardOptions options)
      : server_(server),
        options_(std::move(options)),
        wake_fd_(eventfd(0, EFD_CLOEXEC)),
        budget_(options_.max_body_bytes_in_flight, options_.max_chunked_in_flight) {
    PCHECK(wake_fd_ >= 0) << "eventfd";
    loop_thread_ = std::thread([this] { Run(); });
    for (int i = 0; i < options_.threads; ++i) pool_.emplace_back([this] { Serve(); });
  }
  ~Loop() {
    Stop();
    close(wake_fd_);
  }

  void Add(ConnectionPtr c) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      incoming_.push_back(std::move(c));
    }
    Wake();
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    Wake();
    loop_thread_.join();
    for (std::thread& t : pool_) t.join();
    absl::MutexLock lock(&mu_);
    incoming_.clear();
    ready_.clear();
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }

  // The poll loop: reads heads and sized bodies, hands complete requests to the pool.
  void Run() {
    std::vector<pollfd> fds;
    for (;;) {
      std::vector<ConnectionPtr> adopted;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) break;
        adopted.swap(incoming_);
      }
      const absl::Time now = absl::Now();
      for (ConnectionPtr& c : adopted) Adopt(std::move(c), now);
      std::erase_if(waiting_, [&](const ConnectionPtr& c) {
        if (c->deadline > now) return false;
        Release(*c);
        return true;
      });
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      absl::Time next = now + absl::Seconds(1);
      for (const ConnectionPtr& c : waiting_) {
        fds.push_back(pollfd{c->fd, POLLIN, 0});
        next = std::min(next, c->deadline);
      }
      const int ms =
          static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 1, 1000));
      if (poll(fds.data(), fds.size(), ms) <= 0) continue;
      if (fds[0].revents != 0) {
        uint64_t n;
        (void)!::read(wake_fd_, &n, sizeof(n));
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) Receive(waiting_[i - 1], absl::Now());
      }
      std::erase(waiting_, nullptr);
    }
    for (ConnectionPtr& c : waiting_) Release(*c);
    waiting_.clear();
  }

  // A new connection, or one back from the pool (with any pipelined bytes in its buffer).
  void Adopt(ConnectionPtr c, absl::Time now) {
    c->since = now;
    c->started = !c->buf.empty();
    c->deadline =
        now + (c->served > 0 && !c->started ? options_.idle_timeout : options_.head_timeout);
    if (static_cast<int>(waiting_.size()) >= options_.max_waiting_connections) {
      // The oldest waiting connection makes room: a flood cannot keep a new client out.
      auto oldest = std::min_element(
          waiting_.begin(), waiting_.end(),
          [](const ConnectionPtr& a, const ConnectionPtr& b) { return a->since < b->since; });
      Release(**oldest);
      waiting_.erase(oldest);
    }
    waiting_.push_back(std::move(c));
    if (waiting_.back()->started) Advance(waiting_.back(), now);
    std::erase(waiting_, nullptr);
  }

  // Reads what the current request still lacks; `c` becomes null when it leaves the loop.
  void Receive(ConnectionPtr& c, absl::Time now) {
    if (c->draining) {
      char sink[16 << 10];
      const ssize_t n = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) Drop(c);
      return;
    }
    const size_t have = c->buf.size();
    const uint64_t want = c->head_done ? c->head.head_bytes + c->head.content_length - have
                                       : options_.head.max_head_bytes -
                                             std::min(have, options_.head.max_head_bytes - 1);
    char chunk[64 << 10];
    const ssize_t n = recv(c->fd, chunk, std::min<uint64_t>(want, sizeof(chunk)), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return Drop(c);
    if (!c->started) {
      c->started = true;
      c->deadline = now + options_.head_timeout;
    }
    c->buf.append(chunk, n);
    Advance(c, now);
  }

  void Advance(ConnectionPtr& c, absl::Time now) {
    if (!c->head_done) {
      switch (ScanHttpHead(c->buf, options_.head, &c->head)) {
        case HeadScan::kIncomplete:
          return;
        case HeadScan::kTooLarge:
          return Refuse(c, 431,
                        absl::StrCat("the request head passes ", options_.head.max_head_bytes,
                                     " bytes or ", options_.head.max_fields, " header fields"));
        case HeadScan::kBodyTooLarge:
          return Refuse(
              c, 413,
              absl::StrCat("the request body passes ", options_.head.max_body_bytes, " bytes"));
        case HeadScan::kBad:
          return Refuse(c, 400, "bad Content-Length or Transfer-Encoding");
        case HeadScan::kBadExpectation:
          return Refuse(c, 417, "the only Expect this server meets is 100-continue");
        case HeadScan::kComplete:
          break;
      }
      c->head_done = true;
      c->body_start = now;
      // Before any share of the body budget, and before a byte of the body is read.
      if (options_.head_authorized &&
          !options_.head_authorized(absl::string_view(c->buf).substr(0, c->head.head_bytes))) {
        return Refuse(c, 401,
                      "missing or wrong API key: send the header Authorization: Bearer <key>");
      }
      if (const char* full = budget_.Admit(c->head, &c->share)) return Refuse(c, 503, full);
      // Once, exactly: appending would double the buffer's capacity past the body.
      if (c->share.bytes > 0) c->buf.reserve(c->head.head_bytes + c->share.bytes);
      if (c->head.expect_continue && c->BodyPending()) {
        // The head passed every check: the client may send its body now. A few bytes on a
        // socket that has sent nothing yet: they fit its buffer.
        constexpr absl::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        (void)!send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
    if (c->head.body == HttpHead::Body::kSized) {
      const size_t body = c->buf.size() - c->head.head_bytes;
      if (body < c->head.content_length) {
        // Each byte buys time at the minimum rate, after a grace of head_timeout: holding a
        // share of the budget costs an attacker that much bandwidth.
        c->deadline = c->body_start + options_.head_timeout +
                      absl::Seconds(body / options_.min_body_bytes_per_second);
        return;
      }
    }
    {
      absl::MutexLock lock(&mu_);
      ready_.push_back(std::move(c));
    }
  }

  // Answers from the loop and closes: the request is refused before any thread reads it.
  void Refuse(ConnectionPtr& c, int status, const std::string& message) {
    const std::string extra =
        c->head_done && options_.refusal_headers
            ? options_.refusal_headers(absl::string_view(c->buf).substr(0, c->head.head_bytes))
            : std::string();
    const std::string response = HttpRefusal(status, message, extra);
    (void)!send(c->fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // Closed at once, a client still sending its body would get a reset, which discards the
    // answer before it reads it: what it sends is read and dropped a little longer.
    Release(*c);
    shutdown(c->fd, SHUT_WR);
    c->draining = true;
    c->buf.clear();
    c->buf.shrink_to_fit();
    c->deadline = absl::Now() + kDrainTime;
  }

  void Drop(ConnectionPtr& c) {
    Release(*c);
    c.reset();
  }

  void Release(HttpConnection& c) { budget_.Release(&c.share); }

  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !ready_.empty(); }

  // A pool thread: serves complete requests with httplib until Stop().
  void Serve() {
    for (;;) {
      ConnectionPtr c;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &Loop::HasWork));
        if (stopping_) return;
        c = std::move(ready_.front());
        ready_.pop_front();
      }
      ServeOne(std::move(c));
    }
  }

  void ServeOne(ConnectionPtr c) {
    const bool chunked = c->head.body == HttpHead::Body::kChunked;
    // httplib would copy a sized body from the stream a few KiB at a time into a string that
    // doubles as it grows (~2x the body at its peak): the request gets it moved instead, the
    // stream serves the head alone, and a Content-Length of 0 leaves httplib nothing to read.
    const bool sized = c->head.body == HttpHead::Body::kSized && c->head.content_length > 0;
    std::string body = sized ? c->TakeBody() : std::string();
    const size_t limit = chunked ? std::string::npos : c->head.head_bytes;
    const uint64_t max_body = options_.head.max_body_bytes;
    HttpRequestStream stream(
        c->fd, c->buf, limit, max_body + max_body / 8 + kSmallBodyBytes,
        absl::Now() + options_.head_timeout +
            absl::Seconds(static_cast<double>(max_body) / options_.min_body_bytes_per_second),
        options_.write_timeout);
    // A chunked body may be left half read: its connection serves no further request.
    const bool close =
        chunked || ++c->served >= options_.max_requests_per_connection || !server_->is_running();
    bool closed = false;
    current_stream = &stream;
    // Runs once the head is parsed, before httplib routes the request and reads its body.
    auto setup = [sized, &body](httplib::Request& req) {
      // A Range of thousands of pieces multiplies a reply: every reply is whole.
      req.ranges.clear();
      // The loop answered it: httplib would send a second "100 Continue" after the body.
      req.headers.erase("Expect");
      if (sized) {
        req.body = std::move(body);
        req.headers.erase("Content-Length");
        req.headers.emplace("Content-Length", "0");
      }
    };
    const bool ok = server_->process_request(stream, close, closed, setup);
    current_stream = nullptr;
    const bool large = c->share.bytes > 0;
    Release(*c);
    if (large) {
      // glibc keeps what a large body and its parsed copies freed (its mmap threshold grows
      // with each such free): give it back, or a burst leaves the RSS at its peak.
      c->buf.clear();
      c->buf.shrink_to_fit();
      malloc_trim(0);
    }
    if (!ok || close || closed || stream.failed()) return;
    c->buf.erase(0, limit);
    c->head_done = false;
    Add(std::move(c));
  }

  GuardedHttpServer* const server_;
  const HttpGuardOptions options_;
  const int wake_fd_;
  mutable absl::Mutex mu_;
  std::vector<ConnectionPtr> incoming_ ABSL_GUARDED_BY(mu_);  // new, or back from the pool
  std::deque<ConnectionPtr> ready_ ABSL_GUARDED_BY(mu_);      // a complete request each
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  BodyBudget budget_;
  std::vector<ConnectionPtr> waiting_;  // the loop thread's own
  std::thread loop_thread_;
  std::vector<std::thread> pool_;
};

GuardedHttpServer::GuardedHttpServer(HttpGuardOptions options) {
  new_task_queue = [] { return new InlineQueue(); };
  set_payload_max_length(options.head.max_body_bytes);
  set_write_timeout(absl::ToInt64Seconds(options.write_timeout), 0);
  // What httplib announces in its Keep-Alive header.
  set_keep_alive_max_count(options.max_requests_per_connection);
  set_keep_alive_timeout(absl::ToInt64Seconds(options.idle_timeout));
  loop_ = std::make_unique<Loop>(this, std::move(options));
}

GuardedHttpServer::~GuardedHttpServer() { Shutdown(); }

bool GuardedHttpServer::listen_after_bind() {
  ::listen(svr_sock_, SOMAXCONN);
  return Server::listen_after_bind();
}

std::thread GuardedHttpServer::ListenInBackground() {
  std::thread thread([this] {
    listen_after_bind();
    listen_returned_ = true;
  });
  while (!is_running() && !listen_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return thread;
}

void GuardedHttpServer::Shutdown() { loop_->Stop(); }

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  // A reply is written in pieces (head, body, each event): with Nagle's algorithm the second
  // piece waits for the client's delayed ACK, ~40 ms a request on a keep-alive connection.
  const int one = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  loop_->Add(std::make_unique<HttpConnection>(sock));
  return true;
}

bool GuardedHttpServer::ClientGone() {
  if (current_stream == nullptr) return false;
  pollfd p{current_stream->socket(), POLLRDHUP, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

bool GuardedHttpServer::BodyCutOff() {
  return current_stream != nullptr && current_stream->cut_off();
}

}  // namespace pagoda
