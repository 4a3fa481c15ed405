#include "common/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/jinja/text.h"
#include "common/jinja/value_format.h"
#include "common/status_macros.h"

namespace pagoda::jinja {
namespace {

// jinja2's sandbox: ranges longer than this are refused (sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

// The argument at `index`, else the keyword `name`, else null.
const Value* Arg(const CallArgs& args, size_t index, absl::string_view name) {
  if (index < args.positional.size()) return &args.positional[index];
  for (const auto& [key, value] : args.keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

bool BoolArg(const CallArgs& args, size_t index, absl::string_view name, bool fallback) {
  const Value* v = Arg(args, index, name);
  return v ? v->Truthy() : fallback;
}

absl::StatusOr<std::string> Str(const Value& v) { return ToPythonStr(v); }

absl::StatusOr<std::optional<std::string>> OptionalStringArg(const CallArgs& args, size_t index,
                                                             absl::string_view name) {
  const Value* v = Arg(args, index, name);
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) {
    return TemplateError("TypeError",
                         absl::StrCat(std::string(name), " must be a string, not ", v->TypeName()));
  }
  return std::optional<std::string>(v->as_string());
}

absl::StatusOr<int64_t> IntArg(const CallArgs& args, size_t index, absl::string_view name,
                               int64_t fallback) {
  const Value* v = Arg(args, index, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) {
    return TemplateError(
        "TypeError", absl::StrCat(std::string(name), " must be an integer, not ", v->TypeName()));
  }
  return v->as_int();
}

absl::Status Unsafe(const Value& obj, const std::string& name) {
  return TemplateError("SecurityError", absl::StrCat("access to attribute '", name, "' of '",
                                                     obj.TypeName(), "' object is unsafe."));
}

// Python's `<` for sorting; `fold` lowercases strings first (jinja2's case_sensitive=False).
absl::StatusOr<bool> Less(const Value& a, const Value& b, bool fold) {
  if (a.is_number() && b.is_number()) return a.as_float() < b.as_float();
  if (a.is_string() && b.is_string()) {
    if (fold) return AsciiLower(a.as_string()) < AsciiLower(b.as_string());
    return a.as_string() < b.as_string();
  }
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Less(x[i], y[i], fold);
    }
    return x.size() < y.size();
  }
  return TemplateError("TypeError", absl::StrCat("'<' not supported between instances of '",
                                                 a.TypeName(), "' and '", b.TypeName(), "'"));
}

// Sorts `items` by `key(item)` (stable, as Python's sorted), collecting the first error.
template <typename KeyFn>
absl::Status SortBy(ValueList& items, bool fold, bool reverse, KeyFn key) {
  absl::Status status;
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (!status.ok()) return false;
    absl::StatusOr<bool> less =
        reverse ? Less(y.first, x.first, fold) : Less(x.first, y.first, fold);
    if (!less.ok()) {
      status = less.status();
      return false;
    }
    return *less;
  });
  items.clear();
  for (auto& [k, item] : keyed) items.push_back(std::move(item));
  return status;
}

// jinja2's attrgetter: "a.b.0" looks up each part as an item (ints index lists).
Value LookupPath(Interpreter& interp, const Value& item, const std::string& path) {
  Value v = item;
  for (const std::string& part : Split(path, std::string("."), -1)) {
    if (v.is_undefined()) return v;
    int64_t index = 0;
    v = absl::SimpleAtoi(part, &index) ? GetItem(interp, v, Value::Int(index))
                                       : GetItem(interp, v, Value::String(part));
  }
  return v;
}

