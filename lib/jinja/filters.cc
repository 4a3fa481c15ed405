// jinja2's filters, as transformers configures them (tojson without HTML escaping): the table,
// and the filters on any value (defaults, lengths, numbers, tojson). The rest: filters.h.
#include "lib/jinja/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtin_util.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/value_format.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {
namespace {

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(Utf8CodePointCount(v.as_string()));
    case Value::Kind::kList:
      if (v.is_generator()) {
        return TemplateError("TypeError", "object of type 'generator' has no len()");
      }
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
    o.item_separator = std::string(",");  // not `= ","`: GCC 12 -Wrestrict misfires (PR105329)
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

absl::StatusOr<Value> FilterAttr(Interpreter& interp, const Value& v, CallArgs& args) {
  const Value* name = Arg(args, 0, "name");
  if (name == nullptr || !name->is_string()) return TemplateError("TypeError", "attr takes a name");
  if (v.is_undefined()) return UndefinedError(v);
  return GetAttribute(interp, v, name->as_string());
}

const FilterTable& Filters() {
  static const FilterTable* const kFilters = [] {
    auto* table = new FilterTable;
    table->insert({
        {"abs", FilterAbs},
        {"attr", FilterAttr},
        {"count", FilterLength},
        {"d", FilterDefault},
        {"default", FilterDefault},
        {"float", FilterFloat},
        {"int", FilterInt},
        {"length", FilterLength},
        {"round", FilterRound},
        {"tojson", FilterTojson},
    });
    AddStringFilters(*table);
    AddSequenceFilters(*table);
    return table;
  }();
  return *kFilters;
}

}  // namespace

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
