// Building expression nodes for the parser: each node records its subtree's depth, so that
// nesting past kMaxExprDepth (chains such as `a|f|f|f...` or `a+a+a...` too, not only recursion)
// is a syntax error before the evaluator would recurse that deep.
#ifndef PAGODA_LIB_JINJA_EXPR_BUILDER_H_
#define PAGODA_LIB_JINJA_EXPR_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/jinja/ast.h"

namespace pagoda::jinja {

// A node of `kind` at `line`, with no children yet (the caller seals it when it has them).
ExprPtr NewExpr(Expr::Kind kind, int line);
// Sets e's depth from its children and keywords; INVALID_ARGUMENT past kMaxExprDepth.
absl::Status SealExpr(Expr* e);
// A sealed node of `kind` with `children` and `name`.
absl::StatusOr<ExprPtr> MakeExpr(Expr::Kind kind, int line, std::vector<ExprPtr> children,
                                 std::string name = "");
// The non-null ones of a, b, c, in order (a is always kept).
std::vector<ExprPtr> ExprChildren(ExprPtr a, ExprPtr b = nullptr, ExprPtr c = nullptr);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_EXPR_BUILDER_H_
