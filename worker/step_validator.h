// What a worker checks of a StepCommand before it changes anything: the router is trusted with
// scheduling, not with the worker's memory. Every block id inside the pool, every sequence known
// (or new, once), positions that fit its blocks and the context, token ids in the vocabulary,
// a constraint's mask well formed, drafts only after the prompt, embeddings computing their
// prompt and no more, at most max_loras adapters, and the step's tokens and logit rows within
// the model's buffers. INVALID_ARGUMENT "step N: ..." naming what is wrong.
//
//   StepValidator check(limits, &registry);
//   RETURN_IF_ERROR(check.Validate(command, sequences_before_the_step));
#ifndef PAGODA_WORKER_STEP_VALIDATOR_H_
#define PAGODA_WORKER_STEP_VALIDATOR_H_

#include <algorithm>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/step.h"
#include "worker/lora_registry.h"

namespace pagoda {

// Rows of a chunk at positions [begin, end) whose logits give prompt log probabilities.
inline int NumPromptRows(int begin, int end, int num_prompt_tokens) {
  return std::max(0, std::min(end, num_prompt_tokens - 1) - begin);
}

// What the check needs of a sequence the worker holds. `adapter` points into the worker's own
// state, which outlives the call.
struct HeldSequence {
  int num_blocks = 0;
  int num_prompt_tokens = 0;
  int prompt_logprobs = -1;
  Pooling pooling = Pooling::kNone;
  int num_pooled_rows = 0;
  absl::string_view adapter;  // "": the base model
};

struct StepLimits {
  int vocab_size = 0;
  int max_seq_len = 0;
  int num_blocks = 0;  // the pool's
  int block_size = 0;
  int64_t max_tokens = 0;      // a step's rows at most
  int64_t max_logit_rows = 0;  // samples, prompt log probabilities and embedding rows
};

class StepValidator {
 public:
  // `loras` (not owned) says which adapters exist and how many a step may hold.
  StepValidator(StepLimits limits, const LoraRegistry* loras);

  // OK when `cmd` can run against the sequences `held` (by id, as before the step).
  absl::Status Validate(const StepCommand& cmd,
                        absl::flat_hash_map<int64_t, HeldSequence> held) const;

 private:
  const StepLimits limits_;
  const LoraRegistry* const loras_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_STEP_VALIDATOR_H_
