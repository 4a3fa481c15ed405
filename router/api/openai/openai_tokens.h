// vLLM's /tokenize and /detokenize, as bodies in and answers out (no HTTP here: the server
// parses the body, sends the answer or the error). A bad field is INVALID_ARGUMENT starting with
// its name, as every OpenAI reader's error is.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_TOKENS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_TOKENS_H_

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/openai_context.h"

namespace pagoda {

// {"count", "max_model_len", "tokens"} for `body`'s prompt (a string, with the tokenizer's
// special tokens unless add_special_tokens is false) or its chat messages (rendered as
// /v1/chat/completions renders them, the template's own special tokens only). REQUIRES: `body`
// is a JSON object.
absl::StatusOr<OrderedJson> TokenizeReply(const OrderedJson& body, const OpenAiContext& context);

// {"prompt"}: the text of `body`'s tokens (a list of at most the model length of ids in the
// vocabulary; a compact id list as request_json.h reads it, too). REQUIRES: `body` is a JSON
// object.
absl::StatusOr<OrderedJson> DetokenizeReply(const OrderedJson& body, const OpenAiContext& context);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_TOKENS_H_
