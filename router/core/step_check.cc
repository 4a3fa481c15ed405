#include "router/core/step_check.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

// The prefill's reports: prompt log probabilities exactly for the chunks that asked, one per
// row before the prompt's last, each a log probability with a rank in [1, vocab] and the
// sequence's number of alternatives; an embedding of the model's dim, finite, for each
// embedding sequence whose prompt the step completed. A sequence aborted since (null) is
// checked only for shape.
absl::Status CheckPromptResults(const StepCommand& command, const StepResult& result,
                                int vocab_size, int dim,
                                const std::function<const Sequence*(int64_t)>& sequence_of) {
  auto broken = [&](auto&&... parts) {
    return absl::InternalError(
        absl::StrCat("worker sent ", parts..., " in step ", command.step_id));
  };
  size_t next_prompt = 0, next_embedding = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    const Sequence* seq = sequence_of(s.seq_id);
    const int end = s.num_computed_tokens + static_cast<int>(s.token_ids.size());
    if (seq != nullptr && seq->pooling != Pooling::kNone && end == seq->num_prompt_tokens) {
      if (next_embedding >= result.embeddings.size() ||
          result.embeddings[next_embedding].seq_id != s.seq_id) {
        return broken("no embedding for sequence ", s.seq_id);
      }
    }
    if (next_embedding < result.embeddings.size() &&
        result.embeddings[next_embedding].seq_id == s.seq_id) {
      const std::vector<float>& v = result.embeddings[next_embedding++].values;
      if (static_cast<int>(v.size()) != dim ||
          !absl::c_all_of(v, [](float x) { return std::isfinite(x); })) {
        return broken("an embedding of ", v.size(), " values (or not finite) for ", s.seq_id);
      }
    }
    if (!s.prompt_logprobs) continue;
    const int rows =
        seq == nullptr
            ? -1
            : std::max(0, std::min(end, seq->num_prompt_tokens - 1) - s.num_computed_tokens);
    if (rows == 0) continue;
    if (next_prompt >= result.prompt_logprobs.size() ||
        result.prompt_logprobs[next_prompt].seq_id != s.seq_id) {
      if (rows < 0) continue;  // aborted: it may have sent none
      return broken("no prompt logprobs for sequence ", s.seq_id);
    }
    const PromptLogprobs& p = result.prompt_logprobs[next_prompt++];
    const size_t n = p.logprobs.size();
    const size_t top_n =
        seq == nullptr ? (n == 0 ? 0 : p.top.size() / n) : seq->sampling.prompt_logprobs;
    if (p.first_position != s.num_computed_tokens + 1 ||
        (rows >= 0 ? n != static_cast<size_t>(rows) : n > s.token_ids.size()) ||
        p.ranks.size() != n || p.top.size() != n * top_n) {
      return broken("prompt logprobs of the wrong shape for sequence ", s.seq_id);
    }
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(p.logprobs[i]) || p.ranks[i] < 1 || p.ranks[i] > vocab_size) {
        return broken("prompt logprob ", p.logprobs[i], " of rank ", p.ranks[i]);
      }
    }
    for (const TokenLogprob& top : p.top) {
      if (top.token_id < 0 || top.token_id >= vocab_size || !std::isfinite(top.logprob)) {
        return broken("prompt top logprob ", top.logprob, " of token ", top.token_id);
      }
    }
  }
  if (next_prompt != result.prompt_logprobs.size() || next_embedding != result.embeddings.size()) {
    return broken("unrequested prompt logprobs or embeddings");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckStepResult(const StepCommand& command, const StepResult& result, int vocab_size,
                             int dim, const std::function<const Sequence*(int64_t)>& sequence_of) {
  auto broken = [&](auto&&... parts) {
    return absl::InternalError(
        absl::StrCat("worker sent ", parts..., " in step ", command.step_id));
  };
  if (result.step_id != command.step_id) {
    return absl::InternalError(
        absl::StrCat("worker answered step ", result.step_id, " to step ", command.step_id));
  }
  if (!std::isfinite(result.forward_seconds) || result.forward_seconds < 0) {
    return broken("forward_seconds = ", result.forward_seconds);
  }
  auto in_vocab = [vocab_size](int id) { return id >= 0 && id < vocab_size; };
  size_t next = 0;
  for (const ScheduledSequence& s : command.scheduled) {
    if (!s.sample) continue;
    if (next >= result.sampled.size() || result.sampled[next].seq_id != s.seq_id) {
      return broken("no sample for sequence ", s.seq_id);
    }
    // With a draft: the draft tokens the worker kept, then the first token that differs (or the
    // one after the whole draft).
    const std::span<const int> draft = std::span(s.token_ids).last(s.num_draft_tokens);
    const Sequence* seq = sequence_of(s.seq_id);
    for (size_t i = 0; i <= draft.size(); ++i) {
      if (i > 0 && (next >= result.sampled.size() || result.sampled[next].seq_id != s.seq_id)) {
        if (result.sampled[next - 1].token_id == draft[i - 1]) {
          return broken("no sample after draft token ", i - 1, " of sequence ", s.seq_id,
                        ", which matched");
        }
        break;
      }
      if (i > 0 && result.sampled[next - 1].token_id != draft[i - 1]) {
        return broken("a sample after draft token ", i - 1, " of sequence ", s.seq_id,
                      ", which did not match");
      }
      const SampledToken& sampled = result.sampled[next++];
      if (!in_vocab(sampled.token_id)) {
        return broken("token ", sampled.token_id, " outside the vocabulary");
      }
      if (!std::isfinite(sampled.logprob)) return broken("logprob ", sampled.logprob);
      const int logprobs = seq == nullptr ? 0 : seq->sampling.logprobs;
      if (static_cast<int>(sampled.top_logprobs.size()) > logprobs) {
        return broken(sampled.top_logprobs.size(), " top logprobs for sequence ", s.seq_id,
                      ", which asked for ", logprobs);
      }
      const int num_output = seq == nullptr ? 0 : seq->num_output_tokens() + static_cast<int>(i);
      if (seq != nullptr && num_output < seq->sampling.min_tokens &&
          absl::c_linear_search(seq->stop_token_ids, sampled.token_id)) {
        return broken("stop token ", sampled.token_id, " for sequence ", s.seq_id, " after ",
                      num_output, " of its min_tokens ", seq->sampling.min_tokens);
      }
      for (const TokenLogprob& top : sampled.top_logprobs) {
        if (!in_vocab(top.token_id) || !std::isfinite(top.logprob)) {
          return broken("top logprob ", top.logprob, " of token ", top.token_id);
        }
      }
    }
  }
  if (next != result.sampled.size()) {
    return broken(result.sampled.size() - next, " unrequested samples");
  }
  return CheckPromptResults(command, result, vocab_size, dim, sequence_of);
}

}  // namespace pagoda
