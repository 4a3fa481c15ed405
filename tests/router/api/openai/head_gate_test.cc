// The checks the HTTP server's loop makes on a request's head before it reads the body: the API
// key, the open paths, and the CORS lines of a refusal. Heads as clients send them, no sockets.
#include "router/api/openai/head_gate.h"

#include <string>

#include "common/process/metrics.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

CorsPolicy Cors(const char* origins) {
  absl::StatusOr<CorsOptions> o = ParseCorsOptions(origins, "*", "*", false);
  EXPECT_TRUE(o.ok()) << o.status();
  return CorsPolicy(o.ok() ? *o : CorsOptions());
}

std::string Head(const std::string& request_line, const std::string& fields = "") {
  return request_line + "\r\nHost: x\r\n" + fields + "\r\n";
}

TEST(HeadGateTest, WithoutAKeyEveryHeadPasses) {
  const CorsPolicy cors = Cors("");
  const HeadGate gate("", &cors, nullptr);
  EXPECT_TRUE(gate.Authorized(Head("POST /v1/completions HTTP/1.1")));
  EXPECT_TRUE(gate.Authorized(""));
}

TEST(HeadGateTest, AKeyedServerTakesTheBearerKeyAndCountsEachRefusal) {
  const CorsPolicy cors = Cors("");
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  const HeadGate gate("s3cret", &cors, &metrics);
  EXPECT_TRUE(
      gate.Authorized(Head("POST /v1/completions HTTP/1.1", "Authorization: Bearer s3cret\r\n")));
  EXPECT_TRUE(gate.Authorized(
      Head("POST /v1/completions HTTP/1.1", "authorization:   bearer s3cret  \r\n")));
  EXPECT_EQ(metrics.refused_api_key->value(), 0);
  EXPECT_FALSE(gate.Authorized(Head("POST /v1/completions HTTP/1.1")));
  EXPECT_FALSE(
      gate.Authorized(Head("POST /v1/completions HTTP/1.1", "Authorization: Bearer s3cre\r\n")));
  EXPECT_FALSE(
      gate.Authorized(Head("POST /v1/completions HTTP/1.1", "Authorization: Basic s3cret\r\n")));
  EXPECT_EQ(metrics.refused_api_key->value(), 3);
  // A malformed request line is refused, not read past its end.
  EXPECT_FALSE(gate.Authorized("POST\r\n\r\n"));
  EXPECT_FALSE(gate.Authorized(""));
}

TEST(HeadGateTest, HealthVersionAndMetricsAreOpenWhateverTheirQuery) {
  const CorsPolicy cors = Cors("");
  const HeadGate gate("s3cret", &cors, nullptr);
  for (const char* line : {"GET /health HTTP/1.1", "GET /version HTTP/1.1",
                           "GET /metrics?name=x HTTP/1.1", "GET /health"}) {
    EXPECT_TRUE(gate.Authorized(Head(line))) << line;
  }
  for (const char* line : {"GET /healthz HTTP/1.1", "GET /v1/models HTTP/1.1",
                           "GET /x/health HTTP/1.1", "GET /v1/models?/health HTTP/1.1"}) {
    EXPECT_FALSE(gate.Authorized(Head(line))) << line;
  }
}

TEST(HeadGateTest, APreflightNeedsNoKeyWhileCorsIsOn) {
  const std::string preflight =
      Head("OPTIONS /v1/chat/completions HTTP/1.1",
           "Origin: https://a.example\r\nAccess-Control-Request-Method: POST\r\n");
  const CorsPolicy off = Cors("");
  EXPECT_FALSE(HeadGate("s3cret", &off, nullptr).Authorized(preflight));
  const CorsPolicy on = Cors("https://a.example");
  const HeadGate gate("s3cret", &on, nullptr);
  EXPECT_TRUE(gate.Authorized(preflight));
  // Not a preflight: an OPTIONS without the requested method, or a POST with an Origin.
  EXPECT_FALSE(gate.Authorized(
      Head("OPTIONS /v1/chat/completions HTTP/1.1", "Origin: https://a.example\r\n")));
  EXPECT_FALSE(gate.Authorized(Head("POST /v1/chat/completions HTTP/1.1",
                                    "Origin: https://a.example\r\n"
                                    "Access-Control-Request-Method: POST\r\n")));
}

TEST(HeadGateTest, ARefusalCarriesTheCorsLinesOfItsOrigin) {
  const CorsPolicy off = Cors("");
  EXPECT_EQ(
      HeadGate("", &off, nullptr)
          .RefusalHeaders(Head("POST /v1/completions HTTP/1.1", "Origin: https://a.example\r\n")),
      "");
  const CorsPolicy on = Cors("https://a.example");
  const HeadGate gate("", &on, nullptr);
  EXPECT_EQ(
      gate.RefusalHeaders(Head("POST /v1/completions HTTP/1.1", "Origin: https://a.example\r\n")),
      "Vary: Origin\r\nAccess-Control-Allow-Origin: https://a.example\r\n");
  EXPECT_EQ(
      gate.RefusalHeaders(Head("POST /v1/completions HTTP/1.1", "Origin: https://b.example\r\n")),
      "Vary: Origin\r\n");
  EXPECT_EQ(gate.RefusalHeaders(Head("POST /v1/completions HTTP/1.1")), "");
}

}  // namespace
}  // namespace pagoda
