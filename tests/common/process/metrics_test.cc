// Prometheus text rendering of counters, gauges and histograms, and the HTTP endpoint that
// serves it, through real sockets on loopback.
#include "common/process/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/process/http_client.h"
#include "common/process/http_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, RendersEachFamilyOnceWithItsMembers) {
  MetricsRegistry r;
  Counter* a = r.AddCounter("x_total", "Things.", {{"kind", "a"}});
  Counter* b = r.AddCounter("x_total", "Things.", {{"kind", "b\"q\\"}});
  a->Add(2);
  b->Add();
  r.AddGaugeFamily("g", "A gauge.", [] {
    return std::vector<std::pair<MetricLabels, double>>{{{{"worker", "0"}}, 0.25}};
  });
  const std::string text = r.Render();
  EXPECT_EQ(text,
            "# HELP x_total Things.\n# TYPE x_total counter\n"
            "x_total{kind=\"a\"} 2\n"
            "x_total{kind=\"b\\\"q\\\\\"} 1\n"
            "# HELP g A gauge.\n# TYPE g gauge\n"
            "g{worker=\"0\"} 0.25\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeAndInclusive) {
  MetricsRegistry r;
  Histogram* h = r.AddHistogram("lat_seconds", "Latency.", {0.1, 1.0});
  h->Observe(0.1);  // le="0.1" includes its bound
  h->Observe(0.5);
  h->Observe(7);
  const std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE lat_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"0.1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_sum 7.6\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_count 3\n"));
}

