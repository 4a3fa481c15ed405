// The methods of str, dict and list, attribute and item lookup, and iteration.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

absl::Status Unsafe(const Value& obj, const std::string& name) {
  return TemplateError("SecurityError", absl::StrCat("access to attribute '", name, "' of '",
                                                     obj.TypeName(), "' object is unsafe."));
}

const absl::flat_hash_set<absl::string_view>& StringMethods() {
  static const auto* kMethods = new absl::flat_hash_set<absl::string_view>{
      "strip",   "lstrip",  "rstrip",  "split",      "rsplit",     "startswith", "endswith",
      "upper",   "lower",   "title",   "capitalize", "replace",    "find",       "rfind",
      "index",   "rindex",  "count",   "join",       "splitlines", "isdigit",    "isalpha",
      "isalnum", "isspace", "islower", "isupper",    "format"};
  return *kMethods;
}

absl::StatusOr<Value> DictMethod(Interpreter& interp, const Value& obj, const std::string& name,
                                 CallArgs& args) {
  const ValueDict& dict = obj.as_dict();
  if (name == "get") {
    const Value* key = Arg(args, 0, "key");
    if (key == nullptr) return TemplateError("TypeError", "get expected at least 1 argument");
    const Value* fallback = Arg(args, 1, "default");
    const Value* found = dict.Find(*key);
    if (found) return *found;
    return fallback ? *fallback : Value::None();
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(dict.size())));
  ValueList out;
  for (const auto& [key, value] : dict.entries()) {
    if (name == "items") {
      out.push_back(Value::List({key, value}, /*is_tuple=*/true));
    } else if (name == "keys") {
      out.push_back(key);
    } else {
      out.push_back(value);
    }
  }
  if (name == "copy") return obj;
  return Value::List(std::move(out));
}

absl::StatusOr<Value> ListMethod(const Value& obj, const std::string& name, CallArgs& args) {
  if (name == "copy") return obj;
  const Value* x = Arg(args, 0, "value");
  if (x == nullptr) return TemplateError("TypeError", name + "() takes exactly one argument");
  const ValueList& items = obj.as_list();
  int64_t count = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], *x)) continue;
    if (name == "index") return Value::Int(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") return TemplateError("ValueError", "value is not in list");
  return Value::Int(count);
}

Value BoundMethod(Interpreter& interp, const Value& obj, const std::string& name) {
  return Value::Callable(absl::StrCat(obj.TypeName(), ".", name),
                         [&interp, obj, name](CallArgs& args) -> absl::StatusOr<Value> {
                           if (obj.is_string() && name == "format") {
                             return PythonStrFormat(interp, obj, args);
                           }
                           if (obj.is_string())
                             return StringMethod(interp, obj.as_string(), name, args);
                           if (obj.is_dict()) return DictMethod(interp, obj, name, args);
                           return ListMethod(obj, name, args);
                         });
}

Value NoAttribute(const Value& obj, const std::string& name) {
  if (obj.is_none()) {
    return Value::Undefined(absl::StrCat("UndefinedError: 'None' has no attribute '", name, "'"));
  }
  return Value::Undefined(
      absl::StrCat("UndefinedError: '", obj.TypeName(), " object' has no attribute '", name, "'"));
}

}  // namespace

absl::StatusOr<Value> StringMethod(Interpreter& interp, const std::string& s,
                                   const std::string& name, CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ASSIGN_OR_RETURN(const std::optional<std::string> chars, OptionalStringArg(args, 0, "chars"));
    return Value::String(Strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ASSIGN_OR_RETURN(const std::optional<std::string> sep, OptionalStringArg(args, 0, "sep"));
    ASSIGN_OR_RETURN(const int64_t maxsplit, IntArg(args, 1, "maxsplit", -1));
    if (sep && sep->empty()) return TemplateError("ValueError", "empty separator");
    if (name == "rsplit" && maxsplit >= 0) {
      return TemplateError("NotImplementedError", "rsplit with maxsplit is not supported");
    }
    ValueList parts;
    for (std::string& part : Split(s, sep, maxsplit))
      parts.push_back(Value::String(std::move(part)));
    return Value::List(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* arg = Arg(args, 0, "prefix");
    if (arg == nullptr) return TemplateError("TypeError", name + "() takes at least 1 argument");
    ValueList candidates = arg->is_list() ? arg->as_list() : ValueList{*arg};
    for (const Value& c : candidates) {
      if (!c.is_string()) return TemplateError("TypeError", name + "() arguments must be str");
      const std::string& t = c.as_string();
      const bool hit = name == "startswith" ? absl::StartsWith(s, t) : absl::EndsWith(s, t);
      if (hit) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "upper") return Value::String(AsciiUpper(s));
  if (name == "lower") return Value::String(AsciiLower(s));
  if (name == "title") return Value::String(PythonTitle(s));
  if (name == "capitalize") return Value::String(PythonCapitalize(s));
  if (name == "replace") {
    const Value* from = Arg(args, 0, "old");
    const Value* to = Arg(args, 1, "new");
    if (from == nullptr || to == nullptr || !from->is_string() || !to->is_string()) {
      return TemplateError("TypeError", "replace() takes two strings");
    }
    ASSIGN_OR_RETURN(const int64_t count, IntArg(args, 2, "count", -1));
    return Value::String(Replace(s, from->as_string(), to->as_string(), count));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const Value* sub = Arg(args, 0, "sub");
    if (sub == nullptr || !sub->is_string()) {
      return TemplateError("TypeError", name + "() takes a string");
    }
    const std::string& t = sub->as_string();
    if (name == "count") {
      if (t.empty()) return Value::Int(static_cast<int64_t>(Utf8CodePointCount(s)) + 1);
      int64_t n = 0;
      for (size_t at = s.find(t); at != std::string::npos; at = s.find(t, at + t.size())) ++n;
      return Value::Int(n);
    }
    const size_t at = (name == "find" || name == "index") ? s.find(t) : s.rfind(t);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex")
        return TemplateError("ValueError", "substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(Utf8CodePointCount(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    const Value* items = Arg(args, 0, "iterable");
    if (items == nullptr) return TemplateError("TypeError", "join() takes one argument");
    ASSIGN_OR_RETURN(const ValueList list, Iterate(interp, *items));
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) return TemplateError("TypeError", "join() takes strings");
      if (i > 0) out += s;
      out += list[i].as_string();
    }
    return Value::String(std::move(out));
  }
  if (name == "splitlines") {
    ValueList lines;
    for (std::string& line : SplitLines(s)) lines.push_back(Value::String(std::move(line)));
    return Value::List(std::move(lines));
  }
  const auto all = [&](auto pred) {
    if (s.empty()) return Value::Bool(false);
    return Value::Bool(std::all_of(s.begin(), s.end(),
                                   [&](char c) { return pred(static_cast<unsigned char>(c)); }));
  };
  if (name == "isdigit") return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all([](unsigned char c) { return IsPythonSpace(c); });
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (const char c : s) {
      if (std::isalpha(static_cast<unsigned char>(c))) {
        cased = true;
        const bool lower = c >= 'a' && c <= 'z';
        if (lower != (name == "islower")) return Value::Bool(false);
      }
    }
    return Value::Bool(cased);
  }
  return TemplateError("UndefinedError",
                       absl::StrCat("'str object' has no attribute '", name, "'"));
}

