// Python's str.format as templates call it ("{} of {name}".format(x, name=y)): replacement
// fields with auto or explicit numbering, names, .attribute and [key] lookups, !r / !s / !a
// conversions and the format-spec mini-language for str, int and float, as Python does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

// [[fill]align][sign][z][#][0][width][grouping][.precision][type]
struct Spec {
  std::string fill = " ";  // one code point
  char align = 0;          // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';
  bool alternate = false;
  int64_t width = 0;
  char grouping = 0;  // ',' or '_' or 0
  std::optional<int64_t> precision;
  char type = 0;
};

absl::Status FormatError(absl::string_view message) { return TemplateError("ValueError", message); }

// Reads a decimal count at s[*i], bounded so that padding can never pass the output limit.
absl::StatusOr<int64_t> ReadCount(const std::string& s, size_t* i) {
  int64_t n = 0;
  while (*i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[*i]))) {
    n = n * 10 + (s[*i] - '0');
    if (n > (int64_t{1} << 30)) return FormatError("Too many decimal digits in format string");
    ++*i;
  }
  return n;
}

absl::StatusOr<Spec> ParseSpec(const std::string& s) {
  Spec spec;
  size_t i = 0;
  const auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t first_length = 0;
  if (!s.empty()) Utf8CodePointAt(s, 0, &first_length);
  if (first_length > 0 && first_length < s.size() && is_align(s[first_length])) {
    spec.fill = s.substr(0, first_length);
    spec.align = s[first_length];
    i = first_length + 1;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == 'z') ++i;  // negative zero coerced: rare, read and ignored
  if (i < s.size() && s[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (spec.align == 0) {
      spec.fill.assign(1, '0');
      spec.align = '=';
    }
    ++i;
  }
  ASSIGN_OR_RETURN(spec.width, ReadCount(s, &i));
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) {
      return FormatError("Format specifier missing precision");
    }
    ASSIGN_OR_RETURN(spec.precision, ReadCount(s, &i));
  }
  if (i < s.size()) spec.type = s[i++];
  if (i < s.size()) return FormatError("Invalid format specifier");
  return spec;
}

// Pads `body` (whose first `sign_length` bytes are a sign or prefix, for '=') to the width.
std::string Pad(const std::string& body, size_t sign_length, const Spec& spec, char default_align) {
  const int64_t length = static_cast<int64_t>(Utf8CodePointCount(body));
  if (length >= spec.width) return body;
  const int64_t pad = spec.width - length;
  const auto repeat = [&](int64_t n) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += spec.fill;
    return out;
  };
  switch (spec.align ? spec.align : default_align) {
    case '<':
      return body + repeat(pad);
    case '^':
      return repeat(pad / 2) + body + repeat(pad - pad / 2);
    case '=':
      return body.substr(0, sign_length) + repeat(pad) + body.substr(sign_length);
    default:
      return repeat(pad) + body;
  }
}

// Groups the digits of `digits` by `every` with `separator`.
std::string Group(const std::string& digits, char separator, int every) {
  if (separator == 0) return digits;
  std::string out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % every == 0) out += separator;
    out += digits[k];
  }
  return out;
}