// ---- methods ----

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
      if (t.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
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
    return Value::Int(static_cast<int64_t>(CodePointCount(std::string_view(s).substr(0, at))));
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

const absl::flat_hash_set<absl::string_view>& StringMethods() {
  static const auto* kMethods = new absl::flat_hash_set<absl::string_view>{
      "strip",   "lstrip",  "rstrip",  "split",      "rsplit",     "startswith", "endswith",
      "upper",   "lower",   "title",   "capitalize", "replace",    "find",       "rfind",
      "index",   "rindex",  "count",   "join",       "splitlines", "isdigit",    "isalpha",
      "isalnum", "isspace", "islower", "isupper"};
  return *kMethods;
}

absl::StatusOr<Value> DictMethod(Interpreter& interp, const Value& obj, const std::string& name,
                                 CallArgs& args) {
  const ValueDict& dict = obj.as_dict();
  if (name == "get") {
    const Value* key = Arg(args, 0, "key");
    if (key == nullptr) return TemplateError("TypeError", "get expected at least 1 argument");
    const Value* fallback = Arg(args, 1, "default");
    const Value* found = key->is_string() ? dict.Find(key->as_string()) : nullptr;
    if (found) return *found;
    return fallback ? *fallback : Value::None();
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(dict.size())));
  ValueList out;
  for (const auto& [key, value] : dict.entries()) {
    if (name == "items") {
      out.push_back(Value::List({Value::String(key), value}, /*is_tuple=*/true));
    } else if (name == "keys") {
      out.push_back(Value::String(key));
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

// ---- filters ----

using Filter = absl::StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      if (!v.is_namespace()) return static_cast<int64_t>(v.as_dict().size());
      break;
    default:
      break;
  }
  return TemplateError("TypeError",
                       absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> FilterLength(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const int64_t n, Length(v));
  return Value::Int(n);
}

absl::StatusOr<Value> FilterDefault(Interpreter&, const Value& v, CallArgs& args) {
  const Value* fallback = Arg(args, 0, "default_value");
  const bool boolean = BoolArg(args, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !v.Truthy())) {
    return fallback ? *fallback : Value::String("");
  }
  return v;
}

absl::StatusOr<Value> FilterString(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, Str(v));
  return Value::String(std::move(s));
}

absl::StatusOr<Value> FilterTrim(Interpreter&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  ASSIGN_OR_RETURN(const std::optional<std::string> chars, OptionalStringArg(args, 0, "chars"));
  return Value::String(Strip(s, chars, true, true));
}

absl::StatusOr<Value> FilterUpper(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Value::String(AsciiUpper(s));
}

absl::StatusOr<Value> FilterLower(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Value::String(AsciiLower(s));
}

absl::StatusOr<Value> FilterCapitalize(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Value::String(PythonCapitalize(s));
}

