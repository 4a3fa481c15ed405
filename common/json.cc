#include "common/json.h"

#include <cmath>
#include <fstream>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

std::string_view Std(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// Runs the parser again only to learn what is wrong: nlohmann reports a parse error through the
// SAX interface without throwing.
class ErrorCollector final : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, ...": the tag says nothing.
    if (const size_t tag = error.find("] "); error.rfind("[json.", 0) == 0 && tag != error.npos) {
      error.erase(0, tag + 2);
    }
    return false;
  }

  std::string error = "not valid JSON";
};

template <typename J>
const J* Member(const J& v, absl::string_view key) {
  if (!v.is_object()) return nullptr;
  const auto it = v.find(Std(key));
  if (it == v.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

absl::Status CheckJsonShape(absl::string_view text, const JsonShapeLimits& limits,
                            absl::string_view what) {
  // Per open container: how many keys it has so far (-1: an array).
  std::vector<int64_t> open;
  int64_t keys = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (static_cast<int>(open.size()) >= limits.max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": JSON nested deeper than ", limits.max_depth, " levels"));
      }
      open.push_back(c == '{' ? 0 : -1);
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (c == ':' && !open.empty() && open.back() >= 0) {
      if (++open.back() > limits.max_object_keys) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": a JSON object with more than ", limits.max_object_keys, " keys"));
      }
      if (++keys > limits.max_keys) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": more than ", limits.max_keys, " JSON object keys"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view what) {
  RETURN_IF_ERROR(CheckJsonShape(text, JsonShapeLimits(), what));
  Json j = Json::parse(Std(text), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  ErrorCollector collector;
  Json::sax_parse(Std(text), &collector);
  return absl::InvalidArgumentError(absl::StrCat(what, ": not valid JSON: ", collector.error));
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string JsonDump(const Json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string JsonDump(const OrderedJson& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, OrderedJson::error_handler_t::replace);
}

const Json* JsonMember(const Json& v, absl::string_view key) { return Member(v, key); }

const OrderedJson* JsonMember(const OrderedJson& v, absl::string_view key) {
  return Member(v, key);
}

absl::StatusOr<int64_t> JsonAsInt(const Json& v, absl::string_view what) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", u, " is out of range"));
  }
  if (!v.is_number_float()) return absl::InvalidArgumentError(absl::StrCat(what, ": not a number"));
  const double d = v.get<double>();
  if (d != std::floor(d) || std::fabs(d) > 9.007199254740992e15) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", d, " is not a whole number"));
  }
  return static_cast<int64_t>(d);
}

absl::StatusOr<std::string> JsonAsString(const Json& v, absl::string_view what) {
  if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat(what, ": not a string"));
  return v.get_ref<const std::string&>();
}

absl::StatusOr<int64_t> JsonInt(const Json& v, absl::string_view key, absl::string_view what) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": missing ", key));
  return JsonAsInt(*m, absl::StrCat(what, ": ", key));
}

absl::StatusOr<int64_t> JsonIntOr(const Json& v, absl::string_view key, int64_t fallback,
                                  absl::string_view what) {
  const Json* m = JsonMember(v, key);
  return m == nullptr ? fallback : JsonAsInt(*m, absl::StrCat(what, ": ", key));
}

absl::StatusOr<double> JsonNumberOr(const Json& v, absl::string_view key, double fallback,
                                    absl::string_view what) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr) return fallback;
  if (!m->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not a number"));
  }
  return m->get<double>();
}

absl::StatusOr<bool> JsonBoolOr(const Json& v, absl::string_view key, bool fallback,
                                absl::string_view what) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr) return fallback;
  if (!m->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not true or false"));
  }
  return m->get<bool>();
}

absl::StatusOr<std::string> JsonString(const Json& v, absl::string_view key,
                                       absl::string_view what) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr || !m->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " must be a string"));
  }
  return m->get_ref<const std::string&>();
}

absl::StatusOr<std::string> JsonStringOr(const Json& v, absl::string_view key,
                                         const std::string& fallback, absl::string_view what) {
  const Json* m = JsonMember(v, key);
  if (m == nullptr) return fallback;
  if (!m->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " must be a string"));
  }
  return m->get_ref<const std::string&>();
}

}  // namespace pagoda
