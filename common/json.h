// JSON through nlohmann::json (nlohmann-json3-dev), without exceptions: what is read comes from
// files and ports (config.json, safetensors headers, tokenizer.json, HTTP replies), so a parse
// error or a field of the wrong type is an absl::Status naming the document and the field.
// nlohmann's own accessors (get<T>, at, operator[] on a const) throw on a wrong type: read
// untrusted documents through the helpers here, or check the type first.
#ifndef PAGODA_COMMON_JSON_H_
#define PAGODA_COMMON_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pagoda {

using Json = nlohmann::json;
// Keeps members in insertion order: what the CLI prints (`{"prompt_ids",…,"text",…}`).
using OrderedJson = nlohmann::ordered_json;

// Containers nested deeper than this are refused: nlohmann copies and dumps recursively.
inline constexpr int kMaxJsonDepth = 256;

// What a document may hold. Key counts matter for ordered_json, whose objects look a key up
// by a linear scan: parsing is linear in the keys only while each object has few.
struct JsonShapeLimits {
  int max_depth = kMaxJsonDepth;
  int64_t max_object_keys = INT64_MAX;  // in one object
  int64_t max_keys = INT64_MAX;         // in the whole document
};

// OK when `text` stays within `limits`, INVALID_ARGUMENT naming `what` otherwise; one linear
// pass, before a parser allocates anything. Exact for valid JSON (brackets, colons inside
// strings do not count); text that is not JSON is the parser's to refuse.
absl::Status CheckJsonShape(absl::string_view text, const JsonShapeLimits& limits,
                            absl::string_view what);

// `what` names the document in errors ("config.json"); INVALID_ARGUMENT with nlohmann's
// description of the problem (line and column) when `text` is not one JSON value.
absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what);
// A whole file's contents; NOT_FOUND naming it when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// One line of JSON: UTF-8 kept as is (OpenAI-style output), invalid UTF-8 replaced by U+FFFD
// (a token stream may end inside a character), never an exception.
std::string JsonDump(const Json& j);
std::string JsonDump(const OrderedJson& j);

// The member `key` of an object, or null when absent, null, or `v` is not an object: a member
// set to null reads as one left out (OpenAI's clients send null for a field they leave to its
// default; a config.json writes null for an option it does not set). The one such reader, for
// both kinds of document: every OpenAI endpoint reads its request's fields through it.
const Json* JsonMember(const Json& v, absl::string_view key);
const OrderedJson* JsonMember(const OrderedJson& v, absl::string_view key);

// Typed reads; INVALID_ARGUMENT naming `what` (and `key`) when the value has another type or,
// for the ones without a fallback, is absent. Integers must be whole numbers within int64 (a
// number written with a fraction or exponent counts if it is whole and at most 2^53).
absl::StatusOr<int64_t> JsonAsInt(const Json& v, absl::string_view what);
absl::StatusOr<std::string> JsonAsString(const Json& v, absl::string_view what);
absl::StatusOr<int64_t> JsonInt(const Json& v, absl::string_view key, absl::string_view what);
absl::StatusOr<int64_t> JsonIntOr(const Json& v, absl::string_view key, int64_t fallback,
                                  absl::string_view what);
absl::StatusOr<double> JsonNumberOr(const Json& v, absl::string_view key, double fallback,
                                    absl::string_view what);
absl::StatusOr<bool> JsonBoolOr(const Json& v, absl::string_view key, bool fallback,
                                absl::string_view what);
absl::StatusOr<std::string> JsonString(const Json& v, absl::string_view key,
                                       absl::string_view what);
absl::StatusOr<std::string> JsonStringOr(const Json& v, absl::string_view key,
                                         const std::string& fallback, absl::string_view what);

}  // namespace pagoda

#endif  // PAGODA_COMMON_JSON_H_
