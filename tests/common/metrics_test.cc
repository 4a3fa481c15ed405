// Prometheus text rendering of counters, gauges and histograms, and the HTTP endpoint that
// serves it, through a real socket.
#include "common/metrics.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/http_client.h"
#include "common/http_server.h"
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
  EXPECT_THAT(ok.body, HasSubstr("up_total 5\n"));
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/nothing").status, 404);
  EXPECT_EQ(HttpExchange("127.0.0.1", port, "POST /metrics HTTP/1.1\r\n\r\n").status, 405);
  EXPECT_EQ(HttpExchange("127.0.0.1", port, "garbage\r\n\r\n").status, 400);
  EXPECT_EQ(HttpExchange("127.0.0.1", port, std::string(9000, 'x')).status, 431);
  // Still serving after the bad ones.
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/metrics").status, 200);
  EXPECT_FALSE(HttpServer::Start("127.0.0.1", port, {}).ok()) << "the port is taken";
}

}  // namespace
}  // namespace pagoda