absl::StatusOr<Value> FilterTitle(Interpreter&, const Value& v, CallArgs&) {
  // jinja2's title: a word starts after whitespace, '-', or an opening bracket.
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  std::string out;
  bool word_start = true;
  for (const char c : s) {
    const bool boundary = IsPythonSpace(static_cast<unsigned char>(c)) || c == '-' || c == '(' ||
                          c == '{' || c == '[' || c == '<';
    if (boundary) {
      out += c;
      word_start = true;
    } else {
      out += word_start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                        : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      word_start = false;
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterReplace(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  const Value* from = Arg(args, 0, "old");
  const Value* to = Arg(args, 1, "new");
  if (from == nullptr || to == nullptr)
    return TemplateError("TypeError", "replace takes old and new");
  ASSIGN_OR_RETURN(const std::string f, Str(*from));
  ASSIGN_OR_RETURN(const std::string t, Str(*to));
  ASSIGN_OR_RETURN(const int64_t count, IntArg(args, 2, "count", -1));
  // Bound the result before building it: count the replacements first.
  int64_t matches = 0;
  if (f.empty()) {
    matches = static_cast<int64_t>(CodePointCount(s)) + 1;
  } else {
    for (size_t at = s.find(f); at != std::string::npos; at = s.find(f, at + f.size())) ++matches;
  }
  if (count >= 0) matches = std::min(matches, count);
  const __int128 size = static_cast<__int128>(s.size()) +
                        static_cast<__int128>(matches) * static_cast<int64_t>(t.size());
  RETURN_IF_ERROR(interp.CheckSize(size > INT64_MAX ? INT64_MAX : static_cast<int64_t>(size)));
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(size)));
  std::string out = Replace(s, f, t, count);
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterFirst(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  if (items.empty()) return Value::Undefined("UndefinedError: No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FilterLast(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  if (items.empty()) return Value::Undefined("UndefinedError: No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FilterList(Interpreter& interp, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterReverse(Interpreter& interp, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = ToCodePoints(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::String(FromCodePoints(cps));
  }
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterItems(Interpreter& interp, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict() || v.is_namespace()) {
    return TemplateError("FilterArgumentError", "Can only get item pairs from a mapping.");
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(v.as_dict().size())));
  ValueList out;
  for (const auto& [key, value] : v.as_dict().entries()) {
    out.push_back(Value::List({Value::String(key), value}, /*is_tuple=*/true));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterDictsort(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(Value pairs, FilterItems(interp, v, args));
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* by = Arg(args, 1, "by");
  const bool reverse = BoolArg(args, 2, "reverse", false);
  const size_t pos = by && by->is_string() && by->as_string() == "value" ? 1 : 0;
  ValueList items = pairs.as_list();
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, reverse,
                         [pos](const Value& pair) { return pair.as_list()[pos]; }));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterJoin(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const Value* sep_value = Arg(args, 0, "d");
  std::string sep;
  if (sep_value) {
    ASSIGN_OR_RETURN(sep, Str(*sep_value));
  }
  const Value* attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    Value item = items[i];
    if (attribute && !attribute->is_none()) {
      ASSIGN_OR_RETURN(const std::string path, Str(*attribute));
      item = LookupPath(interp, item, path);
    }
    ASSIGN_OR_RETURN(const std::string s, Str(item));
    out += s;
    RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  }
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterTojson(Interpreter& interp, const Value& v, CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(args, 0, "ensure_ascii", false);
  if (const Value* indent = Arg(args, 1, "indent"); indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->as_string();
    } else if (indent->is_int()) {
      o.indent = std::string(std::clamp<int64_t>(indent->as_int(), 0, 64), ' ');
    } else {
      return TemplateError("TypeError", "indent must be an int or a string");
    }
    o.item_separator = ",";
  }
  if (const Value* separators = Arg(args, 2, "separators"); separators && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2 ||
        !separators->as_list()[0].is_string() || !separators->as_list()[1].is_string()) {
      return TemplateError("TypeError", "separators must be a pair of strings");
    }
    o.item_separator = separators->as_list()[0].as_string();
    o.key_separator = separators->as_list()[1].as_string();
  }
  o.sort_keys = BoolArg(args, 3, "sort_keys", false);
  ASSIGN_OR_RETURN(std::string out, ToJson(v, o));
  RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterIndent(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(std::string s, Str(v));
  std::string indentation = "    ";
  if (const Value* width = Arg(args, 0, "width")) {
    if (width->is_string()) {
      indentation = width->as_string();
    } else if (width->is_int()) {
      indentation = std::string(std::clamp<int64_t>(width->as_int(), 0, 256), ' ');
    }
  }
  const bool first = BoolArg(args, 1, "first", false);
  const bool blank = BoolArg(args, 2, "blank", false);
  s += "\n";  // as jinja2 does, so a trailing newline survives splitlines()
  const std::vector<std::string> lines = SplitLines(s);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (blank || !lines[i].empty()) out += indentation;
    }
    out += lines[i];
    RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  }
  if (first) out = indentation + out;
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterInt(Interpreter&, const Value& v, CallArgs& args) {
  const Value* fallback = Arg(args, 0, "default");
  const Value dflt = fallback ? *fallback : Value::Int(0);
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float()) {
    const double f = std::trunc(v.as_float());
    if (!std::isfinite(f) || std::abs(f) > 9.2e18) return dflt;
    return Value::Int(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    std::string s(absl::StripAsciiWhitespace(v.as_string()));
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    int64_t i = 0;
    if (absl::SimpleAtoi(s, &i)) return Value::Int(i);
    double d = 0;
    if (absl::SimpleAtod(s, &d) && std::isfinite(d) && std::abs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(d));
    }
  }
  return dflt;
}

absl::StatusOr<Value> FilterFloat(Interpreter&, const Value& v, CallArgs& args) {
  const Value* fallback = Arg(args, 0, "default");
  if (v.is_number()) return Value::Float(v.as_float());
  if (v.is_string()) {
    double d = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(v.as_string()), &d)) return Value::Float(d);
  }
  return fallback ? *fallback : Value::Float(0);
}

