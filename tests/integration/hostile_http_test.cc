// Issue 23's HTTP rows, as an attacker on loopback would try them against a real router with a
// real worker: raw sockets, bounded in time. After every attack an honest client still gets
// its golden tokens (gRPC) and the same completion as before the attack (HTTP), promptly.
#include "tests/integration/hostile_http_fixture.h"

namespace pagoda {
namespace {

// Row 3: a chunked body is cut off at the limit (413), and the key is checked before it is read.
TEST_F(HostileHttpKeyTest, ChunkedBodiesStopAtTheLimitAndNeedTheKeyFirst) {
  const int64_t rss_before = RssKb(router_);
  const std::string chunk = absl::StrCat("100000\r\n", std::string(1 << 20, 'a'), "\r\n");
  {
    RawConnection c(http_port_);
    c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.Send(chunk);  // may already be refused
    EXPECT_EQ(StatusOf(c.ReadUntilClose()), 401);
  }
  {
    RawConnection c(http_port_);
    c.Send(Head("POST /v1/completions HTTP/1.1", "Transfer-Encoding: chunked\r\n"));
    int sent = 0;
    while (sent < 64 && c.Send(chunk)) ++sent;  // 64 MiB offered
    EXPECT_LT(sent, 64);
    const std::string response = c.ReadUntilClose();
    EXPECT_EQ(StatusOf(response), 413) << response.substr(0, 300);
    EXPECT_THAT(response, ::testing::HasSubstr("\"error\""));
  }
  EXPECT_LT(RssKb(router_) - rss_before, 200 << 10) << "KiB";
  ExpectHonestClientsServed();
}

// Row 4: a head that never ends is refused at 16 KiB or 100 fields, on both ports.
TEST_F(HostileHttpTest, EndlessHeadersAreRefusedOnBothPorts) {
  const int64_t rss_before = RssKb(router_);
  for (const int port : {http_port_, metrics_port_}) {
    for (const std::string& field : {std::string("X-A: b\r\n"), std::string(4096, 'c')}) {
      RawConnection c(port);
      c.Send("GET /health HTTP/1.1\r\n");
      // The answer comes while the head is still being sent: the server stopped at 16 KiB
      // (what was sent before is in the sockets' buffers, a few MiB on loopback).
      int sent = 0;
      while (sent < 100'000 && !c.HasReply() && c.Send(field)) ++sent;  // up to 400 MB
      EXPECT_LT(sent * field.size(), 16u << 20);
      EXPECT_EQ(StatusOf(c.ReadUntilClose()), 431) << "port " << port;
    }
  }
  EXPECT_LT(RssKb(router_) - rss_before, 32 << 10) << "KiB";
  ExpectHonestClientsServed();
}

// Row 5: a thousand ranges get the whole reply, once.
TEST_F(HostileHttpTest, RangeIsIgnoredOnBothPorts) {
  std::string ranges = "Range: bytes=0-100";
  for (int i = 0; i < 1000; ++i) absl::StrAppend(&ranges, ",0-100");
  for (const int port : {http_port_, metrics_port_}) {
    RawConnection c(port);
    c.Send(Head("GET /metrics HTTP/1.1", ranges + "\r\nConnection: close\r\n"));
    const std::string response = c.ReadUntilClose();
    EXPECT_EQ(StatusOf(response), 200);
    EXPECT_THAT(response, ::testing::Not(::testing::HasSubstr("multipart/byteranges")));
    EXPECT_LT(response.size(), 1u << 20);
  }
  ExpectHonestClientsServed();
}

// Row 6: the head has 10 s in all, however the bytes trickle in.
TEST_F(HostileHttpTest, ATrickledHeadIsCutOffPerRequestNotPerByte) {
  RawConnection c(http_port_);
  const auto start = Clock::now();
  for (int i = 0; i < 30 && c.Send("X"); ++i) {
    // A byte every 0.5 s: each recv is quick, the head never ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_TRUE(c.ClosedWithin(std::chrono::seconds(15)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(14));
}

// Row 6: slowloris heads and thousands of idle keep-alive connections cost no thread.
TEST_F(HostileHttpTest, SlowAndIdleConnectionsDoNotDelayAnHonestClient) {
  std::vector<std::unique_ptr<RawConnection>> attack;
  for (int i = 0; i < 2000; ++i) {
    auto c = std::make_unique<RawConnection>(i % 4 == 0 ? metrics_port_ : http_port_);
    ASSERT_TRUE(c->connected());
    // Half start a head they never finish, half complete a request and stay idle.
    c->Send(i % 2 == 0 ? "GET /health HTTP/1.1\r\nX-Slow: " : Head("GET /health HTTP/1.1"));
    attack.push_back(std::move(c));
  }
  ExpectHonestClientsServed(std::chrono::seconds(3));
}

// Row 7: an object with many keys is refused in one linear pass, before ordered_json sees it.
TEST_F(HostileHttpTest, ObjectsWithManyKeysAreRefusedBeforeParsing) {
  Json bias = Json::object();
  for (int i = 0; i < 200'000; ++i) bias[absl::StrCat(i)] = 1;
  const Json body = {{"prompt", "a"}, {"logit_bias", bias}};
  RawConnection c(http_port_);
  const auto start = Clock::now();
  c.Send(JsonPost("/v1/completions", body.dump()));
  const std::string response = c.ReadUntilClose();
  EXPECT_EQ(StatusOf(response), 400);
  EXPECT_THAT(response, ::testing::HasSubstr("keys"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  ExpectHonestClientsServed();
}

// Row 10: large bodies in flight share a memory budget (128 MiB); past it, 503 at once.
TEST_F(HostileHttpTest, LargeBodiesInFlightAreBoundedByMemory) {
  std::vector<std::unique_ptr<RawConnection>> held;
  int refused = 0;
  for (int i = 0; i < 10; ++i) {
    auto c = std::make_unique<RawConnection>(http_port_);
    c->Send(Head("POST /v1/completions HTTP/1.1", "Content-Length: 33554432\r\n"));
    c->Send(std::string(1 << 20, ' '));
    held.push_back(std::move(c));
  }
  for (auto& c : held) {
    if (StatusOf(c->ReadUntilClose(std::chrono::milliseconds(300))) == 503) ++refused;
  }
  EXPECT_EQ(refused, 6);
  ExpectHonestClientsServed();  // small bodies need no share of the budget
}

// Row 10: a non-streaming call whose client hangs up stops generating.
TEST_F(HostileHttpTest, AnAbandonedNonStreamingCallIsCancelled) {
  auto aborted = [&] {
    httplib::Client client("127.0.0.1", http_port_);
    httplib::Result r = client.Get("/metrics");
    const std::string series = "finished_reason=\"abort\"} ";
    const size_t at = r ? r->body.find(series) : std::string::npos;
    return at == std::string::npos ? 0.0 : std::stod(r->body.substr(at + series.size()));
  };
  const double before = aborted();
  {
    RawConnection c(http_port_);
    const Json body = {
        {"prompt", golden_[0].prompt}, {"max_tokens", 200}, {"n", 8}, {"ignore_eos", true}};
    c.Send(JsonPost("/v1/completions", body.dump()));
  }
  EXPECT_TRUE(testing::WaitUntil([&] { return aborted() >= before + 8; }, std::chrono::seconds(30),
                                 "the abandoned call's 8 sequences are aborted"));
  ExpectHonestClientsServed();
}

// Row 10 and 11: bad chat requests are 400 with a JSON body, never 500 or an exception text.
TEST_F(HostileHttpTest, MalformedChatRequestsAre400WithAJsonBody) {
  const Json numeric_type = {
      {"messages", {{{"role", "user"}, {"content", {{{"type", 1}, {"text", "a"}}}}}}}};
  Json many = {{"messages", Json::array()}};
  for (int i = 0; i < 5000; ++i) many["messages"].push_back({{"role", "user"}, {"content", "a"}});
  for (const Json& body : {numeric_type, many}) {
    RawConnection c(http_port_);
    c.Send(JsonPost("/v1/chat/completions", body.dump()));
    const std::string response = c.ReadUntilClose();
    EXPECT_EQ(StatusOf(response), 400) << response.substr(0, 400);
    EXPECT_THAT(response, ::testing::HasSubstr("\"param\":\"messages\""));
    EXPECT_THAT(response, ::testing::Not(::testing::HasSubstr("EXCEPTION")));
  }
  ExpectHonestClientsServed();
}

// Row 11: requests pipelined on one connection are all answered, in order.
TEST_F(HostileHttpTest, PipelinedRequestsAreAllAnswered) {
  RawConnection c(http_port_);
  const std::string body = Json{{"prompt", "a"}, {"max_tokens", 2}}.dump();
  c.Send(Head("GET /version HTTP/1.1") + JsonPost("/v1/completions", body, "") +
         Head("GET /health HTTP/1.1", "Connection: close\r\n"));
  const std::string response = c.ReadUntilClose();
  size_t answered = 0;
  for (size_t at = 0; (at = response.find("HTTP/1.1 200", at)) != std::string::npos; ++at) {
    ++answered;
  }
  EXPECT_EQ(answered, 3u) << response;
}

// Row 11: the Authorization scheme is case-insensitive; the key is not.
TEST_F(HostileHttpKeyTest, TheBearerSchemeIsCaseInsensitive) {
  EXPECT_EQ(HonestCompletion("bearer"), baseline_);
  EXPECT_EQ(HonestCompletion("BEARER"), baseline_);
  RawConnection c(http_port_);
  c.Send(
      "GET /v1/models HTTP/1.1\r\nAuthorization: Bearer TEST-API-KEY\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(StatusOf(c.ReadUntilClose()), 401);
}

// The load test: two honest clients keep getting their answers within 3 s each while
// slowloris heads, idle connections, trickled large bodies and header floods go on.
TEST_F(HostileHttpTest, TwoHonestClientsKeepTheirLatencyUnderAttack) {
  std::atomic<bool> stop = false;
  std::vector<std::thread> attackers;
  attackers.emplace_back([&] {  // slowloris and idle: 1500 connections, renewed as they close
    std::vector<std::unique_ptr<RawConnection>> held;
    while (!stop) {
      if (held.size() >= 1500) held.erase(held.begin(), held.begin() + 100);
      for (int i = 0; i < 100; ++i) {
        held.push_back(std::make_unique<RawConnection>(i % 5 == 0 ? metrics_port_ : http_port_));
        held.back()->Send(i % 2 ? "POST /v1/completions HTTP/1.1\r\nX: " : "");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  attackers.emplace_back([&] {  // large bodies that trickle, then header floods
    while (!stop) {
      std::vector<std::unique_ptr<RawConnection>> held;
      for (int i = 0; i < 12 && !stop; ++i) {
        held.push_back(std::make_unique<RawConnection>(http_port_));
        held.back()->Send(Head("POST /v1/completions HTTP/1.1", "Content-Length: 33554432\r\n"));
      }
      RawConnection flood(http_port_);
      flood.Send("GET / HTTP/1.1\r\n");
      for (int i = 0; i < 1000 && flood.Send("X-A: b\r\n"); ++i) {
      }
    }
  });
  // Each honest client calls for 10 s; the attackers are in full swing after the first second.
  std::vector<std::thread> honest;
  std::atomic<int> served = 0;
  const auto end = Clock::now() + std::chrono::seconds(10);
  for (int client = 0; client < 2; ++client) {
    honest.emplace_back([&] {
      while (Clock::now() < end) {
        const auto start = Clock::now();
        EXPECT_EQ(HonestCompletion(), baseline_);
        EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
        ++served;
      }
    });
  }
  for (std::thread& t : honest) t.join();
  stop = true;
  for (std::thread& t : attackers) t.join();
  EXPECT_GE(served, 10);
  ExpectHonestClientsServed();
}

// The model's whole context and a worker with room for 64 long sequences: a call's SSE output
// then outgrows loopback's socket buffers (several MB), so a client that never reads pauses.
class HostileHttpPausedCapTest : public HostileHttpTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    std::vector<std::string> flags = HostileHttpTest::ExtraRouterFlags();
    flags.push_back("--max-model-len=512");
    flags.push_back("--max-paused-per-client=32");
    return flags;
  }
  void SetUp() override {
    template_path_ = testing::TempDir() + "/chat.jinja";
    testing::WriteFile(template_path_, "{% for m in messages %}{{ m['content'] }}{% endfor %}");
    ServingTest::SetUp();
    StartWorker("", {"--kv-cache-mb=64"});
    WaitForWorkers(1);
    baseline_ = HonestCompletion();
    ASSERT_FALSE(baseline_.empty());
  }
  // pagoda_paused_cancelled_total{...,cap="client"}; -1 if absent.
  double CancelledForClient() {
    const std::string metrics = Metrics();
    const std::string name = "pagoda_paused_cancelled_total{";
    for (size_t at = metrics.find(name); at != std::string::npos; at = metrics.find(name, at + 1)) {
      const std::string line = metrics.substr(at, metrics.find('\n', at) - at);
      if (line.find("cap=\"client\"") != std::string::npos) {
        return std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return -1;
  }
};

// Row 1 over HTTP: 4 SSE calls x n = 16 from one address whose client never reads. Their
// streams pause once the sockets are full; the client's cap keeps 32 paused sequences and ends
// the 2 oldest calls, and an honest client is served meanwhile (every KV block comes back:
// TearDown).
TEST_F(HostileHttpPausedCapTest, StalledSseClientsArePausedAndCappedPerClient) {
  const std::string body =
      Json{{"prompt", golden_[0].prompt}, {"max_tokens", 400}, {"n", 16}, {"stream", true},
           {"ignore_eos", true},          {"logprobs", 5}}
          .dump();
  std::vector<std::unique_ptr<RawConnection>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<RawConnection>(http_port_, /*receive_buffer=*/4096));
    ASSERT_TRUE(stalled.back()->Send(absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: ",
        body.size(), "\r\n\r\n", body)));
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return CancelledForClient() >= 2; },
                                 std::chrono::seconds(60),
                                 "the client's cap ends its 2 oldest paused calls"));
  // The golden gRPC ids stop at the fixture's 257 tokens; here the context is 512, so the
  // honest client is the HTTP one (its 24 tokens as before the attack).
  const auto start = Clock::now();
  EXPECT_EQ(HonestCompletion(), baseline_);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(CancelledForClient(), 2);
  const double paused = ScrapeMetric("pagoda_num_requests_paused");
  EXPECT_GT(paused, 0);
  EXPECT_LE(paused, 32);
  stalled.clear();
}

}  // namespace
}  // namespace pagoda
