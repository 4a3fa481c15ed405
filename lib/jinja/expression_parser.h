// Template expressions to trees, following jinja2's grammar and operator precedence (its
// Parser's parse_expression and below): conditionals, or/and/not, comparisons, arithmetic,
// concatenation, filters and tests, calls, subscripts, literals. Reads through a TokenCursor
// the statement parser (parser.cc) shares; nesting deeper than kMaxExprDepth (parser.h) is an
// error, not a deep recursion.
#ifndef PAGODA_LIB_JINJA_EXPRESSION_PARSER_H_
#define PAGODA_LIB_JINJA_EXPRESSION_PARSER_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/token_cursor.h"

namespace pagoda::jinja {

class ExpressionParser {
 public:
  // Reads from `in` (not owned; must outlive this).
  explicit ExpressionParser(TokenCursor* in) : in_(*in) {}

  // An expression; with_condexpr false: without a trailing `if ... else ...` (a for loop's
  // iterable).
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  // `a`, `a, b`, `(a, b)`; a lone expression without a comma stays itself.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens);
  // One or more `| name(args)`; `node` may be null (a filter block's chain).
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline = false);

 private:
  absl::StatusOr<ExprPtr> ParseCondExpr();
  absl::StatusOr<ExprPtr> ParseLeftAssociative(std::initializer_list<absl::string_view> ops,
                                               Expr::Kind kind,
                                               absl::FunctionRef<absl::StatusOr<ExprPtr>()> next);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParseSequence(absl::string_view close, Expr::Kind kind);
  absl::StatusOr<ExprPtr> ParseDict();
  bool TupleEnds() const;
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  // `(` args `)` into e->children (after those already there) and e->keywords.
  absl::Status ParseCallArgs(Expr* e);
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  absl::StatusOr<std::string> ParseDottedName();
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);

  TokenCursor& in_;
  int recursion_ = 0;  // ParseExpression's depth
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_EXPRESSION_PARSER_H_