absl::StatusOr<Value> FilterAbs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value::Float(std::abs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return absl::ResourceExhaustedError("OverflowError: abs");
    return Value::Int(std::abs(v.as_int()));
  }
  return TemplateError("TypeError",
                       absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
}

absl::StatusOr<Value> FilterRound(Interpreter&, const Value& v, CallArgs& args) {
  if (!v.is_number()) return TemplateError("TypeError", "round needs a number");
  ASSIGN_OR_RETURN(const int64_t precision, IntArg(args, 0, "precision", 0));
  const Value* method = Arg(args, 1, "method");
  const std::string how = method && method->is_string() ? method->as_string() : "common";
  const double scale =
      std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
  const double x = v.as_float() * scale;
  double r;
  if (how == "ceil") {
    r = std::ceil(x);
  } else if (how == "floor") {
    r = std::floor(x);
  } else {
    r = std::nearbyint(x);  // Python's round(): half to even
  }
  return Value::Float(r / scale);
}

absl::StatusOr<Value> FilterSafe(Interpreter&, const Value& v, CallArgs&) { return v; }

absl::StatusOr<Value> FilterEscape(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> FilterWordcount(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  int64_t words = 0;
  bool in_word = false;
  for (const char c : s) {
    const bool word_char = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                           (static_cast<unsigned char>(c) & 0x80);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::Int(words);
}

absl::StatusOr<Value> FilterCenter(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  ASSIGN_OR_RETURN(const int64_t width, IntArg(args, 0, "width", 80));
  const int64_t length = static_cast<int64_t>(CodePointCount(s));
  if (width <= length) return Value::String(s);
  RETURN_IF_ERROR(interp.CheckSize(width));
  const int64_t pad = width - length;
  const int64_t left = pad / 2 + (pad & width & 1);
  return Value::String(std::string(left, ' ') + s + std::string(pad - left, ' '));
}

absl::StatusOr<Value> FilterAttr(Interpreter& interp, const Value& v, CallArgs& args) {
  const Value* name = Arg(args, 0, "name");
  if (name == nullptr || !name->is_string()) return TemplateError("TypeError", "attr takes a name");
  if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_error());
  return GetAttribute(interp, v, name->as_string());
}

// select / reject / selectattr / rejectattr share this: keep items whose test result (or
// truthiness, with no test) equals `keep`.
absl::StatusOr<Value> Select(Interpreter& interp, const Value& v, CallArgs& args, bool on_attribute,
                             bool keep) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  size_t next = 0;
  std::string attribute;
  if (on_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return TemplateError("FilterArgumentError", "Missing parameter for attribute name");
    }
    attribute = args.positional[next++].as_string();
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) {
      return TemplateError("TypeError", "the test name must be a string");
    }
    test = args.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + next, args.positional.end());
  test_args.keyword = args.keyword;
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  ValueList out;
  for (const Value& item : items) {
    const Value subject = on_attribute ? LookupPath(interp, item, attribute) : item;
    bool result;
    if (test) {
      CallArgs copy = test_args;
      ASSIGN_OR_RETURN(result, ApplyTest(interp, *test, subject, copy));
    } else {
      result = subject.Truthy();
    }
    if (result == keep) out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterSelect(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, false, true);
}
absl::StatusOr<Value> FilterReject(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, false, false);
}
absl::StatusOr<Value> FilterSelectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, true, true);
}
absl::StatusOr<Value> FilterRejectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return Select(i, v, a, true, false);
}

