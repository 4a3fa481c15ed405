// OpenAI's /v1/completions and /v1/chat/completions requests (with vLLM's extra sampling
// fields) turned into the core's GenerationRequests (with request_policy's prompt encoding and
// sampling defaults). Every field is checked for type; what the core bounds (n, lengths, ids,
// sampling ranges) is validated by the call's GenerationStream before anything is sized by it.
// A bad field is INVALID_ARGUMENT whose message starts with the field's name
// ("temperature: ..."), which the server reports as the error's `param`.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_REQUEST_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/openai_chat_output.h"
#include "router/api/openai/openai_context.h"
#include "router/api/request_output.h"

namespace pagoda {

// Prompts per /v1/completions call at most (each becomes its own request).
inline constexpr int kMaxPromptsPerCall = 64;

struct OpenAiCall {
  bool chat = false;
  std::string model;                        // as asked; "" when not given
  std::vector<GenerationRequest> requests;  // one per prompt
  std::vector<std::string> stops;
  std::vector<std::string> prompt_texts;  // per request, for `echo`
  uint64_t seed = 0;                      // the request's, or one drawn for it
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt starts the text
  // Log probabilities: completions' `logprobs` (alternatives per token), or chat's
  // `logprobs: true` with `top_logprobs`. -1: none asked.
  int top_logprobs = -1;
  // Completions' echo with logprobs: each choice's logprobs start with the prompt's tokens
  // (the first one's null), as OpenAI's legacy API returns them.
  bool echo_logprobs = false;
  // vLLM's prompt_logprobs (alternatives per prompt position), reported in vLLM's form. -1:
  // not asked.
  int prompt_logprobs = -1;
  // Chat: how each choice's text becomes reasoning, content and tool calls.
  ChatOutputOptions output;
};

// Both REQUIRE `body` to be a JSON object.
absl::StatusOr<OpenAiCall> ParseCompletionRequest(const OrderedJson& body,
                                                  const OpenAiContext& context);
absl::StatusOr<OpenAiCall> ParseChatRequest(const OrderedJson& body, const OpenAiContext& context);

// A core validation error with the field named as this API names it (the core uses gRPC's
// names: prompt_token_ids is `prompt`, a length over the model's is `max_tokens`).
absl::Status InOpenAiFieldNames(const absl::Status& status);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_REQUEST_H_
