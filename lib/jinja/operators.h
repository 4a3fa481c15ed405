// The binary and comparison operators of templates, as Python defines them for the values
// templates hold. Internal to pagoda_jinja.
#ifndef PAGODA_LIB_JINJA_OPERATORS_H_
#define PAGODA_LIB_JINJA_OPERATORS_H_

#include <string>

#include "absl/status/statusor.h"
#include "lib/jinja/render_budget.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

// `a op b` for op in + - * / // % ** ~. What it builds (strings, lists) is checked against
// and charged to `budget`; INVALID_ARGUMENT ("TypeError: ...", "ZeroDivisionError: ...") for
// what Python refuses, RESOURCE_EXHAUSTED past the budget or the int64 range.
absl::StatusOr<Value> ApplyBinary(RenderBudget& budget, const std::string& op, const Value& a,
                                  const Value& b);
// `a op b` for op in == != < <= > >= in notin; INVALID_ARGUMENT ("TypeError: ...") for
// operands Python cannot order or search. Builds nothing, so spends no budget.
absl::StatusOr<bool> ApplyComparison(const std::string& op, const Value& a, const Value& b);
// `r` as an int, or OverflowError (RESOURCE_EXHAUSTED) outside the int64 range.
absl::StatusOr<Value> IntResult(__int128 r);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_OPERATORS_H_
