// Speculative decoding through real processes: a router drafting for two workers, a worker
// killed mid-stream, and the tokens are those of decoding without drafts (run.c's for greedy,
// the same seeds' for sampled); the spec_decode metrics move. Bad flags stop the router at
// start with a message naming them.
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

class SpeculativeServingTest : public ServingTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--speculative=suffix", "--num-speculative-tokens=4"};
  }
};

TEST_F(SpeculativeServingTest, KillingAWorkerMidStreamWithDraftsLosesNoToken) {
  StartWorker();
  const pid_t victim = StartWorker();
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGKILL); });
  WaitForWorkers(1);
  ExpectGoldenStory();
  EXPECT_GT(ScrapeMetric("pagoda_spec_decode_num_drafts_total"), 0);
  const double drafted = ScrapeMetric("pagoda_spec_decode_num_draft_tokens_total");
  const double kept = ScrapeMetric("pagoda_spec_decode_num_accepted_tokens_total");
  EXPECT_GT(kept, 0);
  EXPECT_LE(kept, drafted);
  EXPECT_GT(ScrapeMetric("pagoda_spec_decode_num_accepted_tokens_per_pos_total"), 0);
  WaitForNoUsedBlocks();
}

TEST(SpeculativeFlagsTest, BadFlagsStopTheRouterNamingThem) {
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--speculative=draft-model", "--speculative=draft-model is not supported"},
           {"--speculative=eagle", "--speculative=eagle"},
           {"--num-speculative-tokens=0", "--num-speculative-tokens=0"},
           {"--speculative-max-step-tokens=1", "--speculative-max-step-tokens=1"}}) {
    const std::string log = testing::TempDir() + "/router.log";
    const pid_t router =
        Spawn({testing::BinaryPath("pagoda-router"), "--model=" + testing::Stories260KModel(),
               "--tokenizer=" + testing::Stories260KTokenizer(), "--port=0", "--worker-port=0",
               "--http-port=0", "--speculative=ngram", flag},
              log);
    int status = 0;
    ASSERT_EQ(waitpid(router, &status, 0), router);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << flag;
    EXPECT_THAT(testing::ReadFile(log), ::testing::HasSubstr(message)) << flag;
  }
}

}  // namespace
}  // namespace pagoda
