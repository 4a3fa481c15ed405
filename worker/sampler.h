// Chooses a sequence's next token from its logits. Randomness is counter-based: the uniform
// draw is a pure function of (seed, seq_index, position), so a sequence that is preempted and
// recomputed, or moved to another worker, samples exactly the same tokens.
// Not thread-safe (scratch buffers); one per worker.
#ifndef PAGODA_WORKER_SAMPLER_H_
#define PAGODA_WORKER_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/sampling_params.h"
#include "common/step.h"

namespace pagoda {

// Uniform in [0, 1) from the counter (seed, seq_index, position).
float CounterUniform(uint64_t seed, uint64_t seq_index, uint64_t position);

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  // `logits` (vocab_size) is modified in place. `prompt` and `output` are the sequence's
  // tokens so far (for penalties); the new token lands at position prompt.size() + output.size().
  // `stop_ids` cannot be sampled while output.size() < params.min_tokens.
  // `allowed` (structured output), when not empty, is a bitmask of (vocab_size + 63) / 64
  // words: only its tokens can be sampled (the others' logits are -inf before logit_bias,
  // min_tokens, penalties, temperature, top-k/p and greedy; logprobs stay the model's own).
  // REQUIRES: params.Validate() and ValidateTokenIds(vocab_size) are OK, every id in `prompt`,
  // `output` and `stop_ids` is in [0, vocab_size), and fewer than vocab_size distinct stop ids.
  SampledToken Sample(float* logits, const SamplingParams& params, std::span<const int> prompt,
                      std::span<const int> output, int seq_index,
                      std::span<const int> stop_ids = {}, std::span<const uint64_t> allowed = {});

  // Verifies a draft (speculative decoding) by sampling as decoding one token at a time would:
  // `logits` holds draft.size() + 1 rows of vocab_size, row i computed after `*tokens` and the
  // draft's first i tokens. Row by row, samples a token (seeing the tokens sampled before it),
  // appends it to `*tokens` and its report, with `seq_id`, to `*out`, and stops after the first
  // token that differs from the draft's (or after the row past the whole draft). `*tokens` is
  // the sequence's prompt (its first num_prompt_tokens) and output so far; the other arguments
  // are Sample's. Returns the draft tokens kept (the samples but the last). An empty draft
  // samples one token. REQUIRES: as Sample's.
  int VerifyDraft(float* logits, std::span<const int> draft, const SamplingParams& params,
                  int num_prompt_tokens, int seq_index, std::span<const int> stop_ids,
                  std::span<const uint64_t> allowed, int64_t seq_id, std::vector<int>* tokens,
                  std::vector<SampledToken>* out);

  // Appends to `out` the log probability of `token` under `logits` (the model's own
  // distribution: no bias, penalty or temperature), its rank (1 = the most likely; ties
  // count for it) and the `top_n` most likely tokens. REQUIRES: token in [0, vocab_size),
  // 0 <= top_n <= vocab_size.
  void AppendPromptLogprob(const float* logits, int token, int top_n, PromptLogprobs* out);

 private:
  // logit_bias, and min_tokens' mask of the stop ids.
  void ApplyBiasAndMask(float* logits, const SamplingParams& params, size_t num_output,
                        std::span<const int> stop_ids);
  // -inf for every token not in `allowed` (a bitmask; empty: no constraint).
  void ApplyAllowed(float* logits, std::span<const uint64_t> allowed) const;
  void ApplyPenalties(float* logits, const SamplingParams& params, std::span<const int> prompt,
                      std::span<const int> output);

  int vocab_size_;
  std::vector<int> counts_;      // (vocab) scratch, all zero between calls
  std::vector<float> raw_;       // (vocab) logits before penalties, for logprobs
  std::vector<float> probs_;     // (vocab) scratch
  std::vector<int> candidates_;  // (vocab) scratch
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_SAMPLER_H_