absl::StatusOr<Value> FilterMap(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  ValueList out;
  if (args.positional.empty()) {
    const Value* attribute = Arg(args, 99, "attribute");
    if (attribute == nullptr || !attribute->is_string()) {
      return TemplateError("FilterArgumentError", "map needs a filter name or attribute=");
    }
    const Value* fallback = Arg(args, 99, "default");
    for (const Value& item : items) {
      Value x = LookupPath(interp, item, attribute->as_string());
      if (x.is_undefined() && fallback) x = *fallback;
      out.push_back(std::move(x));
    }
    return Value::List(std::move(out));
  }
  if (!args.positional[0].is_string())
    return TemplateError("TypeError", "map's filter must be named");
  const std::string filter = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs copy = rest;
    ASSIGN_OR_RETURN(Value x, ApplyFilter(interp, filter, item, copy));
    out.push_back(std::move(x));
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> FilterSort(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  const bool reverse = BoolArg(args, 0, "reverse", false);
  const bool case_sensitive = BoolArg(args, 1, "case_sensitive", false);
  const Value* attribute = Arg(args, 2, "attribute");
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size())));
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, reverse, [&](const Value& item) {
    return attribute && attribute->is_string() ? LookupPath(interp, item, attribute->as_string())
                                               : item;
  }));
  return Value::List(std::move(items));
}

absl::StatusOr<Value> FilterUnique(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = Arg(args, 1, "attribute");
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(items.size() * items.size() / 256 + 1)));
  ValueList out;
  ValueList seen;
  for (const Value& item : items) {
    Value key = attribute && attribute->is_string()
                    ? LookupPath(interp, item, attribute->as_string())
                    : item;
    if (!case_sensitive && key.is_string()) key = Value::String(AsciiLower(key.as_string()));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) {
      continue;
    }
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::List(std::move(out));
}

absl::StatusOr<Value> MinMax(Interpreter& interp, const Value& v, CallArgs& args, bool max) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(interp, v));
  if (items.empty())
    return Value::Undefined("UndefinedError: No aggregated item, sequence was empty.");
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const Value* attribute = Arg(args, 1, "attribute");
  RETURN_IF_ERROR(SortBy(items, !case_sensitive, false, [&](const Value& item) {
    return attribute && attribute->is_string() ? LookupPath(interp, item, attribute->as_string())
                                               : item;
  }));
  return max ? items.back() : items.front();
}

absl::StatusOr<Value> FilterMin(Interpreter& i, const Value& v, CallArgs& a) {
  return MinMax(i, v, a, false);
}
absl::StatusOr<Value> FilterMax(Interpreter& i, const Value& v, CallArgs& a) {
  return MinMax(i, v, a, true);
}

absl::StatusOr<Value> FilterSum(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, v));
  const Value* attribute = Arg(args, 0, "attribute");
  const Value* start = Arg(args, 1, "start");
  Value total = start ? *start : Value::Int(0);
  for (const Value& item : items) {
    const Value x = attribute && attribute->is_string()
                        ? LookupPath(interp, item, attribute->as_string())
                        : item;
    if (!total.is_number() || !x.is_number()) {
      return TemplateError("TypeError", "sum() can only add numbers");
    }
    if (total.is_float() || x.is_float()) {
      total = Value::Float(total.as_float() + x.as_float());
    } else {
      total = Value::Int(total.as_int() + x.as_int());
    }
  }
  return total;
}

absl::StatusOr<Value> FilterFormat(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string format, Str(v));
  ASSIGN_OR_RETURN(std::string out, PercentFormat(format, args.positional));
  RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  return Value::String(std::move(out));
}

