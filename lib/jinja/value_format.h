// Values to and from text: Python's str() and repr(), json.dumps, and JSON documents in.
#ifndef PAGODA_LIB_JINJA_VALUE_FORMAT_H_
#define PAGODA_LIB_JINJA_VALUE_FORMAT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/jinja/value.h"
#include "nlohmann/json.hpp"

namespace pagoda::jinja {

// How deep lists and dicts may nest when printed, serialized or read from JSON: a namespace
// can hold itself, and JSON from a request can nest without end.
inline constexpr int kMaxValueDepth = 256;
// How long one formatted value may get: a list can hold one long string many times over.
inline constexpr size_t kMaxFormattedBytes = 64 << 20;

// Python's str(x) as jinja2 prints it: an undefined prints as "", None as "None", a list
// as its repr. RESOURCE_EXHAUSTED past kMaxFormattedBytes or kMaxValueDepth.
absl::StatusOr<std::string> ToPythonStr(const Value& v);
// Python's repr(x).
absl::StatusOr<std::string> ToPythonRepr(const Value& v);

// The arguments of Python's json.dumps that the `tojson` filter passes on.
struct JsonDumpOptions {
  std::optional<std::string> indent;  // None: one line; else the string one level indents by
  std::string item_separator = ", ";  // Python's default; "," when indent is given
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v); INVALID_ARGUMENT for what JSON cannot hold (undefined, callables).
absl::StatusOr<std::string> ToJson(const Value& v, const JsonDumpOptions& options);

// A JSON document as template values (objects keep their key order); INVALID_ARGUMENT when
// it nests beyond kMaxValueDepth.
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_VALUE_FORMAT_H_
