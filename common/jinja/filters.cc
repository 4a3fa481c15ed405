// jinja2's filters, as transformers configures them (tojson without HTML escaping).
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
#include "common/jinja/builtin_util.h"
#include "common/jinja/builtins.h"
#include "common/jinja/text.h"
#include "common/jinja/value_format.h"
#include "common/status_macros.h"
#include "common/text/utf8.h"

namespace pagoda::jinja {
namespace {

using Filter = absl::StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(Utf8CodePointCount(v.as_string()));
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
    matches = static_cast<int64_t>(Utf8CodePointCount(s)) + 1;
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
    std::u32string cps = DecodeUtf8(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::String(EncodeUtf8(cps));
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
  const int64_t length = static_cast<int64_t>(Utf8CodePointCount(s));
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

bool HasFilter(absl::string_view name) { return Filters().contains(name); }

}  // namespace pagoda::jinja
