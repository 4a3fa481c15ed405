// KV transfers between workers through real processes (issue 28): a router and workers that
// serve --kv-transfer-port on loopback. A prompt placed away from the worker that computed it
// pulls its prefix instead of computing it; a pull cut off mid-way falls back to computing,
// with the same tokens; a draining worker's running sequences move with their K/V
// and compute nothing again; a worker short of blocks hands its preempted sequences, with the
// blocks they had computed, to one with room.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

class KvTransferServingTest : public ServingTest {
 protected:
  // Round robin: the second request lands away from the first one's prefix.
  std::vector<std::string> ExtraRouterFlags() const override { return {"--placement=round_robin"}; }
  pid_t StartTransferWorker(const std::vector<std::string>& extra = {}) {
    const int port = FreePort();
    std::vector<std::string> flags = {absl::StrCat("--kv-transfer-port=", port),
                                      absl::StrCat("--advertise-address=127.0.0.1:", port)};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return StartWorker("", flags);
  }
  // A prompt of ~160 tokens: 9 or more blocks of 16 to pull.
  std::string LongPrompt() const {
    std::string prompt;
    for (int i = 0; i < 4; ++i) prompt += golden_[i % golden_.size()].prompt + " ";
    while (prompt.size() < 450) prompt += "The little dog ran to the park and played. ";
    return prompt;
  }
  // Two transfer workers; worker 0 computes LongPrompt() (round robin's first), whose output
  // it returns.
  testing::StreamOutput StartTwoWithThePrefixOnWorker0() {
    StartTransferWorker();
    WaitForWorkers(1);
    StartTransferWorker();
    WaitForWorkers(2);
    return Generate(Short(LongPrompt()));
  }
  static v1::GenerateRequest Short(const std::string& prompt) {
    v1::GenerateRequest request = testing::GreedyRequest(prompt);
    request.set_max_tokens(24);
    return request;
  }
};

TEST_F(KvTransferServingTest, APromptAwayFromItsPrefixPullsItAndGivesTheSameTokens) {
  const testing::StreamOutput first = StartTwoWithThePrefixOnWorker0();
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_blocks_total"), 0);
  const testing::StreamOutput second = Generate(Short(LongPrompt()));  // worker 1 pulls it
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.ids[0], first.ids[0]);
  EXPECT_GE(ScrapeMetric("pagoda_kv_transfer_blocks_total"), 8);
  // ... all of them into worker 1, as its own series says (the page's cluster view reads it).
  EXPECT_THAT(Metrics(), ::testing::ContainsRegex(absl::StrCat(
                             "\npagoda_worker_kv_transfer_blocks_in_total\\{[^}]*worker=\"1\"\\} ",
                             ScrapeMetric("pagoda_kv_transfer_blocks_total"), "\n")));
  EXPECT_THAT(Metrics(),
              ::testing::ContainsRegex(
                  "\npagoda_worker_kv_transfer_blocks_in_total\\{[^}]*worker=\"0\"\\} 0\n"));
  EXPECT_GE(ScrapeMetric("pagoda_kv_transfer_saved_tokens_total"), 128);
  EXPECT_GT(ScrapeMetric("pagoda_kv_transfer_bytes_total"), 0);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_failures_total"), 0);
  // The pulled blocks are worker 1's prefix cache now: a third request (worker 0 again) and a
  // fourth (worker 1) pull nothing more.
  const double blocks = ScrapeMetric("pagoda_kv_transfer_blocks_total");
  EXPECT_EQ(Generate(Short(LongPrompt())).ids[0], first.ids[0]);
  EXPECT_EQ(Generate(Short(LongPrompt())).ids[0], first.ids[0]);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_blocks_total"), blocks);
  // The golden story is still the golden story on both workers.
  ExpectGoldenStory();
  ExpectGoldenStory();
}

TEST_F(KvTransferServingTest, APullCutOffMidWayComputesTheSameTokens) {
  // The holder advertises a port the test holds: the pull's connection lands here, and the
  // test cuts it while the pull waits for its blocks.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  StartWorker("", {absl::StrCat("--kv-transfer-port=", FreePort()),
                   absl::StrCat("--advertise-address=127.0.0.1:", ntohs(addr.sin_port))});
  WaitForWorkers(1);  // worker 0, the holder
  StartTransferWorker();
  WaitForWorkers(2);
  const testing::StreamOutput first = Generate(Short(LongPrompt()));  // worker 0 computes it
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  testing::StreamOutput second;
  std::thread client([&] { second = Generate(Short(LongPrompt())); });  // worker 1 pulls
  pollfd pending{.fd = listener, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&pending, 1, 30000), 1) << "worker 1 never dialled the holder";
  const int connection = accept(listener, nullptr, nullptr);
  EXPECT_GE(connection, 0);
  close(listener);  // no second try gets in
  close(connection);
  client.join();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.ids[0], first.ids[0]);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_failures_total"), 1);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_blocks_total"), 0);
  ExpectGoldenStory();
  ExpectGoldenStory();
}

