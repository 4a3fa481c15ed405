// Reading an OpenAI request's fields: the one reader every endpoint's parser uses (a field set
// to null counts as absent, as everywhere in the API), and the fields /v1/completions and
// /v1/chat/completions read: anything else is refused by name (400 unsupported_parameter,
// `param` the field), so a client never gets an answer that silently ignored what it asked
// for. OpenAI's fields that Pagoda knows but does not serve (audio, store, service_tier, ...)
// are refused with the reason.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/json.h"

namespace pagoda {

// The member `name` of `body`, or null when it is absent or null (OpenAI's clients send an
// explicit null for a field they leave to its default) or `body` is not an object.
const OrderedJson* GivenField(const OrderedJson& body, absl::string_view name);

// INVALID_ARGUMENT starting with the first field of `body` that the endpoint does not read.
absl::Status CheckKnownFields(const OrderedJson& body, bool chat);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
