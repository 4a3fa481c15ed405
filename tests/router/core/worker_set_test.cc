// The Cluster's members: counts, the planner's snapshot and the stats over live and dead ones.
#include "router/core/worker_set.h"

#include <chrono>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

class SilentListener final : public WorkerLoopListener {
 public:
  void OnUpdates(int, const std::vector<SequenceUpdate>&) override {}
  void OnRefused(int, int64_t) override {}
  void OnFailed(int) override {}
};

class WorkerSetTest : public ::testing::Test {
 protected:
  void SetUp() override { config_ = testing::Stories260KConfig(); }
  void AddWorker(int num_blocks) {
    workers_.Add(std::make_unique<WorkerLoop>(workers_.next_id(), testing::NewWorker(num_blocks),
                                              config_, EngineOptions{}, /*metrics=*/nullptr,
                                              &listener_));
  }

  ModelConfig config_;
  SilentListener listener_;
  WorkerSet workers_;  // after the listener: its loops stop first
};

TEST_F(WorkerSetTest, CountsLiveWorkersAndKeepsDeadOnesByTheirIds) {
  AddWorker(/*num_blocks=*/64);
  AddWorker(/*num_blocks=*/32);
  EXPECT_EQ(workers_.next_id(), 2);
  EXPECT_TRUE(workers_.contains(1));
  EXPECT_FALSE(workers_.contains(2));
  EXPECT_FALSE(workers_.contains(-1));
  EXPECT_EQ(workers_.NumLive(), 2);
  EXPECT_EQ(workers_.NumLiveBlocks(), 96);
  EXPECT_EQ(workers_.Live().size(), 2u);

  workers_[0].alive = false;
  workers_[0].loop->Stop();
  ASSERT_TRUE(testing::WaitUntil([&] { return workers_[0].loop->exited(); },
                                 std::chrono::seconds(10), "the loop exits"));
  workers_.Reap();
  EXPECT_TRUE(workers_[0].joined);
  EXPECT_EQ(workers_.NumLive(), 1);
  EXPECT_EQ(workers_.NumLiveBlocks(), 32);
  ASSERT_EQ(workers_.Live().size(), 1u);
  EXPECT_EQ(workers_.Live()[0].first, 1);
  EXPECT_EQ(workers_.Loops().size(), 2u);  // the dead one's counters still count

  const TransferSnapshot s = workers_.Snapshot(/*loras=*/nullptr);
  ASSERT_EQ(s.workers.size(), 2u);
  EXPECT_FALSE(s.workers[0].alive);
  EXPECT_TRUE(s.workers[1].alive);
  EXPECT_EQ(s.workers[1].info->num_blocks, 32);

  const std::vector<WorkerStats> stats = workers_.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].id, 1);
  EXPECT_EQ(stats[0].num_blocks, 32);
  ClusterStats totals;
  workers_.AddTo(&totals);
  EXPECT_EQ(totals.num_workers, 1);
  EXPECT_EQ(totals.num_blocks, 32);
}

TEST_F(WorkerSetTest, ADrainingWorkerTakesNoNewRequests) {
  AddWorker(/*num_blocks=*/16);
  EXPECT_TRUE(workers_.AnyAccepting());
  workers_[0].draining = true;
  EXPECT_FALSE(workers_.AnyAccepting());
  ClusterStats totals;
  workers_.AddTo(&totals);
  EXPECT_EQ(totals.num_draining_workers, 1);
  EXPECT_TRUE(workers_.Stats()[0].draining);
  AddWorker(/*num_blocks=*/16);
  EXPECT_TRUE(workers_.AnyAccepting());
}

}  // namespace
}  // namespace pagoda
