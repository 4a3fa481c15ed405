// The scheduler's part of speculative decoding (router/speculative.h): drafts added to a step
// that is already scheduled, and what the worker kept of them.
#include <algorithm>

#include "router/scheduler.h"

namespace pagoda {

void Scheduler::AddDrafts(int budget, int logit_budget, StepCommand* cmd) {
  // Past max_speculative_step_tokens the step is compute-bound: a draft token would cost what
  // a token of another sequence costs, and pays only when it is kept.
  int room = std::min(
      options_.max_speculative_step_tokens - (options_.max_num_batched_tokens - budget), budget);
  for (size_t i = 0; i < last_step_.size() && room > 0 && logit_budget > 0; ++i) {
    Scheduled& step = last_step_[i];
    Sequence* seq = step.seq;
    // Decoding one token, unconstrained (a grammar's mask depends on the tokens before it),
    // past its first output token and its forks.
    if (!step.sample || step.num_tokens != 1 || step.prompt_logprobs || seq->matcher.has_value() ||
        seq->num_output_tokens() < 1 || seq->num_pending_forks > 0 ||
        seq->num_computed_tokens + 1 != seq->num_tokens()) {
      continue;
    }
    // Every draft token may be kept, with one more after it: max_tokens and the model length
    // bound the draft as they bound the output.
    const int wanted = seq->acceptance.ChooseK(options_.num_speculative_tokens);
    if (wanted == 0) {
      seq->acceptance.Record(0, 0);  // (counts toward its next probe)
      continue;
    }
    const int k =
        std::min({wanted, room, logit_budget, seq->max_tokens - seq->num_output_tokens() - 1,
                  seq->max_total_tokens - seq->num_tokens() - 1});
    if (k <= 0) continue;
    draft_.clear();
    const int n = std::min(options_.proposer->Propose(seq->tokens, k, &draft_), k);
    if (n <= 0) continue;
    const int begin = seq->num_computed_tokens, end = begin + 1 + n;
    if (!kv_.CanAppend(seq->id, begin, end)) continue;  // a draft never preempts
    kv_.Append(seq->id, begin, end, &cmd->block_copies);
    ScheduledSequence& out = cmd->scheduled[i];  // Emit added both in the same order
    out.token_ids.insert(out.token_ids.end(), draft_.begin(), draft_.begin() + n);
    out.num_draft_tokens = n;
    const std::vector<int>& table = kv_.block_table(seq->id);
    out.new_block_ids.assign(table.begin() + out.num_kept_blocks, table.end());
    seq->num_synced_blocks = static_cast<int>(table.size());
    step.num_tokens += n;
    step.num_draft = n;
    room -= n;
    logit_budget -= n;
  }
}

void Scheduler::SettleDraft(Sequence* seq, int num_draft, int num_kept) {
  ++spec_stats_.num_drafts;
  spec_stats_.num_draft_tokens += num_draft;
  spec_stats_.num_accepted_tokens += num_kept;
  if (static_cast<int>(spec_stats_.accepted_per_position.size()) < num_draft) {
    spec_stats_.accepted_per_position.resize(num_draft, 0);
  }
  for (int i = 0; i < num_kept; ++i) ++spec_stats_.accepted_per_position[i];
  seq->acceptance.Record(num_draft, num_kept);
  if (num_kept < num_draft) {
    kv_.Truncate(seq->id, seq->num_computed_tokens);
    seq->num_synced_blocks = std::min<int>(seq->num_synced_blocks, kv_.block_table(seq->id).size());
  }
}

}  // namespace pagoda
