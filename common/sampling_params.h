// How a sequence's next token is chosen. Validated by the router before a request is queued.
#ifndef PAGODA_COMMON_SAMPLING_PARAMS_H_
#define PAGODA_COMMON_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pagoda {

// A bias added to one token's logit before sampling (OpenAI's logit_bias).
struct LogitBias {
  int token_id = 0;  // in [0, vocab)
  float bias = 0;    // [-kMaxLogitBias, kMaxLogitBias]: -100 bans the token, +100 forces it
};

inline constexpr float kMaxLogitBias = 100;
// Biased tokens per request at most (the HTTP API's JSON bound of keys per object, too).
inline constexpr int kMaxLogitBiasEntries = 1024;

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy; otherwise >= 0 and finite
  float top_p = 1.0f;               // (0, 1]; 1 = off
  int top_k = 0;                    // 0 = off; else keep the k most likely
  float min_p = 0.0f;               // [0, 1]; drop tokens below min_p * p(most likely)
  float repetition_penalty = 1.0f;  // > 0; 1 = off (prompt and output tokens, HF style)
  float presence_penalty = 0.0f;    // [-2, 2]; subtracted once per token seen in the output
  float frequency_penalty = 0.0f;   // [-2, 2]; subtracted per occurrence in the output
  uint64_t seed = 0;                // counter-based sampling: same seed, same tokens
  int logprobs = 0;                 // how many top alternatives to report per token (0..20)
  // -1: none. Else each prompt token's log probability (the first's excepted) is reported
  // with this many top alternatives (0..20), computed in the prefill (vLLM's prompt_logprobs).
  int prompt_logprobs = -1;
  // >= 0: the tokens that would end the sequence (EOS unless ignore_eos, and stop_token_ids;
  // not stop strings) cannot be sampled until this many tokens are out.
  int min_tokens = 0;
  // Added to the logits before penalties, temperature, top-k/p and greedy's argmax; token ids
  // strictly increasing, at most kMaxLogitBiasEntries.
  std::vector<LogitBias> logit_bias;

  bool greedy() const { return temperature == 0.0f; }
  // INVALID_ARGUMENT naming the first bad field. Token ids are only checked to be >= 0:
  // ValidateTokenIds knows the vocabulary.
  absl::Status Validate() const;
  // INVALID_ARGUMENT naming logit_bias when one of its ids is outside [0, vocab_size).
  absl::Status ValidateTokenIds(int vocab_size) const;
};

constexpr int kMaxLogprobs = 20;

// A fresh seed for a request that gave none (as vLLM, TGI and llama.cpp draw one), so that
// sampled answers differ between calls unless a seed is asked for. Below 2^53, so a client
// that reads JSON numbers as doubles can send it back exactly. Thread-safe.
uint64_t RandomSeed();

// The sampling fields a client may leave unset (as the API's `optional` fields): unset ones
// come from the model's generation_config.json (temperature, top_p, top_k), else the defaults
// above.
struct SamplingOverrides {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;
  std::optional<float> repetition_penalty;
  std::optional<uint64_t> seed;  // unset: the router draws one
};

}  // namespace pagoda

#endif  // PAGODA_COMMON_SAMPLING_PARAMS_H_
