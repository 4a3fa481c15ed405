// `Expect: 100-continue` on the HTTP API (issue 23): the router's connection front answers the
// interim "100 Continue" once a head passed its checks (size, budget, API key), so a client
// such as curl sends a large body at once instead of after a wait of its own (1 s); a head
// that would be refused anyway is answered with its final status and no body is sent.
#include <cstdio>
#include <string>

#include "tests/integration/hostile_http_fixture.h"

namespace pagoda {
namespace {

constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";

// A completion request padded with JSON whitespace to `bytes`.
std::string PaddedCompletion(const std::string& prompt, size_t bytes) {
  std::string body = Json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}}.dump();
  if (body.size() < bytes) body.append(bytes - body.size(), ' ');
  return body;
}

using ExpectContinueTest = HostileHttpKeyTest;

// A head that passes: "100 Continue" before any byte of the body, then one final answer.
TEST_F(ExpectContinueTest, TheInterimAnswerComesBeforeTheBody) {
  const std::string body = PaddedCompletion(golden_[0].prompt, 2 << 20);
  RawConnection c(http_port_);
  ASSERT_TRUE(
      c.Send(Head("POST /v1/completions HTTP/1.1",
                  absl::StrCat("Content-Type: application/json\r\nContent-Length: ", body.size(),
                               "\r\nExpect: 100-continue\r\n"
                               "Connection: close\r\n"))));
  std::string interim;
  testing::WaitUntil(
      [&] {
        if (c.HasReply()) interim += c.ReadUntilClose(std::chrono::milliseconds(50));
        return interim.size() >= sizeof(kContinue) - 1;
      },
      std::chrono::seconds(10), "the interim answer arrives");
  EXPECT_EQ(interim, kContinue);
  ASSERT_TRUE(c.Send(body));
  const std::string response = c.ReadUntilClose();
  EXPECT_EQ(StatusOf(response), 200) << response.substr(0, 300);  // no second "100 Continue"
  const Json j = Json::parse(response.substr(response.find("\r\n\r\n") + 4), nullptr, false);
  ASSERT_TRUE(j.is_object()) << response.substr(0, 300);
  EXPECT_EQ(j["choices"][0]["text"], baseline_);
}

// Heads refused anyway get their final status instead, and no body is waited for.
TEST_F(ExpectContinueTest, AHeadThatWouldBeRefusedGetsItsFinalStatusInstead) {
  struct Case {
    std::string fields;
    int status;
  };
  const std::string expect = "Expect: 100-continue\r\n";
  for (const Case& c : {
           Case{"Content-Length: 1000\r\n" + expect, 401},           // no key
           Case{"Content-Length: 1000\r\nExpect: 200-ok\r\n", 417},  // not an expectation we meet
           Case{"Content-Length: 999999999\r\n" + expect, 413},      // past the body limit
       }) {
    RawConnection conn(http_port_);
    const std::string head =
        c.status == 401
            ? absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n", c.fields, "\r\n")
            : Head("POST /v1/completions HTTP/1.1", c.fields);
    ASSERT_TRUE(conn.Send(head));
    const std::string response = conn.ReadUntilClose(std::chrono::seconds(5));
    EXPECT_EQ(StatusOf(response), c.status) << c.fields << response.substr(0, 300);
    EXPECT_THAT(response, ::testing::HasSubstr("\"error\""));
  }
  ExpectHonestClientsServed();
}

// curl sends `Expect: 100-continue` itself for a body over 1 MiB, and here gets the interim
// answer (its -v log shows it) and the completion.
TEST_F(ExpectContinueTest, CurlGetsTheInterimAnswerForALargeBody) {
  const std::string path = testing::TempDir() + "/large_body.json";
  testing::WriteFile(path, PaddedCompletion(golden_[0].prompt, 3 << 20));
  const std::string command = absl::StrCat(
      "curl -sS -v --max-time 60 -H 'Content-Type: application/json' -H 'Authorization: Bearer ",
      kApiKey, "' --data-binary @", path, " http://127.0.0.1:", http_port_, "/v1/completions 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("Expect: 100-continue"));
  EXPECT_THAT(out, ::testing::HasSubstr("< HTTP/1.1 100 Continue"));
  EXPECT_THAT(out, ::testing::HasSubstr("< HTTP/1.1 200"));
  EXPECT_THAT(out, ::testing::HasSubstr(Json(baseline_).dump()));
}

}  // namespace
}  // namespace pagoda