TEST_F(KvTransferServingTest, ASharedPrefixIsComputedOnceForThreeWorkers) {
  for (int i = 0; i < 3; ++i) {
    StartTransferWorker();
    WaitForWorkers(i + 1);
  }
  // Three requests at once, one per worker (round robin), sharing ~160 tokens: worker 0
  // computes the prefix, the others wait for it and pull it.
  const std::vector<std::string> endings = {"Then it rained.", "A cat came by.", "Mom smiled."};
  std::vector<testing::StreamOutput> outputs(3);
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] { outputs[i] = Generate(Short(LongPrompt() + endings[i])); });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_GE(ScrapeMetric("pagoda_prefix_cache_hits_total"), 2 * 128);
  EXPECT_GE(ScrapeMetric("pagoda_kv_transfer_blocks_total"), 2 * 8);
  // The same tokens as each prompt alone.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << outputs[i].status.error_message();
    EXPECT_EQ(Generate(Short(LongPrompt() + endings[i])).ids[0], outputs[i].ids[0]);
  }
}

TEST_F(KvTransferServingTest, ConcurrentRequestsForAPrefixOnOneWorkerPullItOnce) {
  const testing::StreamOutput first = StartTwoWithThePrefixOnWorker0();
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  // Twelve at once, round robin: six land on worker 1, which pulls the prefix for the first of
  // them; the others wait for that pull instead of pulling it again.
  std::vector<std::string> endings;
  for (char c = 'A'; c < 'A' + 12; ++c) endings.push_back(std::string(1, c));
  std::vector<testing::StreamOutput> outputs(endings.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < endings.size(); ++i) {
    clients.emplace_back([&, i] { outputs[i] = Generate(Short(LongPrompt() + endings[i])); });
  }
  for (std::thread& t : clients) t.join();
  for (const testing::StreamOutput& out : outputs) {
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  }
  const double blocks = ScrapeMetric("pagoda_kv_transfer_blocks_total");
  EXPECT_GE(blocks, 8);
  EXPECT_LE(blocks, 11) << "the ~160-token prefix (10 blocks) moved once";
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_failures_total"), 0);
  for (size_t i = 0; i < endings.size(); ++i) {
    EXPECT_EQ(Generate(Short(LongPrompt() + endings[i])).ids[0], outputs[i].ids[0]) << i;
  }
}

TEST_F(KvTransferServingTest, ADrainingWorkerMovesItsSequencesWithTheirKv) {
  StartTransferWorker();
  const pid_t victim = StartTransferWorker();
  WaitForWorkers(2);
  const double recomputed_before = ScrapeMetric("pagoda_recomputed_tokens_total");
  ExpectNoTokenLostWhen([&] { kill(victim, SIGTERM); });
  EXPECT_EQ(ExitCode(victim), 0);
  const std::string router_log = testing::ReadFile(dir_ + "/router.log");
  EXPECT_THAT(router_log,
              ::testing::ContainsRegex("worker [0-9]+ is draining with [1-9][0-9]* sequences"))
      << "the drain must start with streams in flight there";
  EXPECT_GT(ScrapeMetric("pagoda_kv_migrated_sequences_total"), 0);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_failures_total"), 0);
  // Nothing a moved sequence had computed is computed again (nor anything else: the pool is
  // large enough that nothing is preempted).
  EXPECT_EQ(ScrapeMetric("pagoda_recomputed_tokens_total"), recomputed_before);
  EXPECT_THAT(router_log, HasSubstr("tokens of K/V"));
  WaitForWorkers(1);
  ExpectGoldenStory();
}

TEST_F(KvTransferServingTest, APreemptedSequenceResumesOnAWorkerWithRoom) {
  // Worker 0's pool holds 3 of the 32 streams' 512-token contexts: it preempts all along.
  // Worker 1, with room, joins mid-way; worker 0's preempted sequences move there with the
  // blocks they had computed, and every stream still gets its own tokens.
  StartTransferWorker({"--num-kv-blocks=96"});
  WaitForWorkers(1);
  ExpectNoTokenLostWhen([&] { StartTransferWorker(); });
  EXPECT_GT(ScrapeMetric("pagoda_num_preemptions_total"), 0);
  const std::string router_log = testing::ReadFile(dir_ + "/router.log");
  EXPECT_THAT(router_log, ::testing::ContainsRegex("moving preempted request [0-9]+/0 from worker "
                                                   "0 to 1 with [1-9][0-9]* tokens of K/V"));
  EXPECT_GT(ScrapeMetric("pagoda_kv_migrated_sequences_total"), 0);
  EXPECT_GT(ScrapeMetric("pagoda_kv_transfer_saved_tokens_total"), 0);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_failures_total"), 0);
  ExpectGoldenStory();
}

class KvTransferOffTest : public KvTransferServingTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--placement=round_robin", "--kv-transfer=false"};
  }
};

TEST_F(KvTransferOffTest, WorkersComputeWhatTheyLack) {
  StartTransferWorker();
  StartTransferWorker();
  WaitForWorkers(2);
  const testing::StreamOutput first = Generate(Short(LongPrompt()));
  const testing::StreamOutput second = Generate(Short(LongPrompt()));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.ids[0], first.ids[0]);
  EXPECT_EQ(ScrapeMetric("pagoda_kv_transfer_blocks_total"), 0);
}

}  // namespace
}  // namespace pagoda
