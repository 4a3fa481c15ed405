// Helpers shared by the builtins (filters, tests, methods, globals): argument access,
// Python ordering, jinja2's attribute paths. Internal to pagoda_jinja.
#ifndef PAGODA_LIB_JINJA_BUILTIN_UTIL_H_
#define PAGODA_LIB_JINJA_BUILTIN_UTIL_H_

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/interpreter.h"
#include "lib/jinja/value.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {

// The argument at `index`, else the keyword `name`, else null.
const Value* Arg(const CallArgs& args, size_t index, absl::string_view name);
bool BoolArg(const CallArgs& args, size_t index, absl::string_view name, bool fallback);
// A string argument, absent when not given or None.
absl::StatusOr<std::optional<std::string>> OptionalStringArg(const CallArgs& args, size_t index,
                                                             absl::string_view name);
absl::StatusOr<int64_t> IntArg(const CallArgs& args, size_t index, absl::string_view name,
                               int64_t fallback);
inline absl::StatusOr<std::string> Str(const Value& v) { return ToPythonStr(v); }

// Python's `<` for sorting; `fold` lowercases strings first (jinja2's case_sensitive=False).
absl::StatusOr<bool> Less(const Value& a, const Value& b, bool fold);

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
Value LookupPath(Interpreter& interp, const Value& item, const std::string& path);

// The str methods templates call: s.strip(), s.split(...), ...
absl::StatusOr<Value> StringMethod(Interpreter& interp, const std::string& s,
                                   const std::string& name, CallArgs& args);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_BUILTIN_UTIL_H_
