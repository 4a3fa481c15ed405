#include "lib/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pagoda::jinja {

namespace {

// A key's identity for the non-str index: equal keys (1, 1.0, True) encode alike. Every
// encoding is self-delimiting, so a tuple's is its items' in a row. False if unhashable.
bool AppendHashKey(const Value& v, std::string* out) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "N;";
      return true;
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      absl::StrAppend(out, "I", v.as_int(), ";");
      return true;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      // 2^63 is exactly representable; anything in [-2^63, 2^63) converts without overflow.
      if (std::isfinite(f) && f == std::floor(f) && f >= -9223372036854775808.0 &&
          f < 9223372036854775808.0) {
        absl::StrAppend(out, "I", static_cast<int64_t>(f), ";");
      } else {
        absl::StrAppend(out, "F", FormatFloat(f), ";");
      }
      return true;
    }
    case Value::Kind::kString:
      absl::StrAppend(out, "S", v.as_string().size(), ":", v.as_string());
      return true;
    case Value::Kind::kList:
      if (!v.is_tuple()) return false;
      absl::StrAppend(out, "T", v.as_list().size(), ":");
      for (const Value& item : v.as_list()) {
        if (!AppendHashKey(item, out)) return false;
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

bool IsHashable(const Value& v) {
  std::string ignored;
  return AppendHashKey(v, &ignored);
}

const Value* ValueDict::Find(absl::string_view key) const {
  const auto it = str_index_.find(key);
  return it == str_index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* ValueDict::Find(const Value& key) const {
  if (key.is_string()) return Find(key.as_string());
  if (other_index_.empty()) return nullptr;
  std::string hash_key;
  if (!AppendHashKey(key, &hash_key)) return nullptr;
  const auto it = other_index_.find(hash_key);
  return it == other_index_.end() ? nullptr : &entries_[it->second].second;
}

void ValueDict::Set(std::string key, Value value) {
  const auto it = str_index_.find(key);
  if (it != str_index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  str_index_.emplace(key, entries_.size());
  entries_.emplace_back(Value::String(std::move(key)), std::move(value));
}

absl::Status ValueDict::SetKey(const Value& key, Value value) {
  if (key.is_string()) {
    Set(key.as_string(), std::move(value));
    return absl::OkStatus();
  }
  std::string hash_key;
  if (!AppendHashKey(key, &hash_key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TypeError: unhashable type: '", key.TypeName(), "'"));
  }
  const auto it = other_index_.find(hash_key);
  if (it != other_index_.end()) {
    // Python keeps the first key object (d[1.0] = x leaves the key 1) and replaces the value.
    entries_[it->second].second = std::move(value);
    return absl::OkStatus();
  }
  other_index_.emplace(std::move(hash_key), entries_.size());
  entries_.emplace_back(key, std::move(value));
  return absl::OkStatus();
}

void ValueDict::Clear() {
  entries_.clear();
  str_index_.clear();
  other_index_.clear();
}

Value Value::Undefined(std::string error) {
  Value v;
  v.string_ = std::make_shared<const std::string>(std::move(error));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = String(std::move(s));
  v.is_markup_ = true;
  return v;
}

Value Value::List(ValueList items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.is_tuple_ = is_tuple;
  for (const Value& item : items) v.depth_ = std::max(v.depth_, item.depth_);
  ++v.depth_;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::Generator(ValueList items) {
  Value v = List(std::move(items));
  v.is_generator_ = true;
  return v;
}

Value Value::Dict(std::shared_ptr<ValueDict> dict, bool is_namespace) {
  Value v;
  v.kind_ = Kind::kDict;
  v.is_namespace_ = is_namespace;
  if (is_namespace) {
    v.depth_ = kNamespaceDepth;
  } else {
    for (const auto& [key, value] : dict->entries()) v.depth_ = std::max(v.depth_, value.depth_);
    ++v.depth_;
  }
  v.dict_ = std::move(dict);
  return v;
}

Value Value::Callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.string_ = std::make_shared<const std::string>(std::move(name));
  v.function_ = std::make_shared<NativeFunction>(std::move(fn));
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !string_->empty();
    case Kind::kList:
      return is_generator_ || !list_->empty();
    case Kind::kDict:
      return is_namespace_ || dict_->size() > 0;
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      if (is_generator_) return "generator";
      return is_tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return is_namespace_ ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      // Python compares generators by identity; two renders of one never meet.
      if (a.is_generator() || b.is_generator()) return false;
      const ValueList& x = a.as_list();
      const ValueList& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!Equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.is_namespace() || b.is_namespace()) return a.dict_ptr() == b.dict_ptr();
      const ValueDict& x = a.as_dict();
      const ValueDict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.function() == &b.function();
    default:
      return false;
  }
}

std::string FormatFloat(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form ("d.ddde±x"), then laid out as repr does.
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  const char* begin = buf;
  const bool negative = buf[0] == '-';
  if (negative) ++begin;
  const std::string sci(begin, ec == std::errc() ? end : begin);
  const size_t e_pos = sci.find('e');
  if (e_pos == std::string::npos || e_pos == 0) return "nan";  // to_chars cannot fail here
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string out(negative ? 1 : 0, '-');
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      if (digits.size() < static_cast<size_t>(exponent) + 1) digits.resize(exponent + 1, '0');
      out.append(digits, 0, exponent + 1);
      out += '.';
      if (digits.size() > static_cast<size_t>(exponent) + 1) {
        out.append(digits, exponent + 1, std::string::npos);
      } else {
        out += '0';
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp_buf;
  return out;
}

}  // namespace pagoda::jinja
