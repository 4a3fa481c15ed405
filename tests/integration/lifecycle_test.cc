// Health probes and stopping without losing a request: drained workers, drains that run out
// of time, a router stopped with SIGTERM.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using testing::CheckHealth;
using ::testing::HasSubstr;
using testing::kNotServing;
using testing::kServing;
using testing::WaitForHealth;

TEST_F(ServingTest, ProbesTellLivenessFromReadiness) {
  const std::string router = absl::StrCat("127.0.0.1:", port_);
  WaitForWorkers(0);
  // A router with no worker is alive but not ready.
  EXPECT_EQ(CheckHealth(router, "liveness"), kServing);
  EXPECT_EQ(CheckHealth(router, ""), kNotServing);
  EXPECT_EQ(CheckHealth(router, "pagoda.v1.Generation"), kNotServing);

  const std::string worker = absl::StrCat("127.0.0.1:", FreePort());
  StartWorker("", {"--health-port=" + worker.substr(worker.find(':') + 1)});
  WaitForWorkers(1);
  ASSERT_TRUE(WaitForHealth(worker, "", kServing));
  EXPECT_EQ(CheckHealth(worker, "liveness"), kServing);
  EXPECT_EQ(CheckHealth(router, ""), kServing);
  EXPECT_EQ(CheckHealth(router, "pagoda.v1.Generation"), kServing);

  // Without its router the worker is alive but not ready; it is again once one is back.
  Kill(router_);
  ASSERT_TRUE(WaitForHealth(worker, "", kNotServing));
  EXPECT_EQ(CheckHealth(worker, "liveness"), kServing);
  StartRouter();
  WaitForWorkers(1);
  EXPECT_TRUE(WaitForHealth(worker, "", kServing));
}

TEST_F(ServingTest, ADrainedWorkerFinishesItsStreamsAndExits) {
  StartWorker();
  const pid_t victim = StartWorker();
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGTERM); });
  EXPECT_EQ(ExitCode(victim), 0);
  const std::string log = testing::ReadFile(absl::StrCat(dir_, "/worker1.log"));
  EXPECT_THAT(log, HasSubstr("drained; leaving the router"));
  const std::string router_log = testing::ReadFile(dir_ + "/router.log");
  EXPECT_THAT(router_log,
              ::testing::ContainsRegex("worker [0-9]+ is draining with [1-9][0-9]* sequences"))
      << "the drain must start with streams in flight there";
  EXPECT_THAT(router_log, ::testing::Not(HasSubstr("moving")))
      << "a drained worker's sequences finish where they are";
  WaitForWorkers(1);
  EXPECT_EQ(Generate(Greedy(golden_[1].prompt)).ids[0], golden_[1].greedy_ids);
}

TEST_F(ServingTest, AWorkerWithoutItsRouterStopsAtOnceOnSigterm) {
  const std::string health = absl::StrCat("127.0.0.1:", FreePort());
  const pid_t pid = StartWorker("", {absl::StrCat("--router=127.0.0.1:", FreePort()),
                                     "--health-port=" + health.substr(health.find(':') + 1)});
  ASSERT_TRUE(WaitForHealth(health, "liveness", kServing));  // loaded, dialing nobody
  EXPECT_EQ(CheckHealth(health, ""), kNotServing);
  kill(pid, SIGTERM);
  EXPECT_EQ(ExitCode(pid), 0);
}

TEST_F(ServingTest, ADrainThatRunsOutOfTimeMovesItsSequences) {
  StartWorker();
  const pid_t victim = StartWorker("", {"--drain-timeout-s=0"});
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGTERM); });
  EXPECT_EQ(ExitCode(victim), 0);
  EXPECT_THAT(testing::ReadFile(absl::StrCat(dir_, "/worker1.log")), HasSubstr("drain timed out"));
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("moving the sequences of worker"));
  WaitForWorkers(1);
}

TEST_F(ServingTest, ARouterStoppedWithSigtermFinishesItsStreams) {
  StartWorker();
  WaitForWorkers(1);
  std::vector<testing::StreamOutput> outputs(16);
  std::vector<std::thread> clients;
  std::atomic<bool> stopped{false};
  std::atomic<int> streaming{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      // SIGTERM once every call has its first token: all 16 are in flight (or done), none is
      // still to be made (a call made after it is refused, as it should be).
      outputs[i] =
          Generate(Greedy(golden_[i % golden_.size()].prompt), 1, [&](grpc::ClientContext&) {
            if (streaming.fetch_add(1) + 1 == 16 && !stopped.exchange(true)) {
              kill(router_, SIGTERM);
            }
          });
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_TRUE(stopped);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << i << ": " << outputs[i].status.error_message();
    EXPECT_EQ(outputs[i].ids[0], golden_[i % golden_.size()].greedy_ids) << i;
  }
  EXPECT_EQ(ExitCode(router_), 0);
  router_ = -1;
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("refusing new calls"));
  // Gone: a new call fails instead of hanging.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ModelInfo info;
  EXPECT_EQ(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace pagoda