const absl::flat_hash_map<absl::string_view, Filter>& Filters() {
  static const auto* kFilters = new absl::flat_hash_map<absl::string_view, Filter>{
      {"abs", FilterAbs},
      {"attr", FilterAttr},
      {"capitalize", FilterCapitalize},
      {"center", FilterCenter},
      {"count", FilterLength},
      {"d", FilterDefault},
      {"default", FilterDefault},
      {"dictsort", FilterDictsort},
      {"e", FilterEscape},
      {"escape", FilterEscape},
      {"first", FilterFirst},
      {"float", FilterFloat},
      {"forceescape", FilterEscape},
      {"format", FilterFormat},
      {"indent", FilterIndent},
      {"int", FilterInt},
      {"items", FilterItems},
      {"join", FilterJoin},
      {"last", FilterLast},
      {"length", FilterLength},
      {"list", FilterList},
      {"lower", FilterLower},
      {"map", FilterMap},
      {"max", FilterMax},
      {"min", FilterMin},
      {"reject", FilterReject},
      {"rejectattr", FilterRejectattr},
      {"replace", FilterReplace},
      {"reverse", FilterReverse},
      {"round", FilterRound},
      {"safe", FilterSafe},
      {"select", FilterSelect},
      {"selectattr", FilterSelectattr},
      {"sort", FilterSort},
      {"string", FilterString},
      {"sum", FilterSum},
      {"title", FilterTitle},
      {"tojson", FilterTojson},
      {"trim", FilterTrim},
      {"unique", FilterUnique},
      {"upper", FilterUpper},
      {"wordcount", FilterWordcount},
  };
  return *kFilters;
}

// ---- tests ----

absl::StatusOr<bool> Test(Interpreter& interp, absl::string_view name, const Value& v,
                          CallArgs& args) {
  const Value* other = Arg(args, 0, "other");
  const auto need_other = [&]() -> absl::Status {
    if (other == nullptr) {
      return TemplateError("TypeError",
                           absl::StrCat("test '", std::string(name), "' takes one argument"));
    }
    return absl::OkStatus();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable")
    return v.is_string() || v.is_list() || v.is_undefined() || (v.is_dict() && !v.is_namespace());
  if (name == "sequence")
    return v.is_string() || v.is_list() || v.is_undefined() || (v.is_dict() && !v.is_namespace());
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) return TemplateError("TypeError", "odd/even take an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    RETURN_IF_ERROR(need_other());
    if (!v.is_number() || !other->is_number() || other->as_float() == 0) {
      return TemplateError("TypeError", "divisibleby takes non-zero numbers");
    }
    return std::fmod(v.as_float(), other->as_float()) == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    CallArgs none;
    ASSIGN_OR_RETURN(const Value r, StringMethod(interp, v.as_string(),
                                                 name == "lower" ? "islower" : "isupper", none));
    return r.as_bool();
  }
  if (name == "sameas") {
    RETURN_IF_ERROR(need_other());
    if (v.is_list() || v.is_dict() || v.is_callable()) {
      return v.kind() == other->kind() && Equals(v, *other) &&
             (v.is_dict() ? v.dict_ptr() == other->dict_ptr() : true);
    }
    return v.kind() == other->kind() && Equals(v, *other);
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    RETURN_IF_ERROR(need_other());
    return Equals(v, *other);
  }
  if (name == "ne" || name == "!=") {
    RETURN_IF_ERROR(need_other());
    return !Equals(v, *other);
  }
  if (name == "in") {
    RETURN_IF_ERROR(need_other());
    if (other->is_string())
      return v.is_string() && other->as_string().find(v.as_string()) != std::string::npos;
    if (other->is_dict()) return v.is_string() && other->as_dict().Find(v.as_string()) != nullptr;
    ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, *other));
    return std::any_of(items.begin(), items.end(), [&](const Value& x) { return Equals(v, x); });
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" ||
      name == ">" || name == "le" || name == "<=" || name == "ge" || name == ">=") {
    RETURN_IF_ERROR(need_other());
    if (v.is_undefined()) return absl::InvalidArgumentError(v.undefined_error());
    const bool lt = name == "lt" || name == "lessthan" || name == "<";
    const bool gt = name == "gt" || name == "greaterthan" || name == ">";
    if (lt) return Less(v, *other, false);
    if (gt) return Less(*other, v, false);
    if (name == "le" || name == "<=") {
      ASSIGN_OR_RETURN(const bool greater, Less(*other, v, false));
      return !greater;
    }
    ASSIGN_OR_RETURN(const bool less, Less(v, *other, false));
    return !less;
  }
  if (name == "filter") return v.is_string() && Filters().contains(v.as_string());
  if (name == "test") {
    if (!v.is_string()) return false;
    CallArgs none;
    return Test(interp, v.as_string(), Value::None(), none).status().code() !=
           absl::StatusCode::kNotFound;
  }
  return absl::NotFoundError(
      absl::StrCat("TemplateAssertionError: No test named '", std::string(name), "'."));
}

