#include "lib/jinja/expression_parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/expr_builder.h"
#include "lib/jinja/parser.h"

namespace pagoda::jinja {

using TK = Token::Kind;

absl::StatusOr<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  if (++recursion_ > kMaxExprDepth) return in_.Error("expression nests too deep", in_.Cur().line);
  absl::StatusOr<ExprPtr> e = with_condexpr ? ParseCondExpr() : ParseOr();
  --recursion_;
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCondExpr() {
  ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (in_.IsName("if")) {
    const int line = in_.Cur().line;
    in_.Advance();
    ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
    ExprPtr otherwise;
    if (in_.SkipName("else")) {
      ASSIGN_OR_RETURN(otherwise, ParseExpression());
    }
    std::vector<ExprPtr> children;
    children.push_back(std::move(condition));
    children.push_back(std::move(expr));
    children.push_back(std::move(otherwise));
    ASSIGN_OR_RETURN(expr, MakeExpr(Expr::Kind::kCondition, line, std::move(children)));
  }
  return expr;
}

// One left-associative level: `next` (op `next`)*, each op one of `ops` (a name: or, and; an
// operator: the arithmetic ones); or and and have node kinds of their own, the others are kBinary
// named by their operator.
absl::StatusOr<ExprPtr> ExpressionParser::ParseLeftAssociative(
    std::initializer_list<absl::string_view> ops, Expr::Kind kind,
    absl::FunctionRef<absl::StatusOr<ExprPtr>()> next) {
  ASSIGN_OR_RETURN(ExprPtr left, next());
  for (;;) {
    const Token& t = in_.Cur();
    if ((t.kind != TK::kName && t.kind != TK::kOperator) ||
        std::find(ops.begin(), ops.end(), t.text) == ops.end()) {
      return left;
    }
    std::string op = kind == Expr::Kind::kBinary ? t.text : "";
    const int line = t.line;
    in_.Advance();
    ASSIGN_OR_RETURN(ExprPtr right, next());
    ASSIGN_OR_RETURN(
        left, MakeExpr(kind, line, ExprChildren(std::move(left), std::move(right)), std::move(op)));
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseOr() {
  return ParseLeftAssociative({"or"}, Expr::Kind::kOr, [this] { return ParseAnd(); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseAnd() {
  return ParseLeftAssociative({"and"}, Expr::Kind::kAnd, [this] { return ParseNot(); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseNot() {
  if (in_.IsName("not")) {
    const int line = in_.Cur().line;
    in_.Advance();
    if (++recursion_ > kMaxExprDepth) return in_.Error("expression nests too deep", line);
    absl::StatusOr<ExprPtr> operand = ParseNot();
    --recursion_;
    if (!operand.ok()) return operand.status();
    return MakeExpr(Expr::Kind::kNot, line, ExprChildren(std::move(*operand)));
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCompare() {
  const int line = in_.Cur().line;
  ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr node = NewExpr(Expr::Kind::kCompare, line);
  node->children.push_back(std::move(first));
  while (true) {
    std::string op;
    if (in_.Cur().kind == TK::kOperator &&
        (in_.Cur().text == "==" || in_.Cur().text == "!=" || in_.Cur().text == "<" ||
         in_.Cur().text == "<=" || in_.Cur().text == ">" || in_.Cur().text == ">=")) {
      op = in_.Cur().text;
      in_.Advance();
    } else if (in_.IsName("in")) {
      op = "in";
      in_.Advance();
    } else if (in_.IsName("not") && in_.Look().kind == TK::kName && in_.Look().text == "in") {
      op = "notin";
      in_.Advance();
      in_.Advance();
    } else {
      break;
    }
    ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    node->ops.push_back(op);
    node->children.push_back(std::move(operand));
  }
  if (node->ops.empty()) return std::move(node->children[0]);
  RETURN_IF_ERROR(SealExpr(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath1() {
  return ParseLeftAssociative({"+", "-"}, Expr::Kind::kBinary, [this] { return ParseConcat(); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseConcat() {
  return ParseLeftAssociative({"~"}, Expr::Kind::kBinary, [this] { return ParseMath2(); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseMath2() {
  return ParseLeftAssociative({"*", "/", "//", "%"}, Expr::Kind::kBinary,
                              [this] { return ParsePow(); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePow() {
  return ParseLeftAssociative({"**"}, Expr::Kind::kBinary, [this] { return ParseUnary(true); });
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  const int line = in_.Cur().line;
  ExprPtr node;
  if (in_.IsOp("-") || in_.IsOp("+")) {
    const Expr::Kind kind = in_.IsOp("-") ? Expr::Kind::kNegate : Expr::Kind::kPlus;
    in_.Advance();
    if (++recursion_ > kMaxExprDepth) return in_.Error("expression nests too deep", line);
    absl::StatusOr<ExprPtr> operand = ParseUnary(false);
    --recursion_;
    if (!operand.ok()) return operand.status();
    ASSIGN_OR_RETURN(node, MakeExpr(kind, line, ExprChildren(std::move(*operand))));
  } else {
    ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& t = in_.Cur();
  const int line = t.line;
  switch (t.kind) {
    case TK::kName: {
      ExprPtr e = NewExpr(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      in_.Advance();
      return e;
    }
    case TK::kString: {
      std::string s;
      while (in_.Cur().kind == TK::kString) {
        s += in_.Cur().text;
        in_.Advance();
      }
      ExprPtr e = NewExpr(Expr::Kind::kLiteral, line);
      e->value = Value::String(std::move(s));
      return e;
    }
    case TK::kInteger: {
      int64_t i = 0;
      if (!absl::SimpleAtoi(t.text, &i)) return in_.Error("integer literal out of range", line);
      ExprPtr e = NewExpr(Expr::Kind::kLiteral, line);
      e->value = Value::Int(i);
      in_.Advance();
      return e;
    }
    case TK::kFloat: {
      ExprPtr e = NewExpr(Expr::Kind::kLiteral, line);
      e->value = Value::Float(std::strtod(t.text.c_str(), nullptr));
      in_.Advance();
      return e;
    }
    case TK::kOperator:
      if (t.text == "(") {
        in_.Advance();
        ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(/*with_condexpr=*/true, /*explicit_parens=*/true));
        RETURN_IF_ERROR(in_.ExpectOp(")"));
        return e;
      }
      if (t.text == "[") return ParseSequence("]", Expr::Kind::kList);
      if (t.text == "{") return ParseDict();
      break;
    default:
      break;
  }
  return in_.Unexpected();
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSequence(absl::string_view close, Expr::Kind kind) {
  const int line = in_.Cur().line;
  in_.Advance();
  ExprPtr e = NewExpr(kind, line);
  while (!in_.IsOp(close)) {
    if (!e->children.empty()) RETURN_IF_ERROR(in_.ExpectOp(","));
    if (in_.IsOp(close)) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
    e->children.push_back(std::move(item));
  }
  RETURN_IF_ERROR(in_.ExpectOp(close));
  RETURN_IF_ERROR(SealExpr(e.get()));
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseDict() {
  const int line = in_.Cur().line;
  in_.Advance();
  ExprPtr e = NewExpr(Expr::Kind::kDict, line);
  while (!in_.IsOp("}")) {
    if (!e->children.empty()) RETURN_IF_ERROR(in_.ExpectOp(","));
    if (in_.IsOp("}")) break;
    ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
    RETURN_IF_ERROR(in_.ExpectOp(":"));
    ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
    e->children.push_back(std::move(key));
    e->children.push_back(std::move(value));
  }
  RETURN_IF_ERROR(in_.ExpectOp("}"));
  RETURN_IF_ERROR(SealExpr(e.get()));
  return e;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTuple(bool with_condexpr, bool explicit_parens) {
  const int line = in_.Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) {
      if (!in_.SkipOp(",")) break;
      is_tuple = true;
    }
    if (TupleEnds()) break;
    ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) return in_.Unexpected();
  }
  return MakeExpr(Expr::Kind::kTuple, line, std::move(items));
}

bool ExpressionParser::TupleEnds() const {
  return in_.Cur().kind == TK::kVariableEnd || in_.Cur().kind == TK::kBlockEnd ||
         in_.Cur().kind == TK::kEnd || in_.IsOp(")") || in_.IsName("in") || in_.IsName("if") ||
         in_.IsName("recursive");
}

absl::StatusOr<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (in_.IsOp(".") || in_.IsOp("[")) {
      ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (in_.IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (in_.IsOp("|")) {
      ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (in_.IsName("is")) {
      ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (in_.IsOp("(")) {
      ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const int line = in_.Cur().line;
  if (in_.SkipOp(".")) {
    if (in_.Cur().kind == TK::kName) {
      std::string name = in_.Cur().text;
      in_.Advance();
      return MakeExpr(Expr::Kind::kGetAttr, line, ExprChildren(std::move(node)), std::move(name));
    }
    if (in_.Cur().kind == TK::kInteger) {
      ASSIGN_OR_RETURN(ExprPtr index, ParsePrimary());
      return MakeExpr(Expr::Kind::kGetItem, line, ExprChildren(std::move(node), std::move(index)));
    }
    return in_.Unexpected();
  }
  in_.Advance();  // [
  std::vector<ExprPtr> args;
  bool any_slice = false;
  std::vector<ExprPtr> slice(3);
  while (!in_.IsOp("]")) {
    if (!args.empty() || any_slice) RETURN_IF_ERROR(in_.ExpectOp(","));
    // A subscript: an expression, or a slice `start:stop:step` with any part left out.
    ExprPtr start;
    if (!in_.IsOp(":")) {
      ASSIGN_OR_RETURN(start, ParseExpression());
      if (!in_.IsOp(":")) {
        args.push_back(std::move(start));
        continue;
      }
    }
    in_.Advance();  // :
    any_slice = true;
    slice[0] = std::move(start);
    if (!in_.IsOp("]") && !in_.IsOp(",") && !in_.IsOp(":")) {
      ASSIGN_OR_RETURN(slice[1], ParseExpression());
    }
    if (in_.SkipOp(":") && !in_.IsOp("]") && !in_.IsOp(",")) {
      ASSIGN_OR_RETURN(slice[2], ParseExpression());
    }
  }
  RETURN_IF_ERROR(in_.ExpectOp("]"));
  if (any_slice) {
    if (!args.empty()) return in_.Error("multi-dimensional subscripts are not supported", line);
    std::vector<ExprPtr> children;
    children.push_back(std::move(node));
    for (ExprPtr& part : slice) children.push_back(std::move(part));
    return MakeExpr(Expr::Kind::kSlice, line, std::move(children));
  }
  if (args.size() != 1) return in_.Error("expected one subscript", line);
  return MakeExpr(Expr::Kind::kGetItem, line, ExprChildren(std::move(node), std::move(args[0])));
}

absl::Status ExpressionParser::ParseCallArgs(Expr* e) {
  RETURN_IF_ERROR(in_.ExpectOp("("));
  bool first = true;
  while (!in_.IsOp(")")) {
    if (!first) {
      RETURN_IF_ERROR(in_.ExpectOp(","));
      if (in_.IsOp(")")) break;
    }
    first = false;
    if (in_.IsOp("*") || in_.IsOp("**"))
      return in_.Error("*args and **kwargs are not supported", in_.Cur().line);
    if (in_.Cur().kind == TK::kName && in_.Look().kind == TK::kOperator && in_.Look().text == "=") {
      std::string key = in_.Cur().text;
      in_.Advance();
      in_.Advance();
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->keywords.emplace_back(std::move(key), std::move(value));
    } else {
      if (!e->keywords.empty()) {
        return in_.Error("positional argument follows keyword argument", in_.Cur().line);
      }
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->children.push_back(std::move(value));
    }
  }
  return in_.ExpectOp(")");
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseCall(ExprPtr callee) {
  ExprPtr e = NewExpr(Expr::Kind::kCall, in_.Cur().line);
  e->children.push_back(std::move(callee));
  RETURN_IF_ERROR(ParseCallArgs(e.get()));
  RETURN_IF_ERROR(SealExpr(e.get()));
  return e;
}

absl::StatusOr<std::string> ExpressionParser::ParseDottedName() {
  ASSIGN_OR_RETURN(std::string name, in_.ExpectName());
  while (in_.IsOp(".")) {
    in_.Advance();
    ASSIGN_OR_RETURN(std::string part, in_.ExpectName());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseFilter(ExprPtr node, bool start_inline) {
  while (in_.IsOp("|") || start_inline) {
    if (!start_inline) in_.Advance();
    start_inline = false;
    const int line = in_.Cur().line;
    ASSIGN_OR_RETURN(std::string name, ParseDottedName());
    ExprPtr e = NewExpr(Expr::Kind::kFilter, line);
    e->name = std::move(name);
    e->children.push_back(std::move(node));
    if (in_.IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(e.get()));
    RETURN_IF_ERROR(SealExpr(e.get()));
    node = std::move(e);
  }
  return node;
}

absl::StatusOr<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  const int line = in_.Cur().line;
  in_.Advance();  // is
  ExprPtr e = NewExpr(Expr::Kind::kTest, line);
  e->negated = in_.SkipName("not");
  ASSIGN_OR_RETURN(e->name, ParseDottedName());
  e->children.push_back(std::move(node));
  if (in_.IsOp("(")) {
    RETURN_IF_ERROR(ParseCallArgs(e.get()));
  } else if ((in_.Cur().kind == TK::kName || in_.Cur().kind == TK::kString ||
              in_.Cur().kind == TK::kInteger || in_.Cur().kind == TK::kFloat || in_.IsOp("[") ||
              in_.IsOp("{")) &&
             !in_.IsName("else") && !in_.IsName("or") && !in_.IsName("and")) {
    if (in_.IsName("is"))
      return in_.Error("You cannot chain multiple tests with is", in_.Cur().line);
    ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->children.push_back(std::move(arg));
  }
  RETURN_IF_ERROR(SealExpr(e.get()));
  return e;
}

}  // namespace pagoda::jinja
