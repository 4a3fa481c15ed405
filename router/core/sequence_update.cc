#include "router/core/sequence_update.h"

#include <algorithm>
#include <cstddef>

#include "absl/algorithm/container.h"
#include "router/core/constraint.h"

namespace pagoda {

void GatherPromptLogprobs(const PromptLogprobs& in, Sequence* seq) {
  PromptLogprobs& all = seq->prompt_logprobs;
  const int have = static_cast<int>(all.logprobs.size());
  const int top_n = std::max(seq->sampling.prompt_logprobs, 0);
  const int skip = all.first_position + have - in.first_position;  // entries we have
  if (skip < 0) return;  // a gap: cannot happen, chunks come in order
  for (int i = skip; i < static_cast<int>(in.logprobs.size()); ++i) {
    all.logprobs.push_back(in.logprobs[i]);
    all.ranks.push_back(in.ranks[i]);
    all.top.insert(all.top.end(), in.top.begin() + static_cast<ptrdiff_t>(i) * top_n,
                   in.top.begin() + static_cast<ptrdiff_t>(i + 1) * top_n);
  }
}

FinishReason AppendSampled(std::span<const SampledToken> samples, Sequence* seq,
                           SequenceUpdate* u) {
  if (seq->max_tokens == 0) {
    return FinishReason::kLength;  // the prompt only (its log probabilities): no token kept
  }
  if (seq->constraint_failed) {
    return FinishReason::kStop;  // what it output so far is all the grammar let it say
  }
  for (const SampledToken& sampled : samples) {
    seq->tokens.push_back(sampled.token_id);
    u->token_ids.push_back(sampled.token_id);
    u->samples.push_back(sampled);
    const GrammarEnd end =
        seq->matcher.has_value() && !seq->constraint_failed
            ? AdvanceGrammar(*seq->constraint, *seq->matcher, sampled.token_id, seq->id)
            : GrammarEnd::kNo;
    if (end != GrammarEnd::kNo || absl::c_linear_search(seq->stop_token_ids, sampled.token_id)) {
      u->grammar_complete = end == GrammarEnd::kComplete;
      return FinishReason::kStop;
    }
    if (seq->num_output_tokens() >= seq->max_tokens || seq->num_tokens() >= seq->max_total_tokens) {
      // A constrained output is cut here too (finish_reason "length", as OpenAI does).
      return FinishReason::kLength;
    }
  }
  return FinishReason::kNone;
}

}  // namespace pagoda
