#include "lib/jinja/expression_evaluator.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/interpreter.h"
#include "lib/jinja/operators.h"
#include "lib/jinja/value_format.h"
#include "lib/text/utf8.h"

namespace pagoda::jinja {

absl::Status ExpressionEvaluator::EvalArgs(const Expr& e, size_t first, const ScopePtr& scope,
                                           CallArgs* args) {
  for (size_t i = first; i < e.children.size(); ++i) {
    ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], scope));
    args->positional.push_back(std::move(v));
  }
  for (const auto& [key, expr] : e.keywords) {
    ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args->keyword.emplace_back(key, std::move(v));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> ExpressionEvaluator::EvalFilter(const Expr& e, Value subject,
                                                      const ScopePtr& scope) {
  // A filter chain parsed without a subject (block set / filter block): the innermost
  // filter's subject slot is null and takes `subject`.
  if (e.children[0] && e.children[0]->kind == Expr::Kind::kFilter) {
    ASSIGN_OR_RETURN(subject, EvalFilter(*e.children[0], std::move(subject), scope));
  } else if (e.children[0]) {
    ASSIGN_OR_RETURN(subject, Eval(*e.children[0], scope));
  }
  CallArgs args;
  RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  absl::StatusOr<Value> v = ApplyFilter(interp_, e.name, subject, args);
  if (!v.ok()) return WithLine(v.status(), e.line);
  return v;
}

absl::StatusOr<Value> ExpressionEvaluator::Eval(const Expr& e, const ScopePtr& scope) {
  RenderBudget::DepthGuard guard(budget_);
  RETURN_IF_ERROR(budget_.CheckDepth(e.line, "template nests or recurses"));
  absl::StatusOr<Value> v = EvalInner(e, scope);
  if (!v.ok()) return WithLine(v.status(), e.line);
  // Deeper values would recurse without bound when printed, compared or freed.
  if (v->depth() > kMaxValueDepth) {
    return absl::ResourceExhaustedError(absl::StrCat("line ", e.line, ": value nests deeper than ",
                                                     kMaxValueDepth, " lists and dicts"));
  }
  return v;
}

absl::StatusOr<Value> ExpressionEvaluator::EvalInner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName: {
      const Value* v = scope->Lookup(e.name);
      if (v == nullptr)
        return Value::Undefined(absl::StrCat("UndefinedError: '", e.name, "' is undefined"));
      return *v;
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      RETURN_IF_ERROR(budget_.Charge(static_cast<int64_t>(e.children.size())));
      ValueList items;
      for (const ExprPtr& c : e.children) {
        ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      RETURN_IF_ERROR(budget_.Charge(static_cast<int64_t>(e.children.size())));
      auto dict = std::make_shared<ValueDict>();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        ASSIGN_OR_RETURN(const Value key, Eval(*e.children[i], scope));
        ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1], scope));
        RETURN_IF_ERROR(dict->SetKey(key, std::move(value)));
      }
      return Value::Dict(std::move(dict));
    }
    case Expr::Kind::kGetAttr: {
      ASSIGN_OR_RETURN(const Value obj, Eval(*e.children[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      return GetAttribute(interp_, obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      ASSIGN_OR_RETURN(const Value obj, Eval(*e.children[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      ASSIGN_OR_RETURN(const Value key, Eval(*e.children[1], scope));
      return GetItem(interp_, obj, key);
    }
    case Expr::Kind::kSlice: {
      ASSIGN_OR_RETURN(const Value obj, Eval(*e.children[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      std::optional<int64_t> bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (!e.children[i + 1]) continue;
        ASSIGN_OR_RETURN(const Value b, Eval(*e.children[i + 1], scope));
        if (b.is_none()) continue;
        if (!b.is_int() && !b.is_bool()) {
          return TemplateError("TypeError", "slice indices must be integers or None");
        }
        bounds[i] = b.as_int();
      }
      const int64_t step = bounds[2].value_or(1);
      if (step == 0) return TemplateError("ValueError", "slice step cannot be zero");
      std::u32string cps;
      int64_t n;
      if (obj.is_string()) {
        cps = DecodeUtf8(obj.as_string());
        n = static_cast<int64_t>(cps.size());
      } else if (obj.is_list() && !obj.is_generator()) {
        n = static_cast<int64_t>(obj.as_list().size());
      } else {
        return TemplateError("TypeError",
                             absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
      }
      // Python's slice.indices().
      const auto clamp = [&](std::optional<int64_t> b, int64_t fallback) {
        if (!b) return fallback;
        int64_t x = *b;
        if (x < 0) x += n;
        if (step > 0) return std::clamp<int64_t>(x, 0, n);
        return std::clamp<int64_t>(x, -1, n - 1);
      };
      const int64_t start = clamp(bounds[0], step > 0 ? 0 : n - 1);
      const int64_t stop = clamp(bounds[1], step > 0 ? n : -1);
      std::vector<int64_t> picked;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(i);
      RETURN_IF_ERROR(budget_.Charge(static_cast<int64_t>(picked.size())));
      if (obj.is_string()) {
        std::u32string out;
        for (const int64_t i : picked) out += cps[i];
        return Value::String(EncodeUtf8(out));
      }
      ValueList out;
      for (const int64_t i : picked) out.push_back(obj.as_list()[i]);
      return Value::List(std::move(out), obj.is_tuple());
    }
    case Expr::Kind::kCall: {
      ASSIGN_OR_RETURN(const Value callee, Eval(*e.children[0], scope));
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
      return interp_.Call(callee, args);
    }
    case Expr::Kind::kFilter:
      return EvalFilter(e, Value(), scope);
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(const Value subject, Eval(*e.children[0], scope));
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
      ASSIGN_OR_RETURN(const bool result, ApplyTest(interp_, e.name, subject, args));
      return Value::Bool(result != e.negated);
    }
    case Expr::Kind::kNot: {
      ASSIGN_OR_RETURN(const Value v, Eval(*e.children[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case Expr::Kind::kNegate:
    case Expr::Kind::kPlus: {
      ASSIGN_OR_RETURN(const Value v, Eval(*e.children[0], scope));
      if (v.is_undefined()) return UndefinedError(v);
      const bool neg = e.kind == Expr::Kind::kNegate;
      if (v.is_float()) return Value::Float(neg ? -v.as_float() : v.as_float());
      if (v.is_int() || v.is_bool())
        return IntResult(neg ? -static_cast<__int128>(v.as_int()) : v.as_int());
      return TemplateError("TypeError", absl::StrCat("bad operand type for unary ", neg ? "-" : "+",
                                                     ": '", v.TypeName(), "'"));
    }
    case Expr::Kind::kBinary: {
      ASSIGN_OR_RETURN(const Value a, Eval(*e.children[0], scope));
      ASSIGN_OR_RETURN(const Value b, Eval(*e.children[1], scope));
      return ApplyBinary(budget_, e.name, a, b);
    }
    case Expr::Kind::kAnd: {
      ASSIGN_OR_RETURN(const Value a, Eval(*e.children[0], scope));
      if (!a.Truthy()) return a;
      return Eval(*e.children[1], scope);
    }
    case Expr::Kind::kOr: {
      ASSIGN_OR_RETURN(const Value a, Eval(*e.children[0], scope));
      if (a.Truthy()) return a;
      return Eval(*e.children[1], scope);
    }
    case Expr::Kind::kCompare: {
      ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], scope));
        ASSIGN_OR_RETURN(const bool holds, ApplyComparison(e.ops[i], left, right));
        if (!holds) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kCondition: {
      ASSIGN_OR_RETURN(const Value c, Eval(*e.children[0], scope));
      if (c.Truthy()) return Eval(*e.children[1], scope);
      if (e.children[2]) return Eval(*e.children[2], scope);
      return Value::Undefined(absl::StrCat("UndefinedError: the inline if-expression on line ",
                                           e.line,
                                           " evaluated to false and no else section was defined."));
    }
  }
  return absl::InternalError("unknown expression");
}

}  // namespace pagoda::jinja
