// The checks the HTTP server's loop makes on a request's head before it reads the body: the API
// key, the open paths, and the CORS lines of a refusal. Heads as clients send them, no sockets.
#include "router/api/openai/head_gate.h"

#include <iterator>
#include <string>

#include "absl/strings/escaping.h"
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

// "Authorization: Basic base64(user:password)\r\n".
std::string Basic(const std::string& credentials) {
  return "Authorization: Basic " + absl::Base64Escape(credentials) + "\r\n";
}

TEST(HeadGateTest, ThePageTakesTheKeyAsBasicsPasswordWhateverTheUser) {
  const CorsPolicy cors = Cors("");
  const HeadGate gate("s3cret", &cors, nullptr, /*web_ui=*/true);
  for (const char* line :
       {"GET / HTTP/1.1", "GET /ui/app.js HTTP/1.1", "HEAD / HTTP/1.1", "GET /?x=1 HTTP/1.1"}) {
    EXPECT_TRUE(gate.Authorized(Head(line, Basic("pagoda:s3cret")))) << line;
    EXPECT_TRUE(gate.Authorized(Head(line, Basic(":s3cret")))) << line;
    EXPECT_TRUE(gate.Authorized(
        Head(line, "authorization: basic " + absl::Base64Escape("me:s3cret") + "\r\n")))
        << line;
    EXPECT_TRUE(gate.Authorized(Head(line, "Authorization: Bearer s3cret\r\n"))) << line;
  }
}

TEST(HeadGateTest, BasicCredentialsThatAreBadOrWrongAreRefused) {
  const CorsPolicy cors = Cors("");
  MetricsRegistry registry;
  RouterMetrics metrics(&registry);
  const HeadGate gate("s3cret", &cors, &metrics, /*web_ui=*/true);
  const std::string get = "GET / HTTP/1.1";
  const std::string refused[] = {
      Basic("pagoda:wrong"),
      Basic("pagoda:s3cre"),
      Basic("pagoda:s3cret "),
      Basic("pagoda:"),            // empty password
      Basic(""),                   // empty credentials
      Basic("s3cret"),             // no ':' (the key as the user)
      "Authorization: Basic\r\n",  // no credentials at all
      "Authorization: Basic !!!not-base64!!!\r\n",
      "Authorization: Basic " + absl::Base64Escape("pagoda:s3cret") + "@\r\n",
      "Authorization: Basicx " + absl::Base64Escape("pagoda:s3cret") + "\r\n",
      "Authorization: " + absl::Base64Escape("pagoda:s3cret") + "\r\n",
  };
  for (const std::string& field : refused) {
    EXPECT_FALSE(gate.Authorized(Head(get, field))) << field;
  }
  EXPECT_EQ(metrics.refused_api_key->value(), std::size(refused));
}

TEST(HeadGateTest, TheApiTakesTheBearerHeaderOnly) {
  // A browser attaches remembered Basic credentials to any request to this origin, another
  // site's forged POST included: the API's paths take the header a page must set itself.
  const CorsPolicy cors = Cors("");
  const HeadGate gate("s3cret", &cors, nullptr, /*web_ui=*/true);
  for (const char* line : {"GET /v1/models HTTP/1.1", "POST /v1/chat/completions HTTP/1.1",
                           "POST / HTTP/1.1", "DELETE /ui/app.js HTTP/1.1", "GET /uix HTTP/1.1"}) {
    EXPECT_FALSE(gate.Authorized(Head(line, Basic("pagoda:s3cret")))) << line;
  }
  // With the page off, its paths are the API's: no Basic there either.
  const HeadGate off("s3cret", &cors, nullptr, /*web_ui=*/false);
  EXPECT_FALSE(off.Authorized(Head("GET / HTTP/1.1", Basic("pagoda:s3cret"))));
}

TEST(HeadGateTest, APageRefusalAsksTheBrowserForBasicCredentials) {
  const CorsPolicy cors = Cors("");
  const HeadGate gate("s3cret", &cors, nullptr, /*web_ui=*/true);
  constexpr char kAsk[] = "WWW-Authenticate: Basic realm=\"pagoda\", charset=\"UTF-8\"\r\n";
  EXPECT_EQ(gate.RefusalHeaders(Head("GET / HTTP/1.1")), kAsk);
  EXPECT_EQ(gate.RefusalHeaders(Head("GET /ui/app.css HTTP/1.1", Basic("pagoda:wrong"))), kAsk);
  // Not for the API, nor once the key matches (a 503 then), nor with the page off or no key.
  EXPECT_EQ(gate.RefusalHeaders(Head("GET /v1/models HTTP/1.1")), "");
  EXPECT_EQ(gate.RefusalHeaders(Head("GET / HTTP/1.1", Basic("pagoda:s3cret"))), "");
  EXPECT_EQ(HeadGate("s3cret", &cors, nullptr, false).RefusalHeaders(Head("GET / HTTP/1.1")), "");
  EXPECT_EQ(HeadGate("", &cors, nullptr, true).RefusalHeaders(Head("GET / HTTP/1.1")), "");
}

}  // namespace
}  // namespace pagoda
