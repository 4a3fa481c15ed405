// (see builtin_util.h)
#include "lib/jinja/builtin_util.h"

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
#include "lib/jinja/builtins.h"
#include "lib/jinja/text.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {
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

}  // namespace pagoda::jinja
