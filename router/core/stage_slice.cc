#include "router/core/stage_slice.h"

#include <algorithm>
#include <utility>

namespace pagoda {

std::vector<std::shared_ptr<StageSlice>> StageSlice::Split(std::shared_ptr<StageGroup> group,
                                                           int min_tokens) {
  const WorkerInfo& info = group->info();
  int n = std::max(1, group->num_stages());
  while (n > 1 && int64_t{info.num_blocks / n} * info.block_size < min_tokens) --n;
  std::vector<std::shared_ptr<StageSlice>> slices;
  for (int i = 0, first = 0; i < n; ++i) {
    const int share = info.num_blocks / n + (i < info.num_blocks % n ? 1 : 0);
    slices.push_back(std::shared_ptr<StageSlice>(new StageSlice(group, i, n, first, share)));
    first += share;
  }
  return slices;
}

StageSlice::StageSlice(std::shared_ptr<StageGroup> group, int index, int num_slices,
                       int first_block, int num_blocks)
    : group_(std::move(group)),
      index_(index),
      num_slices_(num_slices),
      first_block_(first_block),
      info_(group_->info()) {
  info_.num_blocks = num_blocks;
}

absl::StatusOr<StepResult> StageSlice::Execute(const StepCommand& command) {
  // Each id n of this slice's Engine becomes n · S + index at the stages, which hold every
  // slice's sequences and steps; blocks move into this slice's share.
  const auto out = [this](int64_t id) { return id * num_slices_ + index_; };
  StepCommand step = command;
  step.step_id = out(command.step_id);
  for (int64_t& id : step.finished_ids) id = out(id);
  for (NewSequence& n : step.new_sequences) n.seq_id = out(n.seq_id);
  for (ScheduledSequence& s : step.scheduled) {
    s.seq_id = out(s.seq_id);
    for (int& b : s.new_block_ids) b += first_block_;
  }
  for (BlockCopy& c : step.block_copies) {
    c.src += first_block_;
    c.dst += first_block_;
  }
  for (BlockPull& p : step.pulls) {
    for (int& b : p.dst_block_ids) b += first_block_;
  }
  absl::StatusOr<StepResult> result = group_->Execute(step);
  if (!result.ok()) return result;
  const auto back = [this](int64_t id) { return (id - index_) / num_slices_; };
  result->step_id = command.step_id;
  for (SampledToken& t : result->sampled) t.seq_id = back(t.seq_id);
  for (PromptLogprobs& p : result->prompt_logprobs) p.seq_id = back(p.seq_id);
  for (Embedding& e : result->embeddings) e.seq_id = back(e.seq_id);
  return result;
}

absl::StatusOr<AdapterInfo> StageSlice::ChangeAdapter(const AdapterChange& change) {
  absl::StatusOr<AdapterInfo> answer = group_->ChangeAdapter(change);
  if (!answer.ok()) return answer;
  std::erase_if(info_.adapters, [&change](const AdapterInfo& a) { return a.name == change.name; });
  if (!change.path.empty()) info_.adapters.push_back(*answer);
  return answer;
}

}  // namespace pagoda
