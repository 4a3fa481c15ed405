#include "router/api/request_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

// No token covers more than a few dozen bytes.
constexpr size_t kMaxBytesPerToken = 64;
// How long before the client's deadline a request gives up waiting for a worker: time for
// UNAVAILABLE to reach the client before its deadline does.
constexpr absl::Duration kDeadlineMargin = absl::Milliseconds(200);

}  // namespace

absl::StatusOr<std::vector<int>> EncodePrompt(const Tokenizer& tokenizer, std::string_view text,
                                              int max_model_len, absl::string_view field,
                                              bool add_special_tokens) {
  if (text.size() > static_cast<size_t>(max_model_len) * kMaxBytesPerToken) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", text.size(),
                                                   " bytes cannot fit the model length of ",
                                                   max_model_len, " tokens"));
  }
  return tokenizer.Encode(text, add_special_tokens);
}

SamplingParams ResolveSampling(const SamplingOverrides& overrides, const ModelConfig& model,
                               SamplingParams params) {
  params.temperature = overrides.temperature.value_or(model.default_temperature);
  params.top_p = overrides.top_p.value_or(model.default_top_p);
  params.top_k = overrides.top_k.value_or(model.default_top_k);
  params.repetition_penalty =
      overrides.repetition_penalty.value_or(SamplingParams().repetition_penalty);
  params.seed = overrides.seed.has_value() ? *overrides.seed : RandomSeed();
  return params;
}

absl::Status SetLogitBias(std::vector<LogitBias> entries, SamplingParams* params) {
  if (entries.size() > static_cast<size_t>(kMaxLogitBiasEntries)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias: ", entries.size(), " tokens; at most ", kMaxLogitBiasEntries));
  }
  std::sort(entries.begin(), entries.end(),
            [](const LogitBias& a, const LogitBias& b) { return a.token_id < b.token_id; });
  for (size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].token_id == entries[i - 1].token_id) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias: token id ", entries[i].token_id, " is given twice"));
    }
  }
  params->logit_bias = std::move(entries);
  return absl::OkStatus();
}

absl::Time WorkerWaitEnd(std::optional<absl::Time> client_deadline, absl::Time now) {
  return client_deadline.has_value() ? *client_deadline - kDeadlineMargin : now + kWorkerWait;
}

}  // namespace pagoda
