// StageAssembler (issue 40): stages wait until their ranges tile the model, then leave together
// in layer order; what is missing meanwhile is said by layer range; a stage that leaves no
// longer counts; spare and overlapping stages wait for a group of their own.
#include "router/core/stage_assembler.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

class RangeStage final : public Executor {
 public:
  RangeStage(int begin, int end) {
    info_.layer_begin = begin;
    info_.layer_end = end;
  }
  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand&) override { return StepResult(); }

 private:
  WorkerInfo info_;
};

std::shared_ptr<Executor> Stage(int begin, int end) {
  return std::make_shared<RangeStage>(begin, end);
}

std::vector<std::pair<int, int>> Ranges(const std::vector<std::shared_ptr<Executor>>& group) {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : group) out.push_back({s->info().layer_begin, s->info().layer_end});
  return out;
}

TEST(StageAssemblerTest, StagesLeaveTogetherOnceTheyTileTheModel) {
  StageAssembler a(8);
  EXPECT_EQ(a.Missing(), "0:8");
  EXPECT_EQ(a.NumMissing(), 0) << "no stage waits: nothing is missing";
  EXPECT_TRUE(a.Join(Stage(5, 8)).empty());
  EXPECT_EQ(a.Missing(), "0:5");
  EXPECT_EQ(a.NumMissing(), 5);
  EXPECT_TRUE(a.Join(Stage(0, 2)).empty());
  EXPECT_EQ(a.Missing(), "2:5");
  EXPECT_EQ(a.NumMissing(), 3);
  EXPECT_EQ(a.num_waiting(), 2);
  const std::vector<std::shared_ptr<Executor>> group = a.Join(Stage(2, 5));
  EXPECT_EQ(Ranges(group), (std::vector<std::pair<int, int>>{{0, 2}, {2, 5}, {5, 8}}));
  EXPECT_EQ(a.num_waiting(), 0);
  EXPECT_EQ(a.Missing(), "0:8");
  EXPECT_EQ(a.NumMissing(), 0);
}

TEST(StageAssemblerTest, ALeavingStageNoLongerCountsAndSparesWait) {
  StageAssembler a(6);
  std::shared_ptr<Executor> first = Stage(0, 3);
  EXPECT_TRUE(a.Join(first).empty());
  a.Leave(first.get());
  EXPECT_EQ(a.Missing(), "0:6");
  EXPECT_TRUE(a.Join(Stage(3, 6)).empty()) << "its first half left";
  // Overlapping ranges (0:4 and 3:6) do not tile; a spare 0:3 joins the 3:6 and 0:4 waits.
  EXPECT_TRUE(a.Join(Stage(0, 4)).empty());
  EXPECT_EQ(a.Missing(), "");
  EXPECT_EQ(Ranges(a.Join(Stage(0, 3))), (std::vector<std::pair<int, int>>{{0, 3}, {3, 6}}));
  EXPECT_EQ(a.num_waiting(), 1);
  EXPECT_EQ(a.Missing(), "4:6");
}

}  // namespace
}  // namespace pagoda
