// Evaluates expressions for the Interpreter, which keeps the statements. Internal to
// pagoda_jinja.
#ifndef PAGODA_LIB_JINJA_EXPRESSION_EVALUATOR_H_
#define PAGODA_LIB_JINJA_EXPRESSION_EVALUATOR_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/render_budget.h"
#include "lib/jinja/scope.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

class Interpreter;

// One per render, beside the Interpreter that owns it. Errors carry the expression's line.
class ExpressionEvaluator {
 public:
  // `interp` calls what templates call (macros run statements); `budget` is the render's.
  // Neither is owned; both outlive the evaluator.
  ExpressionEvaluator(Interpreter& interp, RenderBudget& budget)
      : interp_(interp), budget_(budget) {}
  ExpressionEvaluator(const ExpressionEvaluator&) = delete;
  ExpressionEvaluator& operator=(const ExpressionEvaluator&) = delete;

  // The value of `e` in `scope`; RESOURCE_EXHAUSTED when it nests past the budget's depth or
  // builds a value deeper than kMaxValueDepth.
  absl::StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope);
  // Appends the values of e.children[first..] and of e.keywords to *args.
  absl::Status EvalArgs(const Expr& e, size_t first, const ScopePtr& scope, CallArgs* args);
  // The filter (chain) `e` applied; where the innermost filter has no subject expression
  // (a filter block, a block set), `subject` is its subject.
  absl::StatusOr<Value> EvalFilter(const Expr& e, Value subject, const ScopePtr& scope);

 private:
  absl::StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope);

  Interpreter& interp_;
  RenderBudget& budget_;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_EXPRESSION_EVALUATOR_H_
