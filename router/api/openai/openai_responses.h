// OpenAI's Responses API request (POST /v1/responses) read as a chat call: `input` (a string,
// or a list of messages and function-call items) and `instructions` become chat messages,
// `max_output_tokens`, `text.format` and the sampling fields their chat names, and the call
// runs through the chat path (template, sampling, constraint compiler). The server keeps no
// state, so what needs it (`store: true`, `previous_response_id`, `conversation`,
// `background`) is refused by name, as is every field this file does not know.
// A bad field is INVALID_ARGUMENT starting with the field's Responses name ("input: ...",
// "text.format: ..."), which the server reports as the error's `param`.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSES_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSES_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/openai_request.h"

namespace pagoda {

// Keys of `metadata` at most, and their lengths (OpenAI's limits).
inline constexpr size_t kMaxMetadataKeys = 16;
inline constexpr size_t kMaxMetadataKeyBytes = 64;
inline constexpr size_t kMaxMetadataValueBytes = 512;

struct ResponsesCall {
  OpenAiCall chat;  // the call as a chat completion (one request, n = 1)
  // Echoed in the response object as the client sent them (null when not sent).
  OrderedJson instructions;
  OrderedJson max_output_tokens;
  OrderedJson metadata = OrderedJson::object();
  OrderedJson text_format = {{"type", "text"}};
  OrderedJson tool_choice = "auto";
  OrderedJson tools = OrderedJson::array();
  OrderedJson user;
  bool parallel_tool_calls = true;
};

// REQUIRES `body` to be a JSON object.
absl::StatusOr<ResponsesCall> ParseResponsesRequest(const OrderedJson& body,
                                                    const OpenAiContext& context);

// A refused call's status with its field named as /v1/responses names it (the chat path and
// the core name `input` messages or prompt, `max_output_tokens` max_tokens...).
absl::Status InResponsesFieldNames(const absl::Status& status);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_RESPONSES_H_
