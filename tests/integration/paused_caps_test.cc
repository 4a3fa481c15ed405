// Issue 23, row 1's caps: a client that opens many calls and reads none holds at most
// --max-paused-per-connection paused sequences per connection and --max-paused-per-client over
// its connections; past a cap its oldest paused calls are cancelled. A real router on loopback;
// honest clients get their golden tokens meanwhile, and every KV block comes back (TearDown).
#include <future>
#include <string>
#include <vector>

#include "tests/integration/hostile_fixture.h"

namespace pagoda {
namespace {

class PausedCapsTest : public HostileGrpcTest {
 protected:
  // The value of the series of family `name` whose labels hold `label`; -1 if absent.
  double ScrapeSeries(const std::string& name, const std::string& label) {
    const std::string metrics = Metrics();
    for (size_t at = metrics.find(name + "{"); at != std::string::npos;
         at = metrics.find(name + "{", at + 1)) {
      const size_t end = metrics.find('\n', at);
      const std::string line = metrics.substr(at, end - at);
      if ((at != 0 && metrics[at - 1] != '\n') || line.find(label) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }
  double Cancelled(const std::string& cap) {
    return ScrapeSeries("pagoda_paused_cancelled_total", absl::StrCat("cap=\"", cap, "\""));
  }

  // Two honest clients, three calls each: every one gets its golden tokens.
  void ExpectHonestClientsServed() {
    auto honest = [&](int client) {
      for (int i = 0; i < 3; ++i) {
        const testing::GoldenCase& c = golden_[(client + i) % golden_.size()];
        const testing::StreamOutput out = Generate(Greedy(c.prompt));
        EXPECT_TRUE(out.status.ok()) << out.status.error_message();
        if (out.status.ok()) {
          EXPECT_EQ(out.ids[0], c.greedy_ids) << c.prompt;
        }
      }
    };
    auto a = std::async(std::launch::async, honest, 0);
    auto b = std::async(std::launch::async, honest, 1);
    a.get();
    b.get();
  }

  static void End(Stalled& stalled) {
    for (auto& context : stalled.contexts) context->TryCancel();
    for (auto& reader : stalled.readers) reader->Finish();
  }
};

class PausedPerConnectionTest : public PausedCapsTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--max-paused-per-connection=64", "--max-paused-per-client=0"};
  }
};

// 12 calls x n = 16 on one connection that never reads: 64 paused sequences (4 calls) stay,
// the 8 oldest paused calls are cancelled and their KV freed.
TEST_F(PausedPerConnectionTest, TheOldestPausedCallsOfAConnectionPastItsCapAreCancelled) {
  StartWorker();
  WaitForWorkers(1);
  Stalled stalled = StartStalledReaders(12, 16);
  testing::WaitUntil([&] { return Cancelled("connection") >= 8; }, std::chrono::seconds(30),
                     "the cap cancels the 8 oldest paused calls");
  ExpectHonestClientsServed();
  EXPECT_EQ(Cancelled("connection"), 8);
  EXPECT_EQ(Cancelled("client"), 0);
  const double paused = ScrapeMetric("pagoda_num_requests_paused");
  Report("paused_sequences_on_the_connection", static_cast<int64_t>(paused));
  EXPECT_GT(paused, 0);
  EXPECT_LE(paused, 64);
  End(stalled);
}

class PausedPerClientTest : public PausedCapsTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--max-paused-per-connection=0", "--max-paused-per-client=128"};
  }
};

// Two connections of one client (one address), 5 calls x n = 16 each: 128 paused sequences
// stay over both, the 2 oldest paused calls are cancelled.
TEST_F(PausedPerClientTest, TheCapOfAClientCountsAllItsConnections) {
  StartWorker();
  WaitForWorkers(1);
  Stalled first = StartStalledReaders(5, 16);
  Stalled second = StartStalledReaders(5, 16);
  testing::WaitUntil([&] { return Cancelled("client") >= 2; }, std::chrono::seconds(30),
                     "the cap cancels the 2 oldest paused calls");
  ExpectHonestClientsServed();
  EXPECT_EQ(Cancelled("client"), 2);
  EXPECT_EQ(Cancelled("connection"), 0);
  EXPECT_LE(ScrapeMetric("pagoda_num_requests_paused"), 128);
  End(first);
  End(second);
}

// A paused sequence asks for no work: a client whose paused calls outnumber --max-waiting
// does not make the router refuse anyone else's request.
class PausedNotWaitingTest : public PausedCapsTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--max-waiting=32", "--max-num-seqs=16"};
  }
};

TEST_F(PausedNotWaitingTest, PausedSequencesDoNotCountTowardMaxWaiting) {
  StartWorker();
  WaitForWorkers(1);
  Stalled stalled = StartStalledReaders(4, 16);  // 64 paused, at most 16 running
  ExpectHonestClientsServed();
  EXPECT_LE(ScrapeMetric("pagoda_num_requests_waiting"), 32);
  End(stalled);
}

}  // namespace
}  // namespace pagoda
