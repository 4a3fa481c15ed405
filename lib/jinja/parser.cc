#include "lib/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace pagoda::jinja {
namespace {

using TK = Token::Kind;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  absl::StatusOr<Body> Run() {
    Body body;
    std::string end;
    RETURN_IF_ERROR(ParseBody({}, &body, &end));
    return body;
  }

 private:
  // ---- token stream ----
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Look(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
  void Advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(absl::string_view op) const { return Cur().kind == TK::kOperator && Cur().text == op; }
  bool IsName(absl::string_view name) const {
    return Cur().kind == TK::kName && Cur().text == name;
  }
  bool SkipOp(absl::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  bool SkipName(absl::string_view name) {
    if (!IsName(name)) return false;
    Advance();
    return true;
  }

  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case TK::kText:
        return "template data";
      case TK::kVariableBegin:
        return "begin of print statement";
      case TK::kVariableEnd:
        return "end of print statement";
      case TK::kBlockBegin:
        return "begin of statement block";
      case TK::kBlockEnd:
        return "end of statement block";
      case TK::kEnd:
        return "end of template";
      case TK::kString:
        return "string";
      default:
        return t.text;
    }
  }

  absl::Status Error(absl::string_view message, int line) const {
    return absl::InvalidArgumentError(
        absl::StrCat("TemplateSyntaxError: line ", line, ": ", message));
  }
  absl::Status Unexpected() const {
    return Error(absl::StrCat("unexpected '", Describe(Cur()), "'"), Cur().line);
  }
  absl::Status ExpectOp(absl::string_view op) {
    if (SkipOp(op)) return absl::OkStatus();
    return Error(absl::StrCat("expected '", op, "', got '", Describe(Cur()), "'"), Cur().line);
  }
  absl::Status ExpectKind(TK kind, absl::string_view what) {
    if (Cur().kind != kind) {
      return Error(absl::StrCat("expected ", what, ", got '", Describe(Cur()), "'"), Cur().line);
    }
    Advance();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().kind != TK::kName) {
      return Error(absl::StrCat("expected a name, got '", Describe(Cur()), "'"), Cur().line);
    }
    std::string name = Cur().text;
    Advance();
    return name;
  }
  absl::Status ExpectBlockEnd() { return ExpectKind(TK::kBlockEnd, "end of statement block"); }

  // ---- nodes ----
  static ExprPtr Node(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Records the subtree depth; long chains (`a|f|f|f...`, `a+a+a...`) count, not just recursion.
  absl::Status Seal(Expr* e) const {
    int depth = 0;
    for (const ExprPtr& c : e->children) {
      if (c) depth = std::max(depth, c->depth);
    }
    for (const auto& [name, c] : e->keywords) depth = std::max(depth, c->depth);
    e->depth = depth + 1;
    if (e->depth > kMaxExprDepth) {
      return Error(absl::StrCat("expression nests deeper than ", kMaxExprDepth), e->line);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<ExprPtr> Make(Expr::Kind kind, int line, std::vector<ExprPtr> children,
                               std::string name = "") {
    ExprPtr e = Node(kind, line);
    e->children = std::move(children);
    e->name = std::move(name);
    RETURN_IF_ERROR(Seal(e.get()));
    return e;
  }
  static std::vector<ExprPtr> Children(ExprPtr a, ExprPtr b = nullptr, ExprPtr c = nullptr) {
    std::vector<ExprPtr> v;
    v.push_back(std::move(a));
    if (b) v.push_back(std::move(b));
    if (c) v.push_back(std::move(c));
    return v;
  }

  // ---- expressions ----
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true) {
    if (++recursion_ > kMaxExprDepth) return Error("expression nests too deep", Cur().line);
    absl::StatusOr<ExprPtr> e = with_condexpr ? ParseCondExpr() : ParseOr();
    --recursion_;
    return e;
  }

  absl::StatusOr<ExprPtr> ParseCondExpr() {
    ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (IsName("if")) {
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr condition, ParseOr());
      ExprPtr otherwise;
      if (SkipName("else")) {
        ASSIGN_OR_RETURN(otherwise, ParseExpression());
      }
      std::vector<ExprPtr> children;
      children.push_back(std::move(condition));
      children.push_back(std::move(expr));
      children.push_back(std::move(otherwise));
      ASSIGN_OR_RETURN(expr, Make(Expr::Kind::kCondition, line, std::move(children)));
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
    while (IsName("or")) {
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
      ASSIGN_OR_RETURN(left,
                       Make(Expr::Kind::kOr, line, Children(std::move(left), std::move(right))));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
    while (IsName("and")) {
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
      ASSIGN_OR_RETURN(left,
                       Make(Expr::Kind::kAnd, line, Children(std::move(left), std::move(right))));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      const int line = Cur().line;
      Advance();
      if (++recursion_ > kMaxExprDepth) return Error("expression nests too deep", line);
      absl::StatusOr<ExprPtr> operand = ParseNot();
      --recursion_;
      if (!operand.ok()) return operand.status();
      return Make(Expr::Kind::kNot, line, Children(std::move(*operand)));
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    const int line = Cur().line;
    ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr node = Node(Expr::Kind::kCompare, line);
    node->children.push_back(std::move(first));
    while (true) {
      std::string op;
      if (Cur().kind == TK::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Advance();
      } else if (IsName("in")) {
        op = "in";
        Advance();
      } else if (IsName("not") && Look().kind == TK::kName && Look().text == "in") {
        op = "notin";
        Advance();
        Advance();
      } else {
        break;
      }
      ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
      node->ops.push_back(op);
      node->children.push_back(std::move(operand));
    }
    if (node->ops.empty()) return std::move(node->children[0]);
    RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }

  absl::StatusOr<ExprPtr> Binary(ExprPtr left, std::string op, ExprPtr right, int line) {
    return Make(Expr::Kind::kBinary, line, Children(std::move(left), std::move(right)),
                std::move(op));
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
      ASSIGN_OR_RETURN(left, Binary(std::move(left), op, std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseMath2());
    while (IsOp("~")) {
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParseMath2());
      ASSIGN_OR_RETURN(left, Binary(std::move(left), "~", std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
      ASSIGN_OR_RETURN(left, Binary(std::move(left), op, std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
    while (IsOp("**")) {
      const int line = Cur().line;
      Advance();
      ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
      ASSIGN_OR_RETURN(left, Binary(std::move(left), "**", std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    const int line = Cur().line;
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const Expr::Kind kind = IsOp("-") ? Expr::Kind::kNegate : Expr::Kind::kPlus;
      Advance();
      if (++recursion_ > kMaxExprDepth) return Error("expression nests too deep", line);
      absl::StatusOr<ExprPtr> operand = ParseUnary(false);
      --recursion_;
      if (!operand.ok()) return operand.status();
      ASSIGN_OR_RETURN(node, Make(kind, line, Children(std::move(*operand))));
    } else {
      ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    const int line = t.line;
    switch (t.kind) {
      case TK::kName: {
        ExprPtr e = Node(Expr::Kind::kLiteral, line);
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
        Advance();
        return e;
      }
      case TK::kString: {
        std::string s;
        while (Cur().kind == TK::kString) {
          s += Cur().text;
          Advance();
        }
        ExprPtr e = Node(Expr::Kind::kLiteral, line);
        e->value = Value::String(std::move(s));
        return e;
      }
      case TK::kInteger: {
        int64_t i = 0;
        if (!absl::SimpleAtoi(t.text, &i)) return Error("integer literal out of range", line);
        ExprPtr e = Node(Expr::Kind::kLiteral, line);
        e->value = Value::Int(i);
        Advance();
        return e;
      }
      case TK::kFloat: {
        ExprPtr e = Node(Expr::Kind::kLiteral, line);
        e->value = Value::Float(std::strtod(t.text.c_str(), nullptr));
        Advance();
        return e;
      }
      case TK::kOperator:
        if (t.text == "(") {
          Advance();
          ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(/*with_condexpr=*/true, /*explicit_parens=*/true));
          RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (t.text == "[") return ParseSequence("]", Expr::Kind::kList);
        if (t.text == "{") return ParseDict();
        break;
      default:
        break;
    }
    return Unexpected();
  }

  absl::StatusOr<ExprPtr> ParseSequence(absl::string_view close, Expr::Kind kind) {
    const int line = Cur().line;
    Advance();
    ExprPtr e = Node(kind, line);
    while (!IsOp(close)) {
      if (!e->children.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(close)) break;
      ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      e->children.push_back(std::move(item));
    }
    RETURN_IF_ERROR(ExpectOp(close));
    RETURN_IF_ERROR(Seal(e.get()));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseDict() {
    const int line = Cur().line;
    Advance();
    ExprPtr e = Node(Expr::Kind::kDict, line);
    while (!IsOp("}")) {
      if (!e->children.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      RETURN_IF_ERROR(ExpectOp(":"));
      ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      e->children.push_back(std::move(key));
      e->children.push_back(std::move(value));
    }
    RETURN_IF_ERROR(ExpectOp("}"));
    RETURN_IF_ERROR(Seal(e.get()));
    return e;
  }

  // `a`, `a, b`, `(a, b)`; a lone expression without a comma stays itself.
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, bool explicit_parens) {
    const int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) {
        if (!SkipOp(",")) break;
        is_tuple = true;
      }
      if (TupleEnds()) break;
      ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
      items.push_back(std::move(item));
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return Unexpected();
    }
    return Make(Expr::Kind::kTuple, line, std::move(items));
  }

  bool TupleEnds() const {
    return Cur().kind == TK::kVariableEnd || Cur().kind == TK::kBlockEnd ||
           Cur().kind == TK::kEnd || IsOp(")") || IsName("in") || IsName("if") ||
           IsName("recursive");
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
      } else if (IsName("is")) {
        ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
      } else if (IsOp("(")) {
        ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node) {
    const int line = Cur().line;
    if (SkipOp(".")) {
      if (Cur().kind == TK::kName) {
        std::string name = Cur().text;
        Advance();
        return Make(Expr::Kind::kGetAttr, line, Children(std::move(node)), std::move(name));
      }
      if (Cur().kind == TK::kInteger) {
        ASSIGN_OR_RETURN(ExprPtr index, ParsePrimary());
        return Make(Expr::Kind::kGetItem, line, Children(std::move(node), std::move(index)));
      }
      return Unexpected();
    }
    Advance();  // [
    std::vector<ExprPtr> args;
    bool any_slice = false;
    std::vector<ExprPtr> slice(3);
    while (!IsOp("]")) {
      if (!args.empty() || any_slice) RETURN_IF_ERROR(ExpectOp(","));
      // A subscript: an expression, or a slice `start:stop:step` with any part left out.
      ExprPtr start;
      if (!IsOp(":")) {
        ASSIGN_OR_RETURN(start, ParseExpression());
        if (!IsOp(":")) {
          args.push_back(std::move(start));
          continue;
        }
      }
      Advance();  // :
      any_slice = true;
      slice[0] = std::move(start);
      if (!IsOp("]") && !IsOp(",") && !IsOp(":")) {
        ASSIGN_OR_RETURN(slice[1], ParseExpression());
      }
      if (SkipOp(":") && !IsOp("]") && !IsOp(",")) {
        ASSIGN_OR_RETURN(slice[2], ParseExpression());
      }
    }
    RETURN_IF_ERROR(ExpectOp("]"));
    if (any_slice) {
      if (!args.empty()) return Error("multi-dimensional subscripts are not supported", line);
      std::vector<ExprPtr> children;
      children.push_back(std::move(node));
      for (ExprPtr& part : slice) children.push_back(std::move(part));
      return Make(Expr::Kind::kSlice, line, std::move(children));
    }
    if (args.size() != 1) return Error("expected one subscript", line);
    return Make(Expr::Kind::kGetItem, line, Children(std::move(node), std::move(args[0])));
  }

  // `(` args `)` into e->children (after those already there) and e->keywords.
  absl::Status ParseCallArgs(Expr* e) {
    RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) {
        RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      first = false;
      if (IsOp("*") || IsOp("**")) return Error("*args and **kwargs are not supported", Cur().line);
      if (Cur().kind == TK::kName && Look().kind == TK::kOperator && Look().text == "=") {
        std::string key = Cur().text;
        Advance();
        Advance();
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->keywords.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e->keywords.empty()) {
          return Error("positional argument follows keyword argument", Cur().line);
        }
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        e->children.push_back(std::move(value));
      }
    }
    return ExpectOp(")");
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr e = Node(Expr::Kind::kCall, Cur().line);
    e->children.push_back(std::move(callee));
    RETURN_IF_ERROR(ParseCallArgs(e.get()));
    RETURN_IF_ERROR(Seal(e.get()));
    return e;
  }

  absl::StatusOr<std::string> ParseDottedName() {
    ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(".")) {
      Advance();
      ASSIGN_OR_RETURN(std::string part, ExpectName());
      absl::StrAppend(&name, ".", part);
    }
    return name;
  }

  // One or more `| name(args)`; `node` may be null (a filter block's chain).
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline = false) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Advance();
      start_inline = false;
      const int line = Cur().line;
      ASSIGN_OR_RETURN(std::string name, ParseDottedName());
      ExprPtr e = Node(Expr::Kind::kFilter, line);
      e->name = std::move(name);
      e->children.push_back(std::move(node));
      if (IsOp("(")) RETURN_IF_ERROR(ParseCallArgs(e.get()));
      RETURN_IF_ERROR(Seal(e.get()));
      node = std::move(e);
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node) {
    const int line = Cur().line;
    Advance();  // is
    ExprPtr e = Node(Expr::Kind::kTest, line);
    e->negated = SkipName("not");
    ASSIGN_OR_RETURN(e->name, ParseDottedName());
    e->children.push_back(std::move(node));
    if (IsOp("(")) {
      RETURN_IF_ERROR(ParseCallArgs(e.get()));
    } else if ((Cur().kind == TK::kName || Cur().kind == TK::kString ||
                Cur().kind == TK::kInteger || Cur().kind == TK::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Error("You cannot chain multiple tests with is", Cur().line);
      ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      e->children.push_back(std::move(arg));
    }
    RETURN_IF_ERROR(Seal(e.get()));
    return e;
  }

  // ---- statements ----

  // Template data and tags until `{% <one of end_names>`, which is left for the caller with
  // its name in *end (empty at the end of the template, an error if end_names is not empty).
  absl::Status ParseBody(std::initializer_list<absl::string_view> end_names, Body* body,
                         std::string* end) {
    if (++block_depth_ > kMaxBlockDepth) {
      return Error(absl::StrCat("blocks nest deeper than ", kMaxBlockDepth), Cur().line);
    }
    while (true) {
      const Token& t = Cur();
      if (t.kind == TK::kEnd) {
        if (end_names.size() != 0) {
          std::string expected;
          for (const absl::string_view n : end_names) {
            absl::StrAppend(&expected, expected.empty() ? "" : " or ", "'", n, "'");
          }
          return Error(
              absl::StrCat("Unexpected end of template. Jinja was looking for ", expected, "."),
              t.line);
        }
        break;
      }
      if (t.kind == TK::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = t.text;
        body->push_back(std::move(s));
        Advance();
      } else if (t.kind == TK::kVariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        Advance();
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true, false));
        RETURN_IF_ERROR(ExpectKind(TK::kVariableEnd, "end of print statement"));
        body->push_back(std::move(s));
      } else if (t.kind == TK::kBlockBegin) {
        const Token& name = Look();
        if (name.kind == TK::kName &&
            std::find(end_names.begin(), end_names.end(), name.text) != end_names.end()) {
          Advance();
          *end = name.text;
          Advance();
          break;
        }
        Advance();
        ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
        body->push_back(std::move(s));
      } else {
        return Unexpected();
      }
    }
    --block_depth_;
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> ParseStatement() {
    const Token& t = Cur();
    if (t.kind != TK::kName) return Error("tag name expected", t.line);
    auto s = std::make_unique<Stmt>();
    s->line = t.line;
    const std::string tag = t.text;
    Advance();
    std::string end;
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        ASSIGN_OR_RETURN(ExprPtr condition, ParseTuple(true, false));
        RETURN_IF_ERROR(ExpectBlockEnd());
        s->conditions.push_back(std::move(condition));
        s->bodies.emplace_back();
        RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &s->bodies.back(), &end));
        if (end != "elif") break;
      }
      if (end == "else") {
        RETURN_IF_ERROR(ExpectBlockEnd());
        s->bodies.emplace_back();
        RETURN_IF_ERROR(ParseBody({"endif"}, &s->bodies.back(), &end));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      RETURN_IF_ERROR(ParseTargets(s.get()));
      if (!SkipName("in")) return Error("expected 'in'", Cur().line);
      ASSIGN_OR_RETURN(s->expr, ParseTuple(/*with_condexpr=*/false, false));
      if (SkipName("if")) {
        ASSIGN_OR_RETURN(s->filter, ParseExpression());
      }
      s->recursive = SkipName("recursive");
      if (s->recursive) return Error("recursive loops are not supported", s->line);
      RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      RETURN_IF_ERROR(ParseBody({"endfor", "else"}, &s->body, &end));
      --loop_depth_;
      if (end == "else") {
        RETURN_IF_ERROR(ExpectBlockEnd());
        RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body, &end));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "set") {
      // `set ns.attr = v`, `set a = v`, `set a, b = v`, or a block `set a %}...{% endset`.
      if (Cur().kind == TK::kName && Look().kind == TK::kOperator && Look().text == ".") {
        s->kind = Stmt::Kind::kSet;
        s->targets.push_back(Cur().text);
        Advance();
        Advance();
        ASSIGN_OR_RETURN(s->name, ExpectName());
        RETURN_IF_ERROR(ExpectOp("="));
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true, false));
        RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      RETURN_IF_ERROR(ParseTargets(s.get()));
      if (SkipOp("=")) {
        s->kind = Stmt::Kind::kSet;
        ASSIGN_OR_RETURN(s->expr, ParseTuple(true, false));
        RETURN_IF_ERROR(ExpectBlockEnd());
        return s;
      }
      if (s->unpack) return Error("a block set takes one name", s->line);
      s->kind = Stmt::Kind::kSetBlock;
      if (IsOp("|")) {
        ASSIGN_OR_RETURN(s->filter, ParseFilter(nullptr));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endset"}, &s->body));
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(s->name, ExpectName());
      RETURN_IF_ERROR(ParseParams(s.get()));
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endmacro"}, &s->body));
    } else if (tag == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (IsOp("(")) RETURN_IF_ERROR(ParseParams(s.get()));
      ASSIGN_OR_RETURN(s->expr, ParseExpression());
      if (s->expr->kind != Expr::Kind::kCall) return Error("expected call", s->line);
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endcall"}, &s->body));
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      ASSIGN_OR_RETURN(s->filter, ParseFilter(nullptr, /*start_inline=*/true));
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endfilter"}, &s->body, &end));
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "with") {
      s->kind = Stmt::Kind::kWith;
      while (Cur().kind != TK::kBlockEnd) {
        if (!s->targets.empty()) RETURN_IF_ERROR(ExpectOp(","));
        ASSIGN_OR_RETURN(std::string target, ExpectName());
        RETURN_IF_ERROR(ExpectOp("="));
        ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
        s->targets.push_back(std::move(target));
        s->values.push_back(std::move(value));
      }
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endwith"}, &s->body, &end));
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::kScope;
      RETURN_IF_ERROR(ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endgeneration"}, &s->body, &end));
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return Error(absl::StrCat("'", tag, "' outside of a loop"), s->line);
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(ExpectBlockEnd());
    } else {
      return Error(absl::StrCat("Encountered unknown tag '", tag, "'."), s->line);
    }
    return s;
  }

  // A macro-like body is a new function: loop controls inside do not reach an outer loop.
  absl::Status ParseMacroLikeBody(std::initializer_list<absl::string_view> end_names, Body* body) {
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    RETURN_IF_ERROR(ParseBody(end_names, body, &end));
    loop_depth_ = saved_loop_depth;
    return ExpectBlockEnd();
  }

  // `name`, `a, b` or `(a, b)` into s->targets.
  absl::Status ParseTargets(Stmt* s) {
    const bool parens = SkipOp("(");
    while (true) {
      ASSIGN_OR_RETURN(std::string name, ExpectName());
      s->targets.push_back(std::move(name));
      if (!SkipOp(",")) break;
      s->unpack = true;
      if (Cur().kind != TK::kName) break;
    }
    if (parens) {
      s->unpack = true;
      RETURN_IF_ERROR(ExpectOp(")"));
    }
    return absl::OkStatus();
  }

  // `(a, b=1, ...)` into s->params.
  absl::Status ParseParams(Stmt* s) {
    RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!s->params.empty()) RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      Param p;
      ASSIGN_OR_RETURN(p.name, ExpectName());
      if (SkipOp("=")) {
        ASSIGN_OR_RETURN(p.default_value, ParseExpression());
      } else if (!s->params.empty() && s->params.back().default_value) {
        return Error("non-default argument follows default argument", Cur().line);
      }
      s->params.push_back(std::move(p));
    }
    return ExpectOp(")");
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int recursion_ = 0;
  int block_depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) {
  if (tokens.empty()) return Body();
  return Parser(tokens).Run();
}

}  // namespace pagoda::jinja
