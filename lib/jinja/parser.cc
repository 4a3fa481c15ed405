#include "lib/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "lib/jinja/expression_parser.h"
#include "lib/jinja/token_cursor.h"

namespace pagoda::jinja {
namespace {

using TK = Token::Kind;

// Statements and template data (jinja2's Parser.subparse and parse_* of each tag); their
// expressions go to the ExpressionParser, both reading one TokenCursor.
class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : in_(tokens), expr_(&in_) {}

  absl::StatusOr<Body> Run() {
    Body body;
    std::string end;
    RETURN_IF_ERROR(ParseBody({}, &body, &end));
    return body;
  }

 private:
  // Template data and tags until `{% <one of end_names>`, which is left for the caller with
  // its name in *end (empty at the end of the template, an error if end_names is not empty).
  absl::Status ParseBody(std::initializer_list<absl::string_view> end_names, Body* body,
                         std::string* end) {
    if (++block_depth_ > kMaxBlockDepth) {
      return in_.Error(absl::StrCat("blocks nest deeper than ", kMaxBlockDepth), in_.Cur().line);
    }
    while (true) {
      const Token& t = in_.Cur();
      if (t.kind == TK::kEnd) {
        if (end_names.size() != 0) {
          std::string expected;
          for (const absl::string_view n : end_names) {
            absl::StrAppend(&expected, expected.empty() ? "" : " or ", "'", n, "'");
          }
          return in_.Error(
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
        in_.Advance();
      } else if (t.kind == TK::kVariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = t.line;
        in_.Advance();
        ASSIGN_OR_RETURN(s->expr, expr_.ParseTuple(true, false));
        RETURN_IF_ERROR(in_.ExpectKind(TK::kVariableEnd, "end of print statement"));
        body->push_back(std::move(s));
      } else if (t.kind == TK::kBlockBegin) {
        const Token& name = in_.Look();
        if (name.kind == TK::kName &&
            std::find(end_names.begin(), end_names.end(), name.text) != end_names.end()) {
          in_.Advance();
          *end = name.text;
          in_.Advance();
          break;
        }
        in_.Advance();
        ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
        body->push_back(std::move(s));
      } else {
        return in_.Unexpected();
      }
    }
    --block_depth_;
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> ParseStatement() {
    const Token& t = in_.Cur();
    if (t.kind != TK::kName) return in_.Error("tag name expected", t.line);
    auto s = std::make_unique<Stmt>();
    s->line = t.line;
    const std::string tag = t.text;
    in_.Advance();
    std::string end;
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        ASSIGN_OR_RETURN(ExprPtr condition, expr_.ParseTuple(true, false));
        RETURN_IF_ERROR(in_.ExpectBlockEnd());
        s->conditions.push_back(std::move(condition));
        s->bodies.emplace_back();
        RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &s->bodies.back(), &end));
        if (end != "elif") break;
      }
      if (end == "else") {
        RETURN_IF_ERROR(in_.ExpectBlockEnd());
        s->bodies.emplace_back();
        RETURN_IF_ERROR(ParseBody({"endif"}, &s->bodies.back(), &end));
      }
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      RETURN_IF_ERROR(ParseTargets(s.get()));
      if (!in_.SkipName("in")) return in_.Error("expected 'in'", in_.Cur().line);
      ASSIGN_OR_RETURN(s->expr, expr_.ParseTuple(/*with_condexpr=*/false, false));
      if (in_.SkipName("if")) {
        ASSIGN_OR_RETURN(s->filter, expr_.ParseExpression());
      }
      s->recursive = in_.SkipName("recursive");
      if (s->recursive) return in_.Error("recursive loops are not supported", s->line);
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      ++loop_depth_;
      RETURN_IF_ERROR(ParseBody({"endfor", "else"}, &s->body, &end));
      --loop_depth_;
      if (end == "else") {
        RETURN_IF_ERROR(in_.ExpectBlockEnd());
        RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body, &end));
      }
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else if (tag == "set") {
      // `set ns.attr = v`, `set a = v`, `set a, b = v`, or a block `set a %}...{% endset`.
      if (in_.Cur().kind == TK::kName && in_.Look().kind == TK::kOperator &&
          in_.Look().text == ".") {
        s->kind = Stmt::Kind::kSet;
        s->targets.push_back(in_.Cur().text);
        in_.Advance();
        in_.Advance();
        ASSIGN_OR_RETURN(s->name, in_.ExpectName());
        RETURN_IF_ERROR(in_.ExpectOp("="));
        ASSIGN_OR_RETURN(s->expr, expr_.ParseTuple(true, false));
        RETURN_IF_ERROR(in_.ExpectBlockEnd());
        return s;
      }
      RETURN_IF_ERROR(ParseTargets(s.get()));
      if (in_.SkipOp("=")) {
        s->kind = Stmt::Kind::kSet;
        ASSIGN_OR_RETURN(s->expr, expr_.ParseTuple(true, false));
        RETURN_IF_ERROR(in_.ExpectBlockEnd());
        return s;
      }
      if (s->unpack) return in_.Error("a block set takes one name", s->line);
      s->kind = Stmt::Kind::kSetBlock;
      if (in_.IsOp("|")) {
        ASSIGN_OR_RETURN(s->filter, expr_.ParseFilter(nullptr));
      }
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endset"}, &s->body));
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(s->name, in_.ExpectName());
      RETURN_IF_ERROR(ParseParams(s.get()));
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endmacro"}, &s->body));
    } else if (tag == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (in_.IsOp("(")) RETURN_IF_ERROR(ParseParams(s.get()));
      ASSIGN_OR_RETURN(s->expr, expr_.ParseExpression());
      if (s->expr->kind != Expr::Kind::kCall) return in_.Error("expected call", s->line);
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseMacroLikeBody({"endcall"}, &s->body));
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      ASSIGN_OR_RETURN(s->filter, expr_.ParseFilter(nullptr, /*start_inline=*/true));
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endfilter"}, &s->body, &end));
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else if (tag == "with") {
      s->kind = Stmt::Kind::kWith;
      while (in_.Cur().kind != TK::kBlockEnd) {
        if (!s->targets.empty()) RETURN_IF_ERROR(in_.ExpectOp(","));
        ASSIGN_OR_RETURN(std::string target, in_.ExpectName());
        RETURN_IF_ERROR(in_.ExpectOp("="));
        ASSIGN_OR_RETURN(ExprPtr value, expr_.ParseExpression());
        s->targets.push_back(std::move(target));
        s->values.push_back(std::move(value));
      }
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endwith"}, &s->body, &end));
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::kScope;
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
      RETURN_IF_ERROR(ParseBody({"endgeneration"}, &s->body, &end));
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0)
        return in_.Error(absl::StrCat("'", tag, "' outside of a loop"), s->line);
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(in_.ExpectBlockEnd());
    } else {
      return in_.Error(absl::StrCat("Encountered unknown tag '", tag, "'."), s->line);
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
    return in_.ExpectBlockEnd();
  }

  // `name`, `a, b` or `(a, b)` into s->targets.
  absl::Status ParseTargets(Stmt* s) {
    const bool parens = in_.SkipOp("(");
    while (true) {
      ASSIGN_OR_RETURN(std::string name, in_.ExpectName());
      s->targets.push_back(std::move(name));
      if (!in_.SkipOp(",")) break;
      s->unpack = true;
      if (in_.Cur().kind != TK::kName) break;
    }
    if (parens) {
      s->unpack = true;
      RETURN_IF_ERROR(in_.ExpectOp(")"));
    }
    return absl::OkStatus();
  }

  // `(a, b=1, ...)` into s->params.
  absl::Status ParseParams(Stmt* s) {
    RETURN_IF_ERROR(in_.ExpectOp("("));
    while (!in_.IsOp(")")) {
      if (!s->params.empty()) RETURN_IF_ERROR(in_.ExpectOp(","));
      if (in_.IsOp(")")) break;
      Param p;
      ASSIGN_OR_RETURN(p.name, in_.ExpectName());
      if (in_.SkipOp("=")) {
        ASSIGN_OR_RETURN(p.default_value, expr_.ParseExpression());
      } else if (!s->params.empty() && s->params.back().default_value) {
        return in_.Error("non-default argument follows default argument", in_.Cur().line);
      }
      s->params.push_back(std::move(p));
    }
    return in_.ExpectOp(")");
  }

  TokenCursor in_;
  ExpressionParser expr_;
  int block_depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) {
  if (tokens.empty()) return Body();
  return Parser(tokens).Run();
}

}  // namespace pagoda::jinja
