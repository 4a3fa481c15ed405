#include "router/core/step_record.h"

#include <algorithm>

#include "glog/logging.h"
#include "router/core/constraint.h"

namespace pagoda {

void StepRecord::Emit(Sequence* seq, int num_new_tokens, int first_changed_block,
                      const std::vector<int>& table, StepCommand* cmd) {
  if (!seq->on_worker) {
    cmd->new_sequences.push_back(
        {.seq_id = seq->id,
         .sampling = seq->sampling,
         .seq_index = seq->seq_index,
         .prompt_ids =
             std::vector<int>(seq->tokens.begin(), seq->tokens.begin() + seq->num_prompt_tokens),
         .output_ids =
             std::vector<int>(seq->tokens.begin() + seq->num_prompt_tokens, seq->tokens.end()),
         // The worker masks them until min_tokens are out, also when it recomputes the
         // sequence after a preemption or a failover: the output so far comes along.
         .stop_ids = seq->sampling.min_tokens > seq->num_output_tokens() ? seq->stop_token_ids
                                                                         : std::vector<int>(),
         .pooling = seq->pooling,
         .salted = seq->salted,
         .adapter = seq->adapter});
    seq->on_worker = true;
    seq->num_synced_blocks = 0;
  }
  const int kept = std::min(seq->num_synced_blocks, first_changed_block);
  ScheduledSequence s;
  s.seq_id = seq->id;
  s.token_ids.assign(seq->tokens.begin() + seq->num_computed_tokens,
                     seq->tokens.begin() + seq->num_computed_tokens + num_new_tokens);
  s.num_computed_tokens = seq->num_computed_tokens;
  s.num_kept_blocks = kept;
  s.new_block_ids.assign(table.begin() + kept, table.end());
  const int end = seq->num_computed_tokens + num_new_tokens;
  s.sample = end == seq->num_tokens() && seq->pooling == Pooling::kNone;
  s.prompt_logprobs =
      seq->wants_prompt_logprobs() && seq->num_computed_tokens < seq->num_prompt_tokens - 1;
  if (s.sample && seq->matcher.has_value()) {
    s.constrained = true;
    // On failure its sample is dropped and it ends (Scheduler::Postprocess).
    if (!FillStepAllowed(*seq->constraint, *seq->matcher, seq->id, &mask_, &s.allowed_ids,
                         &s.allowed_mask)) {
      seq->constraint_failed = true;
    }
  }
  seq->num_synced_blocks = static_cast<int>(table.size());
  entries_.push_back({seq, num_new_tokens, s.sample, s.prompt_logprobs});
  cmd->scheduled.push_back(std::move(s));
}

void StepRecord::Forget(const Sequence* seq) {
  std::erase_if(entries_, [&](const Entry& e) { return e.seq == seq; });
}

const PromptLogprobs& StepRecord::Reader::PromptLogprobsOf(const Entry& entry) {
  const auto& all = result_.prompt_logprobs;
  while (next_prompt_ < all.size() && all[next_prompt_].seq_id != entry.seq->id) ++next_prompt_;
  CHECK_LT(next_prompt_, all.size())
      << "step " << result_.step_id << " has no prompt logprobs for sequence " << entry.seq->id;
  return all[next_prompt_++];
}

std::span<const SampledToken> StepRecord::Reader::SamplesOf(const Entry& entry) {
  const auto& all = result_.sampled;
  const int64_t id = entry.seq->id;
  while (next_sample_ < all.size() && all[next_sample_].seq_id != id) ++next_sample_;
  CHECK_LT(next_sample_, all.size())
      << "step " << result_.step_id << " has no sample for sequence " << id;
  // A draft's in a row: at most its size + 1.
  size_t end = next_sample_ + 1;
  while (end < all.size() && end - next_sample_ <= static_cast<size_t>(entry.num_draft) &&
         all[end].seq_id == id) {
    ++end;
  }
  std::span<const SampledToken> samples = std::span(all).subspan(next_sample_, end - next_sample_);
  next_sample_ = end;
  return samples;
}

const std::vector<float>& StepRecord::Reader::EmbeddingOf(const Sequence& seq) {
  const auto& all = result_.embeddings;
  while (next_embedding_ < all.size() && all[next_embedding_].seq_id != seq.id) {
    ++next_embedding_;
  }
  CHECK_LT(next_embedding_, all.size())
      << "step " << result_.step_id << " has no embedding for sequence " << seq.id;
  return all[next_embedding_++].values;
}

}  // namespace pagoda
