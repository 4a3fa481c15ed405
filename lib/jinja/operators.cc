#include "lib/jinja/operators.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/interpreter.h"  // TemplateError, UndefinedError
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {

absl::StatusOr<Value> IntResult(__int128 r) {
  if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
    return absl::ResourceExhaustedError("OverflowError: integer result out of the int64 range");
  }
  return Value::Int(static_cast<int64_t>(r));
}

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

absl::StatusOr<Value> ApplyBinary(RenderBudget& budget, const std::string& op, const Value& a,
                                  const Value& b) {
  if (op == "~") {
    ASSIGN_OR_RETURN(std::string s, ToPythonStr(a));
    ASSIGN_OR_RETURN(const std::string t, ToPythonStr(b));
    RETURN_IF_ERROR(budget.CheckSize(static_cast<int64_t>(s.size() + t.size())));
    RETURN_IF_ERROR(budget.ChargeBytes(static_cast<int64_t>(s.size() + t.size())));
    return Value::String(s + t);
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const auto unsupported = [&] {
    return TemplateError("TypeError", absl::StrCat("unsupported operand type(s) for ", op, ": '",
                                                   a.TypeName(), "' and '", b.TypeName(), "'"));
  };
  if (a.is_number() && b.is_number()) {
    const bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return TemplateError("ZeroDivisionError", "division by zero");
      return Value::Float(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float();
      const double y = b.as_float();
      if (op == "+") return Value::Float(x + y);
      if (op == "-") return Value::Float(x - y);
      if (op == "*") return Value::Float(x * y);
      if (op == "**") return Value::Float(std::pow(x, y));
      if (y == 0) return TemplateError("ZeroDivisionError", "float division by zero");
      if (op == "//") return Value::Float(std::floor(x / y));
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::Float(m);
      }
      return unsupported();
    }
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    if (op == "+") return IntResult(static_cast<__int128>(x) + y);
    if (op == "-") return IntResult(static_cast<__int128>(x) - y);
    if (op == "*") return IntResult(static_cast<__int128>(x) * y);
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      __int128 r = 1;
      for (int64_t i = 0; i < y; ++i) {
        r *= x;
        if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
          return IntResult(r);
        }
        if (r == 0 || r == 1) break;
      }
      return IntResult(r);
    }
    if (y == 0) return TemplateError("ZeroDivisionError", "integer division or modulo by zero");
    if (op == "//") {
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        return IntResult(-static_cast<__int128>(x));
      return Value::Int(FloorDiv(x, y));
    }
    if (op == "%") {
      if (y == -1) return Value::Int(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) {
        // Markup + str escapes the str (markupsafe's __add__ / __radd__).
        const std::string x = a.is_markup() ? a.as_string() : HtmlEscape(a.as_string());
        const std::string y = b.is_markup() ? b.as_string() : HtmlEscape(b.as_string());
        const int64_t size = static_cast<int64_t>(x.size() + y.size());
        RETURN_IF_ERROR(budget.CheckSize(size));
        RETURN_IF_ERROR(budget.ChargeBytes(size));
        return Value::Markup(x + y);
      }
      const int64_t size = static_cast<int64_t>(a.as_string().size() + b.as_string().size());
      RETURN_IF_ERROR(budget.CheckSize(size));
      RETURN_IF_ERROR(budget.ChargeBytes(size));
      return Value::String(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() &&
        !b.is_generator()) {
      ValueList items = a.as_list();
      const ValueList& more = b.as_list();
      RETURN_IF_ERROR(budget.CheckSize(static_cast<int64_t>(items.size() + more.size())));
      RETURN_IF_ERROR(budget.Charge(static_cast<int64_t>(items.size() + more.size())));
      items.insert(items.end(), more.begin(), more.end());
      return Value::List(std::move(items), a.is_tuple());
    }
    return unsupported();
  }
  if (op == "%" && a.is_string()) {
    ValueList values = b.is_tuple() ? b.as_list() : ValueList{b};
    if (a.is_markup()) {
      // Markup % args escapes the string arguments.
      for (Value& x : values) {
        if (x.is_string() && !x.is_markup()) x = Value::Markup(HtmlEscape(x.as_string()));
      }
    }
    ASSIGN_OR_RETURN(std::string out, PercentFormat(a.as_string(), values));
    RETURN_IF_ERROR(budget.CheckSize(static_cast<int64_t>(out.size())));
    return a.is_markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
  }
  if (op == "*") {
    // Repetition: str * int, list * int (either order).
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if (!count.is_int() && !count.is_bool()) return unsupported();
    const int64_t n = std::max<int64_t>(0, count.as_int());
    // A size past the bound is checked as bound + 1, before it is narrowed to int64.
    const int64_t bound = budget.limits().max_output_bytes;
    if (seq.is_string()) {
      const __int128 size = static_cast<__int128>(seq.as_string().size()) * n;
      RETURN_IF_ERROR(budget.CheckSize(size > bound ? bound + 1 : static_cast<int64_t>(size)));
      RETURN_IF_ERROR(budget.ChargeBytes(static_cast<int64_t>(size)));
      std::string out;
      out.reserve(static_cast<size_t>(size));
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return seq.is_markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
    }
    if (seq.is_list()) {
      const __int128 size = static_cast<__int128>(seq.as_list().size()) * n;
      RETURN_IF_ERROR(budget.CheckSize(size > bound ? bound + 1 : static_cast<int64_t>(size)));
      RETURN_IF_ERROR(budget.Charge(static_cast<int64_t>(size)));
      ValueList out;
      for (int64_t i = 0; i < n; ++i) {
        out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
      }
      return Value::List(std::move(out), seq.is_tuple());
    }
    return unsupported();
  }
  return unsupported();
}

absl::StatusOr<bool> ApplyComparison(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        return TemplateError("TypeError", absl::StrCat("'in <string>' requires string as left "
                                                       "operand, not ",
                                                       a.TypeName()));
      }
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& item : b.as_list()) {
        if (Equals(a, item)) {
          found = true;
          break;
        }
      }
    } else if (b.is_dict()) {
      if (!IsHashable(a)) {
        return TemplateError("TypeError", absl::StrCat("unhashable type: '", a.TypeName(), "'"));
      }
      found = b.as_dict().Find(a) != nullptr;
    } else if (!b.is_undefined()) {
      return TemplateError("TypeError",
                           absl::StrCat("argument of type '", b.TypeName(), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  int order = 0;  // <0, 0, >0
  if (a.is_number() && b.is_number()) {
    const double x = a.as_float();
    const double y = b.as_float();
    if (a.is_float() || b.is_float()) {
      order = x < y ? -1 : (x > y ? 1 : 0);
    } else {
      order = a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
  } else if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    order = c < 0 ? -1 : (c > 0 ? 1 : 0);
  } else if (a.is_list() && b.is_list()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    size_t i = 0;
    while (i < x.size() && i < y.size() && Equals(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) {
      ASSIGN_OR_RETURN(const bool less, ApplyComparison("<", x[i], y[i]));
      order = less ? -1 : 1;
    } else {
      order = x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
  } else {
    return TemplateError(
        "TypeError", absl::StrCat("'", op, "' not supported between instances of '", a.TypeName(),
                                  "' and '", b.TypeName(), "'"));
  }
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace pagoda::jinja
