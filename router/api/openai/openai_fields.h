// The request fields /v1/completions and /v1/chat/completions read: anything else is refused
// by name (400 unsupported_parameter, `param` the field), so a client never gets an answer
// that silently ignored what it asked for. OpenAI's fields that Pagoda knows but does not
// serve (audio, store, service_tier, ...) are refused with the reason. A field set to null
// counts as absent, as everywhere in the API.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace pagoda {

// INVALID_ARGUMENT starting with the first field of `body` that the endpoint does not read.
absl::Status CheckKnownFields(const nlohmann::ordered_json& body, bool chat);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
