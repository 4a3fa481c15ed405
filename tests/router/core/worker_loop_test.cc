// One worker's loop with an in-process worker and a listener that records what it hears.
#include "router/core/worker_loop.h"

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

class RecordingListener final : public WorkerLoopListener {
 public:
  void OnUpdates(int, const std::vector<SequenceUpdate>& updates) override {
    absl::MutexLock lock(&mu_);
    for (const SequenceUpdate& u : updates) {
      request_ids_.push_back(u.request_id);
      tokens_.insert(tokens_.end(), u.token_ids.begin(), u.token_ids.end());
      num_finished_ += u.finished;
    }
  }
  void OnRefused(int, int64_t request_id) override {
    absl::MutexLock lock(&mu_);
    refused_.push_back(request_id);
  }
  void OnFailed(int) override {
    absl::MutexLock lock(&mu_);
    ++num_failed_;
  }

  std::vector<int64_t> request_ids() {
    absl::MutexLock lock(&mu_);
    return request_ids_;
  }
  std::vector<int> tokens() {
    absl::MutexLock lock(&mu_);
    return tokens_;
  }
  int num_finished() {
    absl::MutexLock lock(&mu_);
    return num_finished_;
  }
  std::vector<int64_t> refused() {
    absl::MutexLock lock(&mu_);
    return refused_;
  }
  int num_failed() {
    absl::MutexLock lock(&mu_);
    return num_failed_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int64_t> request_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<int> tokens_ ABSL_GUARDED_BY(mu_);
  int num_finished_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> refused_ ABSL_GUARDED_BY(mu_);
  int num_failed_ ABSL_GUARDED_BY(mu_) = 0;
};

class WorkerLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = testing::LoadGoldenCases();
    config_ = testing::Stories260KConfig();
    options_.max_model_len = 257;
  }

  std::unique_ptr<WorkerLoop> Start(std::shared_ptr<Executor> executor) {
    return std::make_unique<WorkerLoop>(/*id=*/3, std::move(executor), config_, options_,
                                        /*metrics=*/nullptr, &listener_);
  }
  QueuedRequest Greedy(int64_t id, const std::vector<int>& prompt) {
    QueuedRequest q{.request_id = id, .request = {}, .pull = std::nullopt};
    q.request.prompt_ids = prompt;
    q.request.sampling.temperature = 0;
    return q;
  }

  std::vector<testing::GoldenCase> golden_;
  ModelConfig config_;
  EngineOptions options_;
  RecordingListener listener_;
};

TEST_F(WorkerLoopTest, ARequestRunsToItsEndAndReportsTheRoutersId) {
  auto loop = Start(testing::NewWorker());
  loop->Add(Greedy(77, golden_[1].prompt_ids));
  ASSERT_TRUE(testing::WaitUntil([&] { return listener_.num_finished() == 1; },
                                 std::chrono::seconds(60), "finished"));
  EXPECT_EQ(listener_.tokens(), golden_[1].greedy_ids);
  for (int64_t id : listener_.request_ids()) EXPECT_EQ(id, 77);
  EXPECT_TRUE(testing::WaitUntil([&] { return loop->load().num_used_blocks == 0; },
                                 std::chrono::seconds(10), "its blocks are free"));
  EXPECT_GT(loop->load().num_steps, 0);
}

TEST_F(WorkerLoopTest, ARequestItsPoolCannotHoldIsRefusedAndTheLoopGoesOn) {
  auto loop = Start(testing::NewWorker(/*num_blocks=*/4));  // 64 tokens
  QueuedRequest big = Greedy(1, golden_[0].prompt_ids);
  big.request.max_tokens = 100;
  loop->Add(big);
  QueuedRequest small = Greedy(2, {1, 5, 6});
  small.request.max_tokens = 8;
  loop->Add(small);
  ASSERT_TRUE(testing::WaitUntil([&] { return listener_.num_finished() == 1; },
                                 std::chrono::seconds(60), "finished"));
  EXPECT_EQ(listener_.refused(), std::vector<int64_t>{1});
  for (int64_t id : listener_.request_ids()) EXPECT_EQ(id, 2);
}

