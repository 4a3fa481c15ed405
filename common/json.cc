#include "common/json.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace pagoda {

absl::StatusOr<JsonValue> ParseJson(absl::string_view text, absl::string_view what) {
  JsonValue v;
  const auto status = google::protobuf::util::JsonStringToMessage(std::string(text), &v);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not valid JSON: ", std::string(status.message())));
  }
  return v;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const JsonValue* JsonMember(const JsonValue& v, absl::string_view key) {
  if (!v.has_struct_value()) return nullptr;
  const auto& fields = v.struct_value().fields();
  auto it = fields.find(std::string(key));
  if (it == fields.end() || it->second.has_null_value()) return nullptr;
  return &it->second;
}

absl::StatusOr<int64_t> JsonAsInt(const JsonValue& v, absl::string_view what) {
  if (!v.has_number_value())
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a number"));
  const double d = v.number_value();
  if (d != std::floor(d) || std::fabs(d) > 9.007199254740992e15) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", d, " is not a whole number"));
  }
  return static_cast<int64_t>(d);
}

absl::StatusOr<int64_t> JsonInt(const JsonValue& v, absl::string_view key, absl::string_view what) {
  const JsonValue* m = JsonMember(v, key);
  if (m == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": missing ", key));
  return JsonAsInt(*m, absl::StrCat(what, ": ", key));
}

absl::StatusOr<int64_t> JsonIntOr(const JsonValue& v, absl::string_view key, int64_t fallback,
                                  absl::string_view what) {
  const JsonValue* m = JsonMember(v, key);
  return m == nullptr ? fallback : JsonAsInt(*m, absl::StrCat(what, ": ", key));
}

absl::StatusOr<double> JsonNumberOr(const JsonValue& v, absl::string_view key, double fallback,
                                    absl::string_view what) {
  const JsonValue* m = JsonMember(v, key);
  if (m == nullptr) return fallback;
  if (!m->has_number_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not a number"));
  }
  return m->number_value();
}

absl::StatusOr<bool> JsonBoolOr(const JsonValue& v, absl::string_view key, bool fallback,
                                absl::string_view what) {
  const JsonValue* m = JsonMember(v, key);
  if (m == nullptr) return fallback;
  if (!m->has_bool_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not true or false"));
  }
  return m->bool_value();
}

absl::StatusOr<std::string> JsonString(const JsonValue& v, absl::string_view key,
                                       absl::string_view what) {
  const JsonValue* m = JsonMember(v, key);
  if (m == nullptr || !m->has_string_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " must be a string"));
  }
  return m->string_value();
}

}  // namespace pagoda
