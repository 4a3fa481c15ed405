// JSON Schema -> GBNF, for response_format json_schema (OpenAI's structured-outputs subset, as
// vLLM and llama.cpp accept it), and the grammar of json_object.
//
// Supported: type (object, array, string, number, integer, boolean, null, or a list of them),
// properties + required, additionalProperties (false; true or a schema allows extra keys
// after the declared ones; absent means false, as OpenAI's strict mode requires), items,
// minItems / maxItems, enum, const, anyOf / oneOf (oneOf as anyOf: the grammar cannot tell
// which branches match), allOf of one schema, $ref to #/$defs/... and #/definitions/... (and
// "#", recursion allowed), string minLength / maxLength / pattern (regex_to_gbnf.h) / format
// (date, time, date-time, uuid), integer minimum / maximum / exclusiveMinimum /
// exclusiveMaximum. Annotations (title, description, default, examples, $schema, $id,
// $comment) are read and ignored. Anything else is INVALID_ARGUMENT naming the keyword.
//
// Declared properties come in their declared order: required ones always, optional ones may
// be left out. Whitespace between tokens is optional and bounded (a space, or a newline and
// up to 20 spaces or tabs), so a model cannot loop on it; numbers have at most 16 digits
// before and after the point.
#ifndef PAGODA_LIB_GRAMMAR_JSON_SCHEMA_H_
#define PAGODA_LIB_GRAMMAR_JSON_SCHEMA_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace pagoda {

// The GBNF of documents that `schema` (JSON text, or parsed keeping its key order) accepts;
// its start rule is root.
absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema);
absl::StatusOr<std::string> JsonSchemaValueToGbnf(const OrderedJson& schema);

// Several schemas in one grammar: `schema`'s rules, each named `prefix` + its name (the start
// rule `prefix` + "root"), without the base rules they share (JsonBaseGbnf(), added once).
// REQUIRES: `prefix` is not empty and starts none of the base rules' names ("t0-" is fine).
absl::StatusOr<std::string> JsonSchemaRulesGbnf(const OrderedJson& schema, std::string_view prefix);
std::string JsonBaseGbnf();

// response_format {"type": "json_object"}: any JSON object.
std::string JsonObjectGbnf();

}  // namespace pagoda

#endif  // PAGODA_LIB_GRAMMAR_JSON_SCHEMA_H_
