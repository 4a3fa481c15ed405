// The chat prompt: a request's `messages` read as the chat template sees them, and rendered
// with the template options in the request (what /v1/chat/completions and /tokenize prompt
// with). A bad message or option is INVALID_ARGUMENT starting with the field's name, as every
// OpenAI reader's error is.
#ifndef PAGODA_ROUTER_API_OPENAI_CHAT_PROMPT_H_
#define PAGODA_ROUTER_API_OPENAI_CHAT_PROMPT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/openai_context.h"

namespace pagoda {

// Chat messages per call at most: each renders to a few tokens at least, so more could not fit
// any model's context, and the template's work grows with them.
inline constexpr size_t kMaxMessages = 4096;

// `body`'s messages as the template sees them: each an object with a role string, its content
// a string or a list of text parts (joined by newlines into one string), an assistant's tool
// calls prepared for the template (openai_tools.h). REQUIRES: `body` is a JSON object.
absl::StatusOr<OrderedJson> ReadChatMessages(const OrderedJson& body);

// The chat prompt text for `messages` and the template options in `body`
// (add_generation_prompt, continue_final_message, tools, documents, chat_template_kwargs).
// FAILED_PRECONDITION when the context has no chat template. REQUIRES: `body` is a JSON object.
absl::StatusOr<std::string> RenderChat(const OrderedJson& body, const OpenAiContext& context);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_CHAT_PROMPT_H_
