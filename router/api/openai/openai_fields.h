// Reading an OpenAI request's fields. Every endpoint reads a field through common/json.h's
// JsonMember (a field set to null counts as absent, as everywhere in the API, and is never
// refused as unknown), or the typed readers here. /v1/completions and /v1/chat/completions read the
// fields listed here: anything else is refused by name (400 unsupported_parameter, `param` the
// field), so a client never gets an answer that silently ignored what it asked for. OpenAI's fields
// that Pagoda knows but does not serve (audio, store, service_tier, ...) are refused with the
// reason.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "common/json.h"

namespace pagoda {

// Typed reads of the field `name` of `body`: OK and `*out` untouched when the field is absent
// (or null); INVALID_ARGUMENT starting with `name` when it has another type
// (invalid_type) or is out of [min, max] (a number must also be finite).
absl::Status ReadNumberField(const OrderedJson& body, const char* name, double min, double max,
                             std::optional<double>* out);
absl::Status ReadIntField(const OrderedJson& body, const char* name, int64_t min, int64_t max,
                          std::optional<int64_t>* out);
absl::Status ReadBoolField(const OrderedJson& body, const char* name, bool* out);

// INVALID_ARGUMENT starting with the first field of `body` that the endpoint does not read.
absl::Status CheckKnownFields(const OrderedJson& body, bool chat);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_FIELDS_H_