TEST(MetricsTest, ConstantLabelsComeFirstOnEverySeries) {
  MetricsRegistry r(MetricLabels{{"model_name", "m"}});
  r.AddCounter("x_total", "Things.")->Add();
  r.AddCounter("y_total", "Others.", {{"finished_reason", "stop"}});
  r.AddHistogram("lat_seconds", "Latency.", {1.0})->Observe(0.5);
  r.AddGaugeFamily("g", "A gauge.", [] {
    return std::vector<std::pair<MetricLabels, double>>{{{{"worker", "0"}}, 1}};
  });
  const std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("x_total{model_name=\"m\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("y_total{model_name=\"m\",finished_reason=\"stop\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_bucket{model_name=\"m\",le=\"1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("lat_seconds_count{model_name=\"m\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("g{model_name=\"m\",worker=\"0\"} 1\n"));
}

TEST(MetricsTest, SeveralRegistriesRenderAsOneExpositionWithAFamilyWrittenOnce) {
  // One registry a served model (issue 39): a family both hold is one HELP and TYPE with the
  // series of each; a family only the second holds comes after the first's.
  MetricsRegistry a(MetricLabels{{"model_name", "a"}});
  MetricsRegistry b(MetricLabels{{"model_name", "b"}});
  a.AddCounter("x_total", "Things.")->Add(2);
  b.AddCounter("x_total", "Things.")->Add(3);
  b.AddGaugeFamily("g", "A gauge.", [] {
    return std::vector<std::pair<MetricLabels, double>>{{{{"worker", "0"}}, 1}};
  });
  EXPECT_EQ(MetricsRegistry::RenderAll({&a, &b}),
            "# HELP x_total Things.\n# TYPE x_total counter\n"
            "x_total{model_name=\"a\"} 2\nx_total{model_name=\"b\"} 3\n"
            "# HELP g A gauge.\n# TYPE g gauge\ng{model_name=\"b\",worker=\"0\"} 1\n");
  EXPECT_EQ(MetricsRegistry::RenderAll({&a}), a.Render());
}

// A loopback TCP connection to `port`, with reads that give up after 10 s.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

// The status of the HTTP reply read from `fd` (its first line is enough), or -1; closes `fd`.
int ReadStatus(int fd) {
  std::string reply;
  char buf[4096];
  for (ssize_t n;
       reply.find("\r\n") == std::string::npos && (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
    reply.append(buf, n);
  }
  close(fd);
  return reply.rfind("HTTP/1.", 0) == 0 && reply.size() > 12 ? std::atoi(reply.c_str() + 9) : -1;
}

// Sends `raw` as is (a client that half-closes its side gets no answer from httplib).
int RawStatus(int port, const std::string& raw) {
  const int fd = Connect(port);
  EXPECT_EQ(send(fd, raw.data(), raw.size(), MSG_NOSIGNAL), static_cast<ssize_t>(raw.size()));
  return ReadStatus(fd);
}

TEST(HttpServerTest, AHandlerChoosesItsStatus) {
  std::atomic<bool> ready{false};
  auto server = HttpServer::Start("127.0.0.1", 0,
                                  {{"/health", [&ready] {
                                      return HttpResponse{"text/plain", "x\n", ready ? 200 : 503};
                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(HttpGet("127.0.0.1", (*server)->port(), "/health").status, 503);
  ready = true;
  EXPECT_EQ(HttpGet("127.0.0.1", (*server)->port(), "/health").status, 200);
}

TEST(HttpServerTest, ServesPathsAndRefusesTheRest) {
  MetricsRegistry r;
  r.AddCounter("up_total", "Up.")->Add(5);
  auto server = HttpServer::Start("127.0.0.1", 0, {{"/metrics", [&r] {
                                                      return HttpResponse{"text/plain", r.Render()};
                                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const HttpResult ok = HttpGet("127.0.0.1", port, "/metrics");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.content_type, "text/plain");
  EXPECT_THAT(ok.body, HasSubstr("up_total 5\n"));
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/nothing").status, 404);
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics?x=1").status, 200) << "the query is not the path";
  EXPECT_EQ(RawStatus(port, "HEAD /metrics HTTP/1.1\r\n\r\n"), 200);
  EXPECT_EQ(RawStatus(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'x') + "\r\n\r\n"),
            400)
      << "a header over 8 KiB";
  EXPECT_EQ(RawStatus(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), 405);
  EXPECT_EQ(RawStatus(port, "garbage\r\n\r\n"), 400);
  EXPECT_EQ(RawStatus(port, "GET /" + std::string(9000, 'x') + " HTTP/1.1\r\n\r\n"), 414);
  // Still serving after the bad ones.
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics").status, 200);
  EXPECT_FALSE(HttpServer::Start("127.0.0.1", port, {}).ok()) << "the port is taken";
}

// One client that sends its request a byte a second must not hold /metrics up for the others
// (a one-thread server answers nobody else until that request is whole).
TEST(HttpServerTest, ATricklingClientDoesNotBlockOthers) {
  auto server = HttpServer::Start("127.0.0.1", 0, {{"/metrics", [] {
                                                      return HttpResponse{"text/plain", "up 1\n"};
                                                    }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string request = "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n";
  std::atomic<bool> others_done{false};
  std::promise<void> trickling;
  std::thread trickler([&] {
    const int fd = Connect(port);  // first in the accept queue
    size_t sent = 0;
    // A byte a second until the other client is answered (at most 20 s), then the rest.
    while (sent < request.size() - 1 && sent < 20 && !others_done) {
      EXPECT_EQ(send(fd, request.data() + sent, 1, MSG_NOSIGNAL), 1);
      if (++sent == 1) trickling.set_value();
      for (int i = 0; i < 100 && !others_done; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    const std::string rest = request.substr(sent);
    EXPECT_EQ(send(fd, rest.data(), rest.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rest.size()));
    EXPECT_EQ(ReadStatus(fd), 200) << "the slow request is answered once whole";
  });
  trickling.get_future().wait();  // connected, and its first byte is on the wire
  const HttpResult other = HttpGet("127.0.0.1", port, "/metrics", /*timeout_ms=*/5000);
  others_done = true;
  trickler.join();
  EXPECT_EQ(other.status, 200) << "another client's /metrics waited for the slow one";
  EXPECT_EQ(other.body, "up 1\n");
}

}  // namespace
}  // namespace pagoda