TEST_F(WorkerLoopTest, AFailedStepIsReportedOnceAndEndsTheLoop) {
  auto loop = Start(std::make_shared<testing::FailingExecutor>(testing::NewWorker()));
  loop->Add(Greedy(1, golden_[0].prompt_ids));
  ASSERT_TRUE(testing::WaitUntil([&] { return loop->exited(); }, std::chrono::seconds(30),
                                 "the loop exited"));
  EXPECT_EQ(listener_.num_failed(), 1);
  EXPECT_TRUE(listener_.request_ids().empty());
  EXPECT_EQ(loop->load().num_waiting, 0) << "an ended loop holds nothing";
  loop->Add(Greedy(2, golden_[0].prompt_ids));
  EXPECT_EQ(loop->TakeQueued().size(), 1u) << "what comes late is there to take back";
  loop->Join();
}

TEST_F(WorkerLoopTest, AbortEndsASequenceAndFreesItsBlocks) {
  auto loop = Start(testing::NewWorker());
  QueuedRequest endless = Greedy(5, golden_[0].prompt_ids);
  endless.request.ignore_eos = true;
  loop->Add(endless);
  ASSERT_TRUE(testing::WaitUntil([&] { return listener_.tokens().size() >= 10; },
                                 std::chrono::seconds(60), "10 tokens came"));
  loop->Abort(5);
  ASSERT_TRUE(testing::WaitUntil([&] { return loop->load().num_used_blocks == 0; },
                                 std::chrono::seconds(30), "its blocks are free"));
  EXPECT_EQ(loop->load().num_running, 0);
  EXPECT_EQ(listener_.num_finished(), 0) << "an aborted sequence reports nothing more";
}

TEST_F(WorkerLoopTest, RequestsQueuedBehindARunningStepCountAsWaitingAndCanBeTakenBack) {
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorker());
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };  // even when a check fails
  auto loop = Start(gate);
  loop->Add(Greedy(1, golden_[0].prompt_ids));
  gate->WaitEntered(1);  // the loop is inside a step: it takes nothing new meanwhile
  loop->Add(Greedy(2, golden_[1].prompt_ids));
  loop->Add(Greedy(3, golden_[2].prompt_ids));
  EXPECT_EQ(loop->load().num_waiting, 2);
  std::deque<QueuedRequest> taken = loop->TakeQueued();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].request_id, 2);
  EXPECT_EQ(loop->load().num_waiting, 0);
  std::move(open_gate).Invoke();
  ASSERT_TRUE(testing::WaitUntil([&] { return listener_.num_finished() == 1; },
                                 std::chrono::seconds(60), "finished"));
  for (int64_t id : listener_.request_ids()) EXPECT_EQ(id, 1);
}

TEST_F(WorkerLoopTest, ARequestAbortedBeforeTheLoopTakesItNeverRuns) {
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorker());
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };  // even when a check fails
  auto loop = Start(gate);
  loop->Add(Greedy(1, golden_[0].prompt_ids));
  gate->WaitEntered(1);  // the loop is inside a step: request 2 stays in its inbox
  loop->Add(Greedy(2, golden_[1].prompt_ids));
  loop->Abort(2);
  EXPECT_EQ(loop->load().num_waiting, 0);
  std::move(open_gate).Invoke();
  ASSERT_TRUE(testing::WaitUntil([&] { return listener_.num_finished() == 1; },
                                 std::chrono::seconds(60), "request 1 finished"));
  ASSERT_TRUE(testing::WaitUntil([&] { return loop->load().num_used_blocks == 0; },
                                 std::chrono::seconds(30), "every block is free"));
  for (int64_t id : listener_.request_ids()) EXPECT_EQ(id, 1) << "request 2 ran";
}

TEST_F(WorkerLoopTest, DrainRunsItsCallbackOnceTheWorkerHoldsNothing) {
  auto gate = std::make_shared<testing::GatedExecutor>(testing::NewWorker());
  absl::Cleanup open_gate = [gate] { gate->Allow(1 << 20); };
  auto loop = Start(gate);
  loop->Add(Greedy(1, golden_[1].prompt_ids));
  gate->WaitEntered(1);
  absl::Notification drained;
  loop->Drain([&] { drained.Notify(); });
  EXPECT_FALSE(drained.HasBeenNotified()) << "it still runs a request";
  std::move(open_gate).Invoke();
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(listener_.num_finished(), 1) << "what it held finished first";
}

}  // namespace
}  // namespace pagoda