// ---- globals ----

absl::StatusOr<Value> Range(Interpreter& interp, CallArgs& args) {
  std::vector<int64_t> bounds;
  for (const Value& a : args.positional) {
    if (!a.is_int() && !a.is_bool()) {
      return TemplateError(
          "TypeError",
          absl::StrCat("'", a.TypeName(), "' object cannot be interpreted as an integer"));
    }
    bounds.push_back(a.as_int());
  }
  if (bounds.empty() || bounds.size() > 3) {
    return TemplateError("TypeError", "range expected 1 to 3 arguments");
  }
  const int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  const int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  const int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) return TemplateError("ValueError", "range() arg 3 must not be zero");
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 stride = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
  const __int128 count = span <= 0 ? 0 : (span + stride - 1) / stride;
  if (count > kMaxRange) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (",
        kMaxRange, ")."));
  }
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(count)));
  ValueList out;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    out.push_back(Value::Int(start + i * step));
  return Value::List(std::move(out));
}

absl::StatusOr<Value> StrftimeNow(Interpreter& interp, CallArgs& args) {
  const Value* format = Arg(args, 0, "format");
  if (format == nullptr || !format->is_string()) {
    return TemplateError("TypeError", "strftime_now takes a format string");
  }
  const std::string& f = format->as_string();
  if (f.empty()) return Value::String("");
  if (f.size() > 1024) return TemplateError("ValueError", "strftime_now format is too long");
  // Every conversion expands to at most a few dozen bytes.
  std::string out(f.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), f.c_str(), &interp.now());
  out.resize(n);
  return Value::String(std::move(out));
}

}  // namespace

absl::StatusOr<std::string> PercentFormat(const std::string& format, const ValueList& values) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i == format.size()) return TemplateError("ValueError", "incomplete format");
    const char conversion = format[i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) {
      return TemplateError("TypeError", "not enough arguments for format string");
    }
    if (out.size() > kMaxFormattedBytes) {
      return absl::ResourceExhaustedError("a %-format result is too long");
    }
    const Value& x = values[next++];
    switch (conversion) {
      case 's': {
        ASSIGN_OR_RETURN(const std::string s, ToPythonStr(x));
        out += s;
        break;
      }
      case 'r': {
        ASSIGN_OR_RETURN(const std::string s, ToPythonRepr(x));
        out += s;
        break;
      }
      case 'd':
      case 'i':
        if (!x.is_number()) return TemplateError("TypeError", "%d format: a number is required");
        absl::StrAppend(&out,
                        x.is_float() ? static_cast<int64_t>(std::trunc(x.as_float())) : x.as_int());
        break;
      default:
        return TemplateError("ValueError", absl::StrCat("unsupported format character '",
                                                        std::string(1, conversion), "'"));
    }
  }
  if (next < values.size()) {
    return TemplateError("TypeError", "not all arguments converted during string formatting");
  }
  return out;
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
        DecodeCodePoint(s, i, &length);
        out.push_back(Value::String(s.substr(i, length)));
        i += length;
      }
      return out;
    }
    case Value::Kind::kDict:
      if (!v.is_namespace()) {
        ValueList out;
        for (const auto& [key, value] : v.as_dict().entries()) out.push_back(Value::String(key));
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
    if (key.is_string()) {
      const Value* v = obj.as_dict().Find(key.as_string());
      if (v) return *v;
      return NoAttribute(obj, key.as_string());
    }
    return Value::Undefined("UndefinedError: dict key must be a string");
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const ValueList& items = obj.as_list();
      const int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[i];
      return Value::Undefined(absl::StrCat("UndefinedError: ", obj.TypeName(),
                                           " object has no element ", key.as_int()));
    }
    const std::u32string cps = ToCodePoints(obj.as_string());
    const int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return Value::String(FromCodePoints(cps.substr(i, 1)));
    return Value::Undefined(
        absl::StrCat("UndefinedError: str object has no element ", key.as_int()));
  }
  if (key.is_string()) return GetAttribute(interp, obj, key.as_string());
  return Value::Undefined(
      absl::StrCat("UndefinedError: '", obj.TypeName(), "' object has no element"));
}

