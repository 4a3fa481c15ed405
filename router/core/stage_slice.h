// One micro-batch slice of a pipeline stage group (issue 40 item 3; vLLM's "virtual engines"):
// the Cluster runs each slice of a group as a worker of its own, with its own loop, scheduler
// and a disjoint share of the group's KV blocks, so a group of S slices has up to S steps in
// flight, each over its own sequences: while the last stage computes one slice's step, the
// first computes the next slice's (StageGroup keeps each stage's calls in order). One stream
// alone runs on one slice and cannot overlap.
//
// A slice shows the Cluster blocks [0, share) and offsets them into its share of the stages'
// pools (new block ids, copy-on-write copies, pulls). Its Engine numbers steps and sequences
// from 0 as every Engine does, while the stages hold every slice's: the slice maps each id n
// to n · S + i (i its index) on the way out and back on the way in, so the stages' mailboxes
// (activations by step id) and sequence tables never mix two slices. A slice failing fails the
// group: every slice's next step fails and the group leaves whole.
#ifndef PAGODA_ROUTER_CORE_STAGE_SLICE_H_
#define PAGODA_ROUTER_CORE_STAGE_SLICE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/executor.h"
#include "router/core/stage_group.h"

namespace pagoda {

class StageSlice final : public Executor {
 public:
  // Slices for `group`: as many as it has stages, fewer where a slice's share of the blocks
  // would hold fewer than `min_tokens` tokens (a sequence of the longest length the router
  // takes must fit one slice), at least 1. Shares differ by one block at most.
  static std::vector<std::shared_ptr<StageSlice>> Split(std::shared_ptr<StageGroup> group,
                                                        int min_tokens);

  const WorkerInfo& info() const override { return info_; }
  absl::StatusOr<StepResult> Execute(const StepCommand& command) override;
  // The group's change (idempotent: every slice asks), kept in this slice's info().
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override;
  void Abandon() override { group_->Abandon(); }

  int index() const { return index_; }
  int first_block() const { return first_block_; }

 private:
  StageSlice(std::shared_ptr<StageGroup> group, int index, int num_slices, int first_block,
             int num_blocks);

  const std::shared_ptr<StageGroup> group_;
  const int index_, num_slices_, first_block_;
  WorkerInfo info_;  // the group's, with this slice's share of the blocks
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STAGE_SLICE_H_