absl::StatusOr<ValueList> Iterate(Interpreter& interp, const Value& v) {
  // Charged before anything is built: a long string would otherwise become a huge list.
  if (v.is_string()) RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(v.as_string().size())));
  if (v.is_list()) RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(v.as_list().size())));
  if (v.is_dict()) RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(v.as_dict().size())));
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return ValueList();
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kString: {
      ValueList out;
      const std::string& s = v.as_string();
      for (size_t i = 0; i < s.size();) {
        size_t length = 0;
        Utf8CodePointAt(s, i, &length);
        out.push_back(Value::String(s.substr(i, length)));
        i += length;
      }
      return out;
    }
    case Value::Kind::kDict:
      if (!v.is_namespace()) {
        ValueList out;
        for (const auto& [key, value] : v.as_dict().entries()) out.push_back(key);
        return out;
      }
      break;
    default:
      break;
  }
  return TemplateError("TypeError", absl::StrCat("'", v.TypeName(), "' object is not iterable"));
}

Value GetAttribute(Interpreter& interp, const Value& obj, const std::string& name) {
  static const auto* kDictMethods =
      new absl::flat_hash_set<absl::string_view>{"get", "items", "keys", "values", "copy"};
  static const auto* kDictMutators =
      new absl::flat_hash_set<absl::string_view>{"pop", "popitem", "setdefault", "update", "clear"};
  static const auto* kListMutators = new absl::flat_hash_set<absl::string_view>{
      "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  switch (obj.kind()) {
    case Value::Kind::kDict: {
      if (!obj.is_namespace()) {
        if (kDictMethods->contains(name)) return BoundMethod(interp, obj, name);
        if (kDictMutators->contains(name)) {
          return Value::Undefined(std::string(Unsafe(obj, name).message()));
        }
      }
      const Value* v = obj.as_dict().Find(name);
      return v ? *v : NoAttribute(obj, name);
    }
    case Value::Kind::kString:
      if (StringMethods().contains(name)) return BoundMethod(interp, obj, name);
      break;
    case Value::Kind::kList:
      if (name == "index" || name == "count" || name == "copy") {
        return BoundMethod(interp, obj, name);
      }
      if (kListMutators->contains(name)) {
        return Value::Undefined(std::string(Unsafe(obj, name).message()));
      }
      break;
    default:
      break;
  }
  return NoAttribute(obj, name);
}

Value GetItem(Interpreter& interp, const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().Find(key)) return *v;
    if (key.is_string()) return NoAttribute(obj, key.as_string());
    absl::StatusOr<std::string> repr = ToPythonRepr(key);
    return Value::Undefined(absl::StrCat("UndefinedError: ", obj.TypeName(),
                                         " object has no element ", repr.ok() ? *repr : "?"));
  }
  if (((obj.is_list() && !obj.is_generator()) || obj.is_string()) &&
      (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const ValueList& items = obj.as_list();
      const int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[i];
      return Value::Undefined(absl::StrCat("UndefinedError: ", obj.TypeName(),
                                           " object has no element ", key.as_int()));
    }
    const std::u32string cps = DecodeUtf8(obj.as_string());
    const int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return Value::String(EncodeUtf8(cps.substr(i, 1)));
    return Value::Undefined(
        absl::StrCat("UndefinedError: str object has no element ", key.as_int()));
  }
  if (key.is_string()) return GetAttribute(interp, obj, key.as_string());
  return Value::Undefined(
      absl::StrCat("UndefinedError: '", obj.TypeName(), "' object has no element"));
}

}  // namespace pagoda::jinja
