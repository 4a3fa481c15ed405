// Issue 40 through real processes on loopback: pagoda-worker --layers=A:B runs a pipeline stage
// of stories260K (5 layers); the router serves the stages whose ranges tile the model as one
// group (a worker per micro-batch slice: one per stage here, the pools being large enough), and
// their activations go worker to worker on the transfer ports. 2 and 3 stages give
// run.c's greedy tokens and a whole worker's seeded ones; a stage killed mid-stream loses no
// request and changes no token (its group's sequences move to a whole worker); a stage of
// another model, or of layers the model does not have, is refused.
#include <signal.h>

#include "absl/strings/match.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

class StageServingTest : public ServingTest {
 protected:
  pid_t StartStage(const std::string& layers, const std::string& model = "") {
    return StartWorker(model, {"--layers=" + layers, "--kv-transfer-port=-1"});
  }
  void WaitForRouterLog(const std::string& text) {
    testing::WaitUntil(
        [&] { return absl::StrContains(testing::ReadFile(dir_ + "/router.log"), text); },
        std::chrono::seconds(60), absl::StrCat("the router's log says \"", text, "\"; see ", dir_),
        std::chrono::milliseconds(50));
  }
  std::vector<std::vector<int>> SeededRuns() {
    std::vector<std::vector<int>> out;
    for (int i = 0; i < 3; ++i) {
      const testing::StreamOutput o = Generate(testing::SeededRequest(golden_[i].prompt, 500 + i));
      EXPECT_TRUE(o.status.ok()) << o.status.error_message();
      out.push_back(o.status.ok() ? o.ids[0] : std::vector<int>());
    }
    return out;
  }
};

TEST_F(StageServingTest, TwoStagesServeAsOneGroup) {
  const pid_t last = StartStage("2:5");
  WaitForRouterLog("waits for the stages of layers 0:2");
  EXPECT_EQ(Info().num_workers(), 0) << "half a model serves nothing";
  EXPECT_EQ(ScrapeMetric("pagoda_stages_waiting"), 1);
  EXPECT_EQ(ScrapeMetric("pagoda_stage_missing_layers"), 2);
  const pid_t first = StartStage("0:2");
  WaitForWorkers(2);  // its two slices
  WaitForRouterLog("serve as workers 0, 1 (2 micro-batch slices)");
  EXPECT_EQ(ScrapeMetric("pagoda_stage_missing_layers"), 0);
  for (const testing::GoldenCase& g : golden_) {
    const testing::StreamOutput out = Generate(Greedy(g.prompt));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.ids[0], g.greedy_ids) << g.prompt;
  }
  // The stages reported their steps: stage 0 sent activations (dim 64 floats a token), and
  // stage 1 waited for them.
  const std::string metrics = Metrics();
  EXPECT_GT(ScrapeMetric("pagoda_stage_sent_bytes_total"), 64 * 4 * golden_.size()) << metrics;
  EXPECT_THAT(metrics, ::testing::ContainsRegex(
                           "pagoda_stage_wait_seconds_count\\{[^}]*stage=\"1\"\\} [1-9]"));
  const std::vector<std::vector<int>> staged = SeededRuns();

  // The same seeded requests on one whole worker, once the stages are gone.
  StartWorker();
  WaitForWorkers(3);
  Kill(first);
  Kill(last);
  std::erase(workers_, first);
  std::erase(workers_, last);
  WaitForWorkers(1);
  EXPECT_EQ(SeededRuns(), staged);
}

TEST_F(StageServingTest, AStageKilledMidStreamLosesNoToken) {
  StartStage("0:1");
  const pid_t middle = StartStage("1:3");
  StartStage("3:5");
  WaitForWorkers(3);  // its three slices
  StartWorker();      // a whole worker beside the group: another replica
  WaitForWorkers(4);
  ExpectNoTokenLostWhen([&] { kill(middle, SIGKILL); });
  // The group (workers 0-2: its stages joined first) had sequences, and they moved.
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"),
              ::testing::ContainsRegex("moving the sequences of worker [012]"));
  // The group left; its two stages left alive wait for the middle one.
  WaitForWorkers(1);
  WaitForRouterLog("waits for the stages of layers 1:3");
}

TEST_F(StageServingTest, StagesOfAnotherModelOrLayersItLacksAreRefused) {
  // How a worker started with `flags` ends, and its log.
  const auto refused = [&](const std::string& model, const std::vector<std::string>& flags) {
    const std::string log = absl::StrCat(dir_, "/worker", workers_.size(), ".log");
    const int code = ExitCode(StartWorker(model, flags));
    return std::make_pair(code, testing::ReadFile(log));
  };
  // llama.cpp's conversion of the same weights: another fingerprint.
  auto [code, log] = refused(testing::SharedPath("models/stories260K-gguf/stories260K.gguf"),
                             {"--layers=0:2", "--kv-transfer-port=-1"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(log, ::testing::HasSubstr("router refused this worker"));
  EXPECT_THAT(log, ::testing::HasSubstr("different model"));
  // Layers stories260K does not have: the worker refuses to load.
  std::tie(code, log) = refused("", {"--layers=3:9", "--kv-transfer-port=-1"});
  EXPECT_EQ(code, 1);
  EXPECT_THAT(log, ::testing::HasSubstr("layers 3:9 are not within the model's 5 layers"));
  // A stage without the transfer port its activations need: refused before loading.
  std::tie(code, log) = refused("", {"--layers=0:2"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(log, ::testing::HasSubstr("--layers needs --kv-transfer-port"));
  std::tie(code, log) = refused("", {"--layers=2-4", "--kv-transfer-port=-1"});
  EXPECT_EQ(code, 2);
  EXPECT_THAT(log, ::testing::HasSubstr("--layers \"2-4\" must be A:B"));
  EXPECT_EQ(Info().num_workers(), 0);
}

}  // namespace
}  // namespace pagoda