std::string SignOf(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

absl::StatusOr<std::string> FormatInt(int64_t value, const Spec& spec) {
  const bool negative = value < 0;
  // The magnitude as unsigned: -INT64_MIN does not fit an int64.
  uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  std::string digits, prefix;
  int every = 3;
  const char type = spec.type ? spec.type : 'd';
  if (type == 'c') {
    if (spec.sign != '-') return FormatError("Sign not allowed with integer format specifier 'c'");
    if (negative || magnitude > 0x10FFFF)
      return TemplateError("OverflowError", "%c arg not in range");
    return Pad(EncodeUtf8(std::u32string(1, static_cast<char32_t>(magnitude))), 0, spec, '<');
  }
  if (type == 'd' || type == 'n') {
    digits = std::to_string(magnitude);
  } else if (type == 'b' || type == 'o' || type == 'x' || type == 'X') {
    const int base = type == 'b' ? 2 : (type == 'o' ? 8 : 16);
    const char* alphabet = type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
    do {
      digits.insert(digits.begin(), alphabet[magnitude % base]);
      magnitude /= base;
    } while (magnitude > 0);
    if (spec.alternate) prefix = std::string("0") + type;
    every = 4;
  } else {
    return FormatError(
        absl::StrCat("Unknown format code '", std::string(1, type), "' for object of type 'int'"));
  }
  const std::string head = SignOf(negative, spec.sign) + prefix;
  return Pad(head + Group(digits, spec.grouping, every), head.size(), spec, '>');
}

absl::StatusOr<std::string> FormatFloatSpec(double value, const Spec& spec) {
  const bool negative = std::signbit(value) && !std::isnan(value);
  const double x = std::fabs(value);
  char type = spec.type;
  std::string body;
  if (std::isinf(x) || std::isnan(x)) {
    body = std::isinf(x) ? "inf" : "nan";
    if (type == 'E' || type == 'F' || type == 'G') body = absl::AsciiStrToUpper(body);
    if (type == '%') body += '%';
  } else if (type == 0 && !spec.precision) {
    body = FormatFloat(x);  // repr
  } else {
    const int precision = static_cast<int>(std::min<int64_t>(spec.precision.value_or(6), 400));
    const double scaled = type == '%' ? x * 100 : x;
    char conversion = type == '%' ? 'f' : type;
    if (type == 0 || type == 'n') conversion = 'g';
    if (std::string("eEfFgG").find(conversion) == std::string::npos) {
      return FormatError(absl::StrCat("Unknown format code '", std::string(1, type),
                                      "' for object of type 'float'"));
    }
    const std::string c_format =
        absl::StrCat("%", spec.alternate ? "#" : "", ".*", std::string(1, conversion));
    const int n = std::snprintf(nullptr, 0, c_format.c_str(), precision, scaled);
    body.assign(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
    std::snprintf(body.data(), body.size(), c_format.c_str(), precision, scaled);
    body.resize(static_cast<size_t>(std::max(n, 0)));
    // With no type, fixed notation keeps one digit past the point ('1.0', not '1').
    if (type == 0 && body.find_first_of(".e") == std::string::npos) body += ".0";
    if (type == '%') body += '%';
  }
  if (spec.grouping) {
    const size_t end = body.find_first_not_of("0123456789");
    body = Group(body.substr(0, end), spec.grouping, 3) +
           (end == std::string::npos ? "" : body.substr(end));
  }
  const std::string sign = SignOf(negative, spec.sign);
  return Pad(sign + body, sign.size(), spec, '>');
}

absl::StatusOr<std::string> FormatValue(Interpreter& interp, const Value& v,
                                        const std::string& spec_text) {
  if (spec_text.empty()) return ToPythonStr(v);
  ASSIGN_OR_RETURN(const Spec spec, ParseSpec(spec_text));
  // Bounded before any padding is built.
  RETURN_IF_ERROR(interp.CheckSize(spec.width * static_cast<int64_t>(spec.fill.size())));
  if (v.is_string()) {
    if (spec.type != 0 && spec.type != 's') {
      return FormatError(absl::StrCat("Unknown format code '", std::string(1, spec.type),
                                      "' for object of type 'str'"));
    }
    if (spec.sign != '-') return FormatError("Sign not allowed in string format specifier");
    if (spec.align == '=') {
      return FormatError("'=' alignment not allowed in string format specifier");
    }
    std::string s = v.as_string();
    if (spec.precision) {
      const std::u32string cps = DecodeUtf8(s);
      if (static_cast<int64_t>(cps.size()) > *spec.precision) {
        s = EncodeUtf8(cps.substr(0, static_cast<size_t>(*spec.precision)));
      }
    }
    return Pad(s, 0, spec, '<');
  }
  if (v.is_int() || v.is_bool()) {
    if (std::string("eEfFgG%").find(spec.type ? spec.type : 'd') != std::string::npos) {
      return FormatFloatSpec(static_cast<double>(v.as_int()), spec);
    }
    if (spec.precision) return FormatError("Precision not allowed in integer format specifier");
    return FormatInt(v.as_int(), spec);
  }
  if (v.is_float()) return FormatFloatSpec(v.as_float(), spec);
  return TemplateError("TypeError", absl::StrCat("unsupported format string passed to ",
                                                 v.TypeName(), ".__format__"));
}

// The value a field name such as "0", "name", "0.attr" or "name[key][1]" refers to.
absl::StatusOr<Value> ResolveField(Interpreter& interp, const std::string& field, CallArgs& args,
                                   int64_t* next_auto, bool* used_manual) {
  size_t end = field.find_first_of(".[");
  const std::string first = field.substr(0, end);
  Value v;
  int64_t index = 0;
  if (first.empty()) {
    if (*used_manual) {
      return FormatError(
          "cannot switch from manual field specification to automatic field numbering");
    }
    index = (*next_auto)++;
  } else if (absl::SimpleAtoi(first, &index)) {
    if (*next_auto > 0) {
      return FormatError(
          "cannot switch from automatic field numbering to manual field specification");
    }
    *used_manual = true;
  } else {
    const auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                                 [&](const auto& kw) { return kw.first == first; });
    if (it == args.keyword.end()) return TemplateError("KeyError", absl::StrCat("'", first, "'"));
    v = it->second;
    index = -1;
  }
  if (index >= 0) {
    if (index >= static_cast<int64_t>(args.positional.size())) {
      return TemplateError("IndexError", absl::StrCat("Replacement index ", index,
                                                      " out of range for "
                                                      "positional args tuple"));
    }
    v = args.positional[static_cast<size_t>(index)];
  }
  while (end != std::string::npos && end < field.size()) {
    if (v.is_undefined()) return UndefinedError(v);
    if (field[end] == '.') {
      const size_t next = field.find_first_of(".[", end + 1);
      const std::string name =
          field.substr(end + 1, next == std::string::npos ? next : next - end - 1);
      if (name.empty()) return FormatError("Empty attribute in format string");
      v = GetAttribute(interp, v, name);
      end = next;
    } else {
      const size_t close = field.find(']', end);
      if (close == std::string::npos) return FormatError("Missing ']' in format string");
      const std::string key = field.substr(end + 1, close - end - 1);
      if (key.empty()) return FormatError("Empty attribute in format string");
      int64_t k = 0;
      v = absl::SimpleAtoi(key, &k) ? GetItem(interp, v, Value::Int(k))
                                    : GetItem(interp, v, Value::String(key));
      end = close + 1;
      if (end < field.size() && field[end] != '.' && field[end] != '[') {
        return FormatError("Only '.' or '[' may follow ']' in format field specifier");
      }
    }
  }
  if (v.is_undefined()) return UndefinedError(v);
  return v;
}

absl::StatusOr<std::string> Render(Interpreter& interp, const std::string& format, CallArgs& args,
                                   bool escape, int recursion, int64_t* next_auto,
                                   bool* used_manual) {
  if (recursion > 2) return FormatError("Max string recursion exceeded");
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      return FormatError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    // The field runs to its matching '}' (a spec may nest one level of fields).
    size_t j = i + 1;
    int depth = 1;
    for (; j < format.size(); ++j) {
      if (format[j] == '{') ++depth;
      if (format[j] == '}' && --depth == 0) break;
    }
    if (j >= format.size()) return FormatError("expected '}' before end of string");
    const std::string field = format.substr(i + 1, j - i - 1);
    i = j;
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '!' && field[name_end] != ':') {
      if (field[name_end] == '[') {
        const size_t close = field.find(']', name_end);
        name_end = close == std::string::npos ? field.size() : close;
      }
      ++name_end;
    }
    name_end = std::min(name_end, field.size());
    ASSIGN_OR_RETURN(Value v,
                     ResolveField(interp, field.substr(0, name_end), args, next_auto, used_manual));
    size_t at = name_end;
    if (at < field.size() && field[at] == '!') {
      if (at + 1 >= field.size()) return FormatError("end of string while looking for conversion");
      const char conversion = field[at + 1];
      at += 2;
      if (at < field.size() && field[at] != ':') {
        return FormatError("expected ':' after conversion specifier");
      }
      if (conversion == 'r' || conversion == 'a') {
        ASSIGN_OR_RETURN(std::string r, ToPythonRepr(v));
        v = Value::String(std::move(r));
      } else if (conversion == 's') {
        ASSIGN_OR_RETURN(std::string s, ToPythonStr(v));
        v = Value::String(std::move(s));
      } else {
        return FormatError(
            absl::StrCat("Unknown conversion specifier ", std::string(1, conversion)));
      }
    }
    std::string spec;
    if (at < field.size()) {
      ASSIGN_OR_RETURN(spec, Render(interp, field.substr(at + 1), args, false, recursion + 1,
                                    next_auto, used_manual));
    }
    ASSIGN_OR_RETURN(std::string text, FormatValue(interp, v, spec));
    // Markup.format escapes what it inserts unless that is Markup too.
    out += escape && !v.is_markup() ? HtmlEscape(text) : text;
  }
  RETURN_IF_ERROR(interp.CheckSize(static_cast<int64_t>(out.size())));
  return out;
}

}  // namespace

absl::StatusOr<Value> PythonStrFormat(Interpreter& interp, const Value& format, CallArgs& args) {
  RETURN_IF_ERROR(interp.Charge(static_cast<int64_t>(args.positional.size() + 1)));
  int64_t next_auto = 0;
  bool used_manual = false;
  ASSIGN_OR_RETURN(std::string out, Render(interp, format.as_string(), args, format.is_markup(), 0,
                                           &next_auto, &used_manual));
  RETURN_IF_ERROR(interp.ChargeBytes(static_cast<int64_t>(out.size())));
  return format.is_markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
}

}  // namespace pagoda::jinja
