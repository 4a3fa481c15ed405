// Reading JSON files (config.json, safetensors headers, tokenizer.json) through protobuf's
// JSON parser into google.protobuf.Value, with typed getters that name the field on error.
#ifndef PAGODA_COMMON_JSON_H_
#define PAGODA_COMMON_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace pagoda {

using JsonValue = google::protobuf::Value;

// `what` names the document in errors ("config.json").
absl::StatusOr<JsonValue> ParseJson(absl::string_view text, absl::string_view what);
// A whole file's contents; NOT_FOUND naming it when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// The member `key` of an object, or null when absent (or `v` is not an object).
const JsonValue* JsonMember(const JsonValue& v, absl::string_view key);

// Typed reads of a member; INVALID_ARGUMENT naming `what`.`key` when it has another type or,
// for the Required ones, is absent. Integers must be whole numbers within int64.
absl::StatusOr<int64_t> JsonInt(const JsonValue& v, absl::string_view key, absl::string_view what);
absl::StatusOr<int64_t> JsonIntOr(const JsonValue& v, absl::string_view key, int64_t fallback,
                                  absl::string_view what);
absl::StatusOr<double> JsonNumberOr(const JsonValue& v, absl::string_view key, double fallback,
                                    absl::string_view what);
absl::StatusOr<bool> JsonBoolOr(const JsonValue& v, absl::string_view key, bool fallback,
                                absl::string_view what);
absl::StatusOr<std::string> JsonString(const JsonValue& v, absl::string_view key,
                                       absl::string_view what);
// A JSON number as an int64, if it is a whole one.
absl::StatusOr<int64_t> JsonAsInt(const JsonValue& v, absl::string_view what);

}  // namespace pagoda

#endif  // PAGODA_COMMON_JSON_H_
