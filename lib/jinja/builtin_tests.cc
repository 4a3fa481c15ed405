// jinja2's tests: `x is defined`, `x is string`, `x is divisibleby 3`, ...
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

namespace pagoda::jinja {
namespace {

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
    return v.is_string() || (v.is_list() && !v.is_generator()) || v.is_undefined() ||
           (v.is_dict() && !v.is_namespace());
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
    if (other->is_dict()) return other->as_dict().Find(v) != nullptr;
    ASSIGN_OR_RETURN(const ValueList items, Iterate(interp, *other));
    return std::any_of(items.begin(), items.end(), [&](const Value& x) { return Equals(v, x); });
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "gt" || name == "greaterthan" ||
      name == ">" || name == "le" || name == "<=" || name == "ge" || name == ">=") {
    RETURN_IF_ERROR(need_other());
    if (v.is_undefined()) return UndefinedError(v);
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
  if (name == "filter") return v.is_string() && HasFilter(v.as_string());
  if (name == "test") {
    if (!v.is_string()) return false;
    CallArgs none;
    return Test(interp, v.as_string(), Value::None(), none).status().code() !=
           absl::StatusCode::kNotFound;
  }
  return absl::NotFoundError(
      absl::StrCat("TemplateAssertionError: No test named '", std::string(name), "'."));
}

}  // namespace

absl::StatusOr<bool> ApplyTest(Interpreter& interp, absl::string_view name, const Value& subject,
                               CallArgs& args) {
  RETURN_IF_ERROR(interp.Charge(1));
  absl::StatusOr<bool> result = Test(interp, name, subject, args);
  if (result.status().code() == absl::StatusCode::kNotFound) {
    return absl::InvalidArgumentError(result.status().message());
  }
  return result;
}

}  // namespace pagoda::jinja
