// jinja2's filters on text: case, trim, replace, indent, escape, center, format (%-format).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/filters.h"
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

// A string derived from `v`: Markup stays Markup through the str methods markupsafe wraps
// (string, trim, upper, lower, capitalize), as jinja2's soft_str keeps it.
Value Derived(const Value& v, std::string s) {
  return v.is_markup() ? Value::Markup(std::move(s)) : Value::String(std::move(s));
}

absl::StatusOr<Value> FilterString(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(std::string s, Str(v));
  return Derived(v, std::move(s));
}

absl::StatusOr<Value> FilterTrim(Interpreter&, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  ASSIGN_OR_RETURN(const std::optional<std::string> chars, OptionalStringArg(args, 0, "chars"));
  return Derived(v, Strip(s, chars, true, true));
}

absl::StatusOr<Value> FilterUpper(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Derived(v, AsciiUpper(s));
}

absl::StatusOr<Value> FilterLower(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Derived(v, AsciiLower(s));
}

absl::StatusOr<Value> FilterCapitalize(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Derived(v, PythonCapitalize(s));
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

absl::StatusOr<Value> FilterSafe(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_markup()) return v;
  ASSIGN_OR_RETURN(std::string s, Str(v));
  return Value::Markup(std::move(s));
}

// escape leaves what is already Markup alone; forceescape escapes it again.
absl::StatusOr<Value> FilterEscape(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_markup()) return v;
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Value::Markup(HtmlEscape(s));
}

absl::StatusOr<Value> FilterForceEscape(Interpreter&, const Value& v, CallArgs&) {
  ASSIGN_OR_RETURN(const std::string s, Str(v));
  return Value::Markup(HtmlEscape(s));
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

absl::StatusOr<Value> FilterFormat(Interpreter& interp, const Value& v, CallArgs& args) {
  ASSIGN_OR_RETURN(const std::string format, Str(v));
  ASSIGN_OR_RETURN(std::string out, PercentFormat(format, args.positional));
  RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
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

void AddStringFilters(FilterTable& table) {
  table.insert({
      {"capitalize", FilterCapitalize},
      {"center", FilterCenter},
      {"e", FilterEscape},
      {"escape", FilterEscape},
      {"forceescape", FilterForceEscape},
      {"format", FilterFormat},
      {"indent", FilterIndent},
      {"lower", FilterLower},
      {"replace", FilterReplace},
      {"safe", FilterSafe},
      {"string", FilterString},
      {"title", FilterTitle},
      {"trim", FilterTrim},
      {"upper", FilterUpper},
      {"wordcount", FilterWordcount},
  });
}

}  // namespace pagoda::jinja
