#include "worker/step_validator.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

// A constrained sequence's allowed tokens: one form, of the right size, not empty.
absl::Status ValidateAllowed(const ScheduledSequence& s, int vocab, int64_t step_id) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("step ", step_id, ": sequence ", s.seq_id, ": ", parts...));
  };
  if (!s.sample) return bad("a constraint without a sample");
  if (s.allowed_ids.empty() == s.allowed_mask.empty())
    return bad("a constraint needs allowed ids or a mask, not both");
  if (!s.allowed_mask.empty()) {
    const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
    if (s.allowed_mask.size() != words)
      return bad("allowed mask of ", s.allowed_mask.size(), " words; the vocabulary needs ", words);
    const int tail = vocab % 64;
    if (tail != 0 && (s.allowed_mask.back() >> tail) != 0)
      return bad("mask bits past the vocabulary");
    if (std::all_of(s.allowed_mask.begin(), s.allowed_mask.end(),
                    [](uint64_t w) { return w == 0; }))
      return bad("the mask allows no token");
    return absl::OkStatus();
  }
  int last = -1;
  for (int t : s.allowed_ids) {
    if (t <= last || t >= vocab) return bad("allowed ids must increase within [0, ", vocab, ")");
    last = t;
  }
  return absl::OkStatus();
}

}  // namespace

StepValidator::StepValidator(StepLimits limits, const LoraRegistry* loras)
    : limits_(limits), loras_(loras) {}

