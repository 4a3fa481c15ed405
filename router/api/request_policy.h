// What every front end (gRPC, OpenAI HTTP, `pagoda run`) applies to a request the same way,
// before the core sees it: the prompt's encoding and its size bound, the sampling defaults and
// seed, and how long a request waits for a worker. Plain functions; thread-safe.
#ifndef PAGODA_ROUTER_API_REQUEST_POLICY_H_
#define PAGODA_ROUTER_API_REQUEST_POLICY_H_

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "common/sampling_params.h"
#include "lib/text/tokenizer.h"

namespace pagoda {

// `text`'s token ids, with the tokenizer's special tokens (BOS, as the model's tokenizer adds
// them) when `add_special_tokens`; a rendered chat template wrote its own. A text with more
// bytes than `max_model_len` tokens could ever cover is INVALID_ARGUMENT naming `field`,
// refused before it costs a tokenization.
absl::StatusOr<std::vector<int>> EncodePrompt(const Tokenizer& tokenizer, std::string_view text,
                                              int max_model_len, absl::string_view field = "prompt",
                                              bool add_special_tokens = true);

// The sampling parameters of a request: `params` as the client gave them, except the fields a
// client may leave unset, which come from `overrides` when set, else from the model's
// generation_config.json (temperature, top_p, top_k), else SamplingParams' defaults; the seed
// when given, else a fresh random one (RandomSeed), so sampled answers differ between calls.
SamplingParams ResolveSampling(const SamplingOverrides& overrides, const ModelConfig& model,
                               SamplingParams params = {});

// `params.logit_bias` from a client's (token id, bias) pairs in any order: sorted by id, as
// SamplingParams requires. INVALID_ARGUMENT naming logit_bias for more than
// kMaxLogitBiasEntries pairs or an id given twice; ranges (ids in the vocabulary, biases in
// [-100, 100]) are the request's validation's (GenerationStream::Submit).
absl::Status SetLogitBias(std::vector<LogitBias> entries, SamplingParams* params);

// How long a request waits for a worker when none is ready (every API alike).
inline constexpr absl::Duration kWorkerWait = absl::Seconds(30);
// When a request still waiting for a worker gives up with UNAVAILABLE: a little before the
// client's deadline, so it hears why rather than a bare DEADLINE_EXCEEDED; kWorkerWait after
// `now` for a client that sets none (every HTTP client).
absl::Time WorkerWaitEnd(std::optional<absl::Time> client_deadline, absl::Time now);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_REQUEST_POLICY_H_
