#include "common/sampling_params.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::Status SamplingParams::Validate() const {
  auto bad = [](const char* field, auto value, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(field, " = ", value, ": must be ", want));
  };
  if (!std::isfinite(temperature) || temperature < 0) {
    return bad("temperature", temperature, "finite and >= 0");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "in (0, 1]");
  if (top_k < 0) return bad("top_k", top_k, ">= 0");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", min_p, "in [0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return bad("repetition_penalty", repetition_penalty, "finite and > 0");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return bad("presence_penalty", presence_penalty, "in [-2, 2]");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty", frequency_penalty, "in [-2, 2]");
  }
  if (logprobs < 0 || logprobs > kMaxLogprobs) {
    return bad("logprobs", logprobs, absl::StrCat("in [0, ", kMaxLogprobs, "]").c_str());
  }
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxLogprobs) {
    return bad("prompt_logprobs", prompt_logprobs,
               absl::StrCat("in [0, ", kMaxLogprobs, "] (or -1: none)").c_str());
  }
  if (min_tokens < 0) return bad("min_tokens", min_tokens, ">= 0");
  if (logit_bias.size() > static_cast<size_t>(kMaxLogitBiasEntries)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias: ", logit_bias.size(), " tokens; at most ", kMaxLogitBiasEntries));
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const LogitBias& b = logit_bias[i];
    if (b.token_id < 0 || (i > 0 && b.token_id <= logit_bias[i - 1].token_id)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", b.token_id,
                                                     ": ids must be >= 0, each at most once"));
    }
    if (!(b.bias >= -kMaxLogitBias && b.bias <= kMaxLogitBias)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: the bias of token ", b.token_id,
                                                     " is ", b.bias, "; must be in [-",
                                                     kMaxLogitBias, ", ", kMaxLogitBias, "]"));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplingParams::ValidateTokenIds(int vocab_size) const {
  for (const LogitBias& b : logit_bias) {
    if (b.token_id < 0 || b.token_id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias: token id ", b.token_id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

uint64_t RandomSeed() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine() >> 11;  // below 2^53: exact in every JSON client's numbers
}

}  // namespace pagoda