absl::Status StepValidator::Validate(const StepCommand& cmd,
                                     absl::flat_hash_map<int64_t, HeldSequence> known) const {
  const StepLimits& c = limits_;
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("step ", cmd.step_id, ": ", parts...));
  };
  for (const BlockCopy& copy : cmd.block_copies) {
    if (copy.src < 0 || copy.src >= c.num_blocks || copy.dst < 0 || copy.dst >= c.num_blocks) {
      return bad("block copy ", copy.src, " -> ", copy.dst, " outside the pool of ", c.num_blocks);
    }
  }
  for (int64_t id : cmd.finished_ids) known.erase(id);
  for (const NewSequence& n : cmd.new_sequences) {
    if (!known
             .emplace(n.seq_id, HeldSequence{0, static_cast<int>(n.prompt_ids.size()),
                                             n.sampling.prompt_logprobs, n.pooling, 0, n.adapter})
             .second) {
      return bad("sequence ", n.seq_id, " already exists");
    }
    for (auto ids : {&n.prompt_ids, &n.output_ids}) {
      for (int t : *ids) {
        if (t < 0 || t >= c.vocab_size)
          return bad("sequence ", n.seq_id, ": token id ", t, " out of range");
      }
    }
    if (!n.adapter.empty() && !loras_->Has(n.adapter)) {
      return bad("sequence ", n.seq_id, ": no LoRA adapter ", n.adapter.substr(0, 128),
                 " on this worker");
    }
    RETURN_IF_ERROR(n.sampling.Validate());
    RETURN_IF_ERROR(n.sampling.ValidateTokenIds(c.vocab_size));
    // Fewer than the vocabulary: min_tokens always leaves a token to sample.
    if (n.stop_ids.size() > static_cast<size_t>(kMaxStopIdsPerSequence) ||
        n.stop_ids.size() >= static_cast<size_t>(c.vocab_size)) {
      return bad("sequence ", n.seq_id, ": ", n.stop_ids.size(), " stop ids");
    }
    for (int t : n.stop_ids) {
      if (t < 0 || t >= c.vocab_size)
        return bad("sequence ", n.seq_id, ": stop id ", t, " out of range");
    }
    const int pooling = static_cast<int>(n.pooling);
    if (pooling < 0 || pooling > 2) return bad("sequence ", n.seq_id, ": pooling ", pooling);
    if (n.pooling != Pooling::kNone && (n.prompt_ids.empty() || !n.output_ids.empty())) {
      return bad("embedding sequence ", n.seq_id, " needs a prompt and no output");
    }
  }
  int64_t total = 0;
  int64_t num_logit_rows = 0;  // samples, prompt log probabilities and embedding rows
  absl::flat_hash_set<int64_t> scheduled;
  absl::flat_hash_set<absl::string_view> adapters;
  for (const ScheduledSequence& s : cmd.scheduled) {
    auto it = known.find(s.seq_id);
    if (it == known.end()) return bad("unknown sequence ", s.seq_id);
    const HeldSequence& k = it->second;
    if (!k.adapter.empty()) adapters.insert(k.adapter);
    if (!scheduled.insert(s.seq_id).second) return bad("sequence ", s.seq_id, " scheduled twice");
    if (s.token_ids.empty()) return bad("sequence ", s.seq_id, " has no tokens");
    for (int b : s.new_block_ids) {
      if (b < 0 || b >= c.num_blocks) return bad("block ", b, " outside the pool");
    }
    if (s.num_kept_blocks < 0 || s.num_kept_blocks > k.num_blocks) {
      return bad("sequence ", s.seq_id, " keeps ", s.num_kept_blocks, " of its ", k.num_blocks,
                 " blocks");
    }
    const int64_t end = static_cast<int64_t>(s.num_computed_tokens) + s.token_ids.size();
    const int64_t blocks = s.num_kept_blocks + static_cast<int64_t>(s.new_block_ids.size());
    if (s.num_computed_tokens < 0 || end > c.max_seq_len || end > blocks * c.block_size) {
      return bad("sequence ", s.seq_id, ": positions [", s.num_computed_tokens, ", ", end,
                 ") do not fit ", blocks, " blocks or the context of ", c.max_seq_len);
    }
    for (int t : s.token_ids) {
      if (t < 0 || t >= c.vocab_size)
        return bad("sequence ", s.seq_id, ": token id ", t, " out of range");
    }
    if (s.prompt_logprobs && k.prompt_logprobs < 0) {
      return bad("sequence ", s.seq_id, " asked for no prompt log probabilities");
    }
    if (k.pooling != Pooling::kNone) {
      // An embedding computes its prompt and no more; mean pooling sees every row, in order.
      if (s.sample || s.prompt_logprobs || end > k.num_prompt_tokens ||
          (k.pooling == Pooling::kMean && s.num_computed_tokens != k.num_pooled_rows)) {
        return bad("embedding sequence ", s.seq_id, ": positions [", s.num_computed_tokens, ", ",
                   end, ") of its ", k.num_prompt_tokens, ", ", k.num_pooled_rows, " pooled");
      }
      num_logit_rows +=
          k.pooling == Pooling::kMean ? s.token_ids.size() : (end == k.num_prompt_tokens ? 1 : 0);
    }
    if (s.prompt_logprobs) {
      num_logit_rows +=
          NumPromptRows(s.num_computed_tokens, static_cast<int>(end), k.num_prompt_tokens);
    }
    if (s.constrained) RETURN_IF_ERROR(ValidateAllowed(s, c.vocab_size, cmd.step_id));
    if (s.num_draft_tokens != 0) {
      // A draft is output: it follows the prompt, and it is verified by sampling, unconstrained.
      const int64_t first_draft = end - s.num_draft_tokens;
      if (s.num_draft_tokens < 0 ||
          s.num_draft_tokens >= static_cast<int64_t>(s.token_ids.size()) || !s.sample ||
          s.constrained || s.prompt_logprobs || k.pooling != Pooling::kNone ||
          first_draft < k.num_prompt_tokens) {
        return bad("sequence ", s.seq_id, ": a draft of ", s.num_draft_tokens, " of its ",
                   s.token_ids.size(), " tokens at positions from ", first_draft,
                   " (a draft follows the prompt's ", k.num_prompt_tokens,
                   " tokens and is sampled, unconstrained)");
      }
      num_logit_rows += s.num_draft_tokens;
    }
    total += s.token_ids.size();
    num_logit_rows += s.sample;
  }
  if (static_cast<int>(adapters.size()) > loras_->max_loras()) {
    return bad(adapters.size(), " LoRA adapters in one step; at most ", loras_->max_loras(),
               " (--max-loras)");
  }
  if (total > c.max_tokens) return bad(total, " tokens exceed the step limit ", c.max_tokens);
  if (num_logit_rows > c.max_logit_rows)
    return bad(num_logit_rows, " rows of logits or hidden states exceed ", c.max_logit_rows);
  return absl::OkStatus();
}

}  // namespace pagoda
