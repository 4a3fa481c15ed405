#include "lib/jinja/expr_builder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/parser.h"
#include "lib/jinja/token_cursor.h"

namespace pagoda::jinja {

ExprPtr NewExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

absl::Status SealExpr(Expr* e) {
  int depth = 0;
  for (const ExprPtr& c : e->children) {
    if (c) depth = std::max(depth, c->depth);
  }
  for (const auto& [name, c] : e->keywords) depth = std::max(depth, c->depth);
  e->depth = depth + 1;
  if (e->depth > kMaxExprDepth) {
    return TokenCursor::Error(absl::StrCat("expression nests deeper than ", kMaxExprDepth),
                              e->line);
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> MakeExpr(Expr::Kind kind, int line, std::vector<ExprPtr> children,
                                 std::string name) {
  ExprPtr e = NewExpr(kind, line);
  e->children = std::move(children);
  e->name = std::move(name);
  RETURN_IF_ERROR(SealExpr(e.get()));
  return e;
}

std::vector<ExprPtr> ExprChildren(ExprPtr a, ExprPtr b, ExprPtr c) {
  std::vector<ExprPtr> v;
  v.push_back(std::move(a));
  if (b) v.push_back(std::move(b));
  if (c) v.push_back(std::move(c));
  return v;
}

}  // namespace pagoda::jinja
