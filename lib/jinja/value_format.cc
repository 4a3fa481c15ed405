#include "lib/jinja/value_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/text.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

absl::Status TooLong() {
  return absl::ResourceExhaustedError(
      absl::StrCat("a value formats to more than ", kMaxFormattedBytes, " bytes"));
}

absl::Status TooDeep() {
  return absl::InvalidArgumentError(
      absl::StrCat("value nests deeper than ", kMaxValueDepth, " levels"));
}

std::string ReprString(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

absl::Status AppendRepr(const Value& v, int depth, std::string* out);

absl::Status AppendStr(const Value& v, int depth, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return absl::OkStatus();
    case Value::Kind::kString:
      *out += v.as_string();
      return absl::OkStatus();
    default:
      return AppendRepr(v, depth, out);
  }
}

absl::Status AppendRepr(const Value& v, int depth, std::string* out) {
  if (depth > kMaxValueDepth) return TooDeep();
  if (out->size() > kMaxFormattedBytes) return TooLong();
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return absl::OkStatus();
    case Value::Kind::kNone:
      *out += "None";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "True" : "False";
      return absl::OkStatus();
    case Value::Kind::kInt:
      absl::StrAppend(out, v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat:
      *out += FormatFloat(v.as_float());
      return absl::OkStatus();
    case Value::Kind::kString:
      *out += ReprString(v.as_string());
      return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.is_generator()) {
        *out += "<generator object>";
        return absl::OkStatus();
      }
      const ValueList& items = v.as_list();
      *out += v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += ", ";
        RETURN_IF_ERROR(AppendRepr(items[i], depth + 1, out));
      }
      if (v.is_tuple() && items.size() == 1) *out += ",";
      *out += v.is_tuple() ? ")" : "]";
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      *out += v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : v.as_dict().entries()) {
        if (!first) *out += ", ";
        first = false;
        RETURN_IF_ERROR(AppendRepr(key, depth + 1, out));
        *out += ": ";
        RETURN_IF_ERROR(AppendRepr(value, depth + 1, out));
      }
      *out += v.is_namespace() ? "}>" : "}";
      return absl::OkStatus();
    }
    case Value::Kind::kCallable:
      absl::StrAppend(out, "<function ", v.callable_name(), ">");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void AppendJsonString(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    switch (c) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    char buf[16];
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      size_t length = 0;
      char32_t cp = Utf8CodePointAt(s, i, &length);
      i += length - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + static_cast<unsigned>(cp >> 10),
                      0xDC00 + static_cast<unsigned>(cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      }
      *out += buf;
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += '"';
}

// json.dumps turns a non-str key into a string: True -> "true", None -> "null", 1.5 -> "1.5".
absl::StatusOr<std::string> JsonKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString:
      return key.as_string();
    case Value::Kind::kNone:
      return std::string("null");
    case Value::Kind::kBool:
      return std::string(key.as_bool() ? "true" : "false");
    case Value::Kind::kInt:
      return absl::StrCat(key.as_int());
    case Value::Kind::kFloat: {
      const double f = key.as_float();
      if (std::isnan(f)) return std::string("NaN");
      if (std::isinf(f)) return std::string(f < 0 ? "-Infinity" : "Infinity");
      return FormatFloat(f);
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "TypeError: keys must be str, int, float, bool or None, not ", key.TypeName()));
  }
}

// sort_keys=True sorts by the keys themselves, as sorted(d.items()) does: mixed str and int
// keys cannot be ordered (TypeError).
absl::Status SortJsonKeys(std::vector<const std::pair<Value, Value>*>& entries) {
  absl::Status status;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
    const Value& x = a->first;
    const Value& y = b->first;
    if (x.is_string() && y.is_string()) return x.as_string() < y.as_string();
    if (x.is_number() && y.is_number()) return x.as_float() < y.as_float();
    if (status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("TypeError: '<' not supported between instances of '", y.TypeName(),
                       "' and '", x.TypeName(), "'"));
    }
    return false;
  });
  return status;
}

void AppendNewline(const JsonDumpOptions& o, int level, std::string* out) {
  *out += '\n';
  for (int i = 0; i < level; ++i) *out += *o.indent;
}

absl::Status AppendJson(const Value& v, const JsonDumpOptions& o, int level, std::string* out) {
  if (level > kMaxValueDepth) return TooDeep();
  if (out->size() > kMaxFormattedBytes) return TooLong();
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      absl::StrAppend(out, v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f)) {
        *out += "NaN";
      } else if (std::isinf(f)) {
        *out += f < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += FormatFloat(f);
      }
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      AppendJsonString(v.as_string(), o.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.is_generator()) break;  // not JSON serializable, as in Python
      const ValueList& items = v.as_list();
      if (items.empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      *out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += o.item_separator;
        if (o.indent) AppendNewline(o, level + 1, out);
        RETURN_IF_ERROR(AppendJson(items[i], o, level + 1, out));
      }
      if (o.indent) AppendNewline(o, level, out);
      *out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& entry : v.as_dict().entries()) entries.push_back(&entry);
      if (entries.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      if (o.sort_keys) RETURN_IF_ERROR(SortJsonKeys(entries));
      *out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += o.item_separator;
        if (o.indent) AppendNewline(o, level + 1, out);
        ASSIGN_OR_RETURN(const std::string key, JsonKey(entries[i]->first));
        AppendJsonString(key, o.ensure_ascii, out);
        *out += o.key_separator;
        RETURN_IF_ERROR(AppendJson(entries[i]->second, o, level + 1, out));
      }
      if (o.indent) AppendNewline(o, level, out);
      *out += '}';
      return absl::OkStatus();
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
}

absl::StatusOr<Value> FromJsonAt(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) return TooDeep();
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::String(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) {
        ASSIGN_OR_RETURN(Value v, FromJsonAt(item, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto dict = std::make_shared<ValueDict>();
      for (const auto& [key, item] : json.items()) {
        ASSIGN_OR_RETURN(Value v, FromJsonAt(item, depth + 1));
        dict->Set(key, std::move(v));
      }
      return Value::Dict(std::move(dict));
    }
    default:
      return absl::InvalidArgumentError("unsupported JSON value (binary or discarded)");
  }
}

}  // namespace

absl::StatusOr<std::string> ToPythonStr(const Value& v) {
  std::string out;
  RETURN_IF_ERROR(AppendStr(v, 0, &out));
  if (out.size() > kMaxFormattedBytes) return TooLong();
  return out;
}

absl::StatusOr<std::string> ToPythonRepr(const Value& v) {
  std::string out;
  RETURN_IF_ERROR(AppendRepr(v, 0, &out));
  if (out.size() > kMaxFormattedBytes) return TooLong();
  return out;
}

absl::StatusOr<std::string> ToJson(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  RETURN_IF_ERROR(AppendJson(v, options, 0, &out));
  if (out.size() > kMaxFormattedBytes) return TooLong();
  return out;
}

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& json) { return FromJsonAt(json, 0); }

}  // namespace pagoda::jinja