absl::StatusOr<Value> ApplyFilter(Interpreter& interp, absl::string_view name, const Value& subject,
                                  CallArgs& args) {
  const auto it = Filters().find(name);
  if (it == Filters().end()) {
    return TemplateError("TemplateAssertionError",
                         absl::StrCat("No filter named '", std::string(name), "'."));
  }
  RETURN_IF_ERROR(interp.Charge(1));
  return it->second(interp, subject, args);
}

absl::StatusOr<bool> ApplyTest(Interpreter& interp, absl::string_view name, const Value& subject,
                               CallArgs& args) {
  RETURN_IF_ERROR(interp.Charge(1));
  absl::StatusOr<bool> result = Test(interp, name, subject, args);
  if (result.status().code() == absl::StatusCode::kNotFound) {
    return absl::InvalidArgumentError(result.status().message());
  }
  return result;
}

void AddGlobals(Interpreter& interp, Scope& scope) {
  Interpreter* const in = &interp;
  scope.Set("range", Value::Callable("range", [in](CallArgs& args) { return Range(*in, args); }));
  scope.Set("namespace",
            Value::Callable("namespace", [in](CallArgs& args) -> absl::StatusOr<Value> {
              Value ns = in->NewNamespace();
              for (const Value& a : args.positional) {
                if (!a.is_dict()) return TemplateError("TypeError", "namespace() takes a dict");
                for (const auto& [key, value] : a.as_dict().entries()) {
                  RETURN_IF_ERROR(StoreInNamespace(ns, key, value));
                }
              }
              for (auto& [key, value] : args.keyword) {
                RETURN_IF_ERROR(StoreInNamespace(ns, key, value));
              }
              return ns;
            }));
  scope.Set("dict", Value::Callable("dict", [](CallArgs& args) -> absl::StatusOr<Value> {
              auto dict = std::make_shared<ValueDict>();
              for (const Value& a : args.positional) {
                if (!a.is_dict()) return TemplateError("TypeError", "dict() takes a dict");
                for (const auto& [key, value] : a.as_dict().entries()) dict->Set(key, value);
              }
              for (auto& [key, value] : args.keyword) dict->Set(key, value);
              return Value::Dict(std::move(dict));
            }));
  scope.Set("raise_exception",
            Value::Callable("raise_exception", [](CallArgs& args) -> absl::StatusOr<Value> {
              std::string message;
              if (const Value* m = Arg(args, 0, "message")) {
                ASSIGN_OR_RETURN(message, ToPythonStr(*m));
              }
              absl::Status status = absl::InvalidArgumentError(message);
              status.SetPayload(kRaisedPayload, absl::Cord("1"));
              return status;
            }));
  scope.Set("strftime_now", Value::Callable("strftime_now", [in](CallArgs& args) {
              return StrftimeNow(*in, args);
            }));
}

}  // namespace pagoda::jinja
