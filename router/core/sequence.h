// One output sequence of a request (a request with n samples has n of them), as the scheduler
// tracks it: waiting → running (prefill, then decode) → finished. Which of these it is, is
// which of the scheduler's lists holds it.
#ifndef PAGODA_ROUTER_CORE_SEQUENCE_H_
#define PAGODA_ROUTER_CORE_SEQUENCE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/sampling_params.h"
#include "common/step.h"
#include "lib/grammar/grammar_matcher.h"
#include "router/core/constraint.h"
#include "router/spec/acceptance.h"

namespace pagoda {

enum class FinishReason { kNone, kStop, kLength, kAbort };

// A partial block a sequence moved here with its K/V brought (issue 28): its tokens
// [index · block size, + num_tokens) are in held block `block`, after the `index` full blocks
// the pull cached; admission takes it into the sequence's table.
struct PulledTail {
  int block = -1;
  int index = 0;
  int num_tokens = 0;
};

const char* FinishReasonName(FinishReason reason);  // "stop", "length", "abort", ""

struct Sequence {
  // Constant after creation.
  int64_t id = 0;
  int64_t request_id = 0;
  int seq_index = 0;  // which of the request's n samples (the RNG counter uses it)
  int num_prompt_tokens = 0;
  SamplingParams sampling;
  int max_tokens = 0;                // output tokens at most
  int max_total_tokens = 0;          // prompt + output at most (the model length)
  std::vector<int> stop_token_ids;   // sampling one ends the sequence (EOS unless ignore_eos)
  Pooling pooling = Pooling::kNone;  // not kNone: an embedding, which never samples
  // Set by the transport while the client is not reading: the sequence is not scheduled (and
  // is preempted first when KV is short). Shared by the request's sequences; may be null.
  std::shared_ptr<const std::atomic<bool>> paused;
  // The parent of its first block's hash (GenerationRequest::prefix_root), and whether a
  // cache_salt chose it: a salted sequence's blocks are never offered to another router.
  uint64_t prefix_root = 0;
  bool salted = false;
  std::string adapter;  // its LoRA adapter (GenerationRequest::adapter); empty: the base
  // Structured output (router/core/constraint.h): null without one.
  std::shared_ptr<const Constraint> constraint;

  // Progress.
  std::vector<int> tokens;      // prompt then output
  int num_computed_tokens = 0;  // tokens whose K/V are in the cache
  int num_cached_tokens = 0;    // prefix-cache hit at first admission
  int num_pending_forks = 0;    // n - 1 until this sequence forks its siblings
  FinishReason finish_reason = FinishReason::kNone;
  bool admitted_once = false;
  bool paused_this_step = false;  // is_paused() when the current step was scheduled
  // The grammar's state after the output tokens (set with `constraint`; a fork copies it).
  std::optional<GrammarMatcher> matcher;
  bool constraint_failed = false;  // its mask failed (limits passed): ends without a token
  std::chrono::steady_clock::time_point added_at;  // Scheduler::Add
  AcceptanceStats acceptance;                      // of its drafts: how long the next one should be
  double queue_seconds = -1;                       // Add to first admission, once known

  // Chained hashes of its leading full blocks (HashBlock), extended as the scheduler asks;
  // seeded with the prompt's when the request brought them (GenerationRequest).
  std::vector<uint64_t> block_hashes;

  // The prompt's log probabilities gathered so far (sampling.prompt_logprobs >= 0), from
  // position 1 on; handed to the first update that samples.
  PromptLogprobs prompt_logprobs;

  // KV transfers (issue 28): moved here with its K/V, until admission takes it.
  std::optional<PulledTail> pulled_tail;
  // The most tokens it ever had computed (here, before a preemption, or on another worker):
  // computing below that again is recompute (Scheduler::num_recomputed_tokens).
  int computed_high_water = 0;
  // Waiting after a preemption here: another worker with room may take it over with the
  // blocks it had computed (Scheduler::DetachPreempted).
  bool preempted = false;

  // What the worker knows about it.
  bool on_worker = false;     // the worker holds its state (NewSequence sent)
  int num_synced_blocks = 0;  // leading block-table entries the worker has

  bool is_paused() const { return paused && paused->load(std::memory_order_relaxed); }
  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Whether its next prefill chunks must return prompt log probabilities: asked for, nothing
  // sampled yet (they go with the first token), and not all gathered (a fork, or a sequence
  // preempted after its prefill, has them already).
  bool wants_prompt_logprobs() const {
    return sampling.prompt_logprobs >= 0 && num_output_tokens() == 0 &&
           static_cast<int>(prompt_logprobs.logprobs.size()) < num_prompt_tokens - 1;
  }
  // Whether every row of its chunks needs a logit or hidden row in the worker (else at most
  // the last one does): these never start from cached blocks.
  bool needs_every_row() const { return wants_prompt_logprobs() || pooling == Pooling::kMean; }
  // The tokens it must compute before it can sample (or fork, while forks are pending).
  int target_tokens() const { return num_pending_forks > 0 ? num_prompt_tokens - 1 : num_tokens(); }
  // Whether its one-token decode may carry a draft: unconstrained (a grammar's mask depends on
  // the tokens before it), past its first output token and its forks, and caught up.
  bool may_draft() const {
    return !matcher.has_value() && num_output_tokens() >= 1 && num_pending_forks == 0 &&
           num_computed_tokens + 1 == num_tokens();
  }
  // Draft tokens it may take: each may be kept, with one more after it, so max_tokens and the
  // model length bound a draft as they bound the output.
  int max_draft_tokens() const {
    return std::min(max_tokens - num_output_tokens() - 1, max_total_tokens - num_tokens() - 1);
  }
  // Its `f`-th fork (1 ... num_pending_forks): a copy with id + f and seq_index + f that forks
  // nothing more and that the worker has not seen yet.
  std::unique_ptr<Sequence> Fork(int f) const;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_SEQUENCE_H_
