#include "lib/jinja/interpreter.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/builtins.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {

absl::Status WithLine(absl::Status status, int line) {
  if (status.ok() || status.GetPayload(kRaisedPayload).has_value() ||
      absl::StartsWith(status.message(), "line ")) {
    return status;
  }
  return absl::Status(status.code(), absl::StrCat("line ", line, ": ", status.message()));
}

absl::Status StoreInNamespace(const Value& ns, const std::string& name, const Value& value) {
  if (value.depth() >= kNamespaceDepth) {
    return TemplateError("TemplateRuntimeError",
                         "a namespace cannot hold a namespace, nor values nested this deep");
  }
  ns.mutable_namespace().Set(name, value);
  return absl::OkStatus();
}

absl::Status TemplateError(absl::string_view kind, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(kind, ": ", message));
}

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(v.undefined_error());
}

Interpreter::~Interpreter() {
  for (const ScopePtr& s : macro_scopes_) s->Clear();
  for (const auto& ns : namespaces_) ns->Clear();
}

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.function()(args);
  if (callee.is_undefined()) return UndefinedError(callee);
  return TemplateError("TypeError",
                       absl::StrCat("'", callee.TypeName(), "' object is not callable"));
}

Value Interpreter::NewNamespace() {
  auto dict = std::make_shared<ValueDict>();
  namespaces_.push_back(dict);
  return Value::Dict(std::move(dict), /*is_namespace=*/true);
}

absl::Status Interpreter::Render(const Body& body, const ScopePtr& globals, std::string* out) {
  auto root = std::make_shared<Scope>(globals);
  macro_scopes_.push_back(root);
  return ExecBody(body, root, out);
}

absl::Status Interpreter::Append(absl::string_view text, std::string* out) {
  RETURN_IF_ERROR(CheckSize(static_cast<int64_t>(out->size() + text.size())));
  out->append(text.data(), text.size());
  return absl::OkStatus();
}

absl::Status Interpreter::ExecBody(const Body& body, const ScopePtr& scope, std::string* out) {
  for (const StmtPtr& s : body) {
    RETURN_IF_ERROR(Exec(*s, scope, out));
    if (flow_ != Flow::kNormal) break;
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Exec(const Stmt& s, const ScopePtr& scope, std::string* out) {
  RenderBudget::DepthGuard guard(budget_);
  RETURN_IF_ERROR(budget_.CheckDepth(s.line, "template nests or recurses"));
  switch (s.kind) {
    case Stmt::Kind::kText:
      return Append(s.text, out);
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(const Value v, eval_.Eval(*s.expr, scope));
      ASSIGN_OR_RETURN(const std::string text, ToPythonStr(v));
      return Append(text, out);
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(const Value c, eval_.Eval(*s.conditions[i], scope));
        if (c.Truthy()) return ExecBody(s.bodies[i], scope, out);
      }
      if (s.bodies.size() > s.conditions.size()) return ExecBody(s.bodies.back(), scope, out);
      return absl::OkStatus();
    case Stmt::Kind::kFor:
      return ExecFor(s, scope, out);
    case Stmt::Kind::kSet:
      return ExecSet(s, scope);
    case Stmt::Kind::kSetBlock: {
      std::string text;
      RETURN_IF_ERROR(ExecBody(s.body, std::make_shared<Scope>(scope), &text));
      Value v = Value::String(std::move(text));
      if (s.filter) {
        ASSIGN_OR_RETURN(v, eval_.EvalFilter(*s.filter, std::move(v), scope));
      }
      scope->Set(s.targets[0], std::move(v));
      return absl::OkStatus();
    }
    case Stmt::Kind::kMacro:
      scope->Set(s.name, MakeMacro(s, scope, &s.body, s.name));
      return absl::OkStatus();
    case Stmt::Kind::kCallBlock: {
      // `caller()` renders the block's body; it goes to the macro as a keyword.
      const Expr& call = *s.expr;
      ASSIGN_OR_RETURN(const Value callee, eval_.Eval(*call.children[0], scope));
      CallArgs args;
      RETURN_IF_ERROR(eval_.EvalArgs(call, 1, scope, &args));
      args.keyword.emplace_back("caller", MakeMacro(s, scope, &s.body, "caller"));
      ASSIGN_OR_RETURN(const Value result, Call(callee, args));
      ASSIGN_OR_RETURN(const std::string text, ToPythonStr(result));
      return WithLine(Append(text, out), s.line);
    }
    case Stmt::Kind::kFilterBlock: {
      std::string text;
      RETURN_IF_ERROR(ExecBody(s.body, scope, &text));
      ASSIGN_OR_RETURN(const Value v,
                       eval_.EvalFilter(*s.filter, Value::String(std::move(text)), scope));
      ASSIGN_OR_RETURN(const std::string filtered, ToPythonStr(v));
      return Append(filtered, out);
    }
    case Stmt::Kind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (size_t i = 0; i < s.targets.size(); ++i) {
        ASSIGN_OR_RETURN(Value v, eval_.Eval(*s.values[i], scope));
        inner->Set(s.targets[i], std::move(v));
      }
      return ExecBody(s.body, inner, out);
    }
    case Stmt::Kind::kScope:
      return ExecBody(s.body, std::make_shared<Scope>(scope), out);
    case Stmt::Kind::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case Stmt::Kind::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Assign(const Stmt& s, const Value& value, Scope& scope, int line) {
  if (!s.unpack) {
    scope.Set(s.targets[0], value);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const ValueList items, Iterate(*this, value));
  if (items.size() != s.targets.size()) {
    return WithLine(TemplateError("ValueError", absl::StrCat("cannot unpack ", items.size(),
                                                             " values into ", s.targets.size())),
                    line);
  }
  for (size_t i = 0; i < items.size(); ++i) scope.Set(s.targets[i], items[i]);
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& s, const ScopePtr& scope) {
  ASSIGN_OR_RETURN(const Value v, eval_.Eval(*s.expr, scope));
  if (s.name.empty()) return Assign(s, v, *scope, s.line);
  // `set ns.attr = v`: only a namespace takes attributes.
  const Value* target = scope->Lookup(s.targets[0]);
  if (target == nullptr || !target->is_namespace()) {
    return WithLine(
        TemplateError("TemplateRuntimeError", "cannot assign attribute on non-namespace object"),
        s.line);
  }
  RETURN_IF_ERROR(WithLine(StoreInNamespace(*target, s.name, v), s.line));
  return absl::OkStatus();
}

absl::Status Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out) {
  ASSIGN_OR_RETURN(const Value iterable, eval_.Eval(*s.expr, scope));
  absl::StatusOr<ValueList> all = Iterate(*this, iterable);
  if (!all.ok()) return WithLine(all.status(), s.line);
  ValueList items;
  if (s.filter) {
    for (Value& item : *all) {
      RETURN_IF_ERROR(Charge(1));
      auto probe = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(Assign(s, item, *probe, s.line));
      ASSIGN_OR_RETURN(const Value keep, eval_.Eval(*s.filter, probe));
      if (keep.Truthy()) items.push_back(std::move(item));
    }
  } else {
    items = std::move(*all);
  }
  if (items.empty()) return ExecBody(s.else_body, std::make_shared<Scope>(scope), out);
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    RETURN_IF_ERROR(Charge(1));
    auto inner = std::make_shared<Scope>(scope);
    RETURN_IF_ERROR(Assign(s, items[i], *inner, s.line));
    auto loop = std::make_shared<ValueDict>();
    loop->Set("index", Value::Int(i + 1));
    loop->Set("index0", Value::Int(i));
    loop->Set("revindex", Value::Int(length - i));
    loop->Set("revindex0", Value::Int(length - i - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i == length - 1));
    loop->Set("length", Value::Int(length));
    loop->Set("depth", Value::Int(1));
    loop->Set("depth0", Value::Int(0));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->Set("nextitem",
              i + 1 < length ? items[i + 1] : Value::Undefined("there is no next item"));
    loop->Set("cycle", Value::Callable("loop.cycle", [i](CallArgs& args) -> absl::StatusOr<Value> {
                if (args.positional.empty()) {
                  return TemplateError("TypeError", "no items for cycling given");
                }
                return args.positional[i % args.positional.size()];
              }));
    inner->Set("loop", Value::Dict(std::move(loop)));
    RETURN_IF_ERROR(ExecBody(s.body, inner, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return absl::OkStatus();
}

Value Interpreter::MakeMacro(const Stmt& s, const ScopePtr& scope, const Body* body,
                             std::string name) {
  macro_scopes_.push_back(scope);
  return Value::Callable(std::move(name),
                         [this, &s, body, scope](CallArgs& args) -> absl::StatusOr<Value> {
                           return CallMacro(s, *body, scope, args);
                         });
}

absl::StatusOr<Value> Interpreter::CallMacro(const Stmt& s, const Body& body,
                                             const ScopePtr& defined_in, CallArgs& args) {
  RenderBudget::DepthGuard guard(budget_);
  RETURN_IF_ERROR(budget_.CheckDepth(s.line, "macro calls nest"));
  RETURN_IF_ERROR(Charge(1));
  auto scope = std::make_shared<Scope>(defined_in);
  ValueList varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < s.params.size()) {
      scope->Set(s.params[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  auto kwargs = std::make_shared<ValueDict>();
  for (auto& [key, value] : args.keyword) {
    bool is_param = false;
    for (size_t i = 0; i < s.params.size(); ++i) {
      if (s.params[i].name != key) continue;
      if (i < args.positional.size()) {
        return TemplateError(
            "TypeError",
            absl::StrCat("macro '", s.name, "' got multiple values for argument '", key, "'"));
      }
      is_param = true;
    }
    if (is_param || key == "caller") {
      scope->Set(key, value);
    } else {
      kwargs->Set(key, value);
    }
  }
  for (size_t i = args.positional.size(); i < s.params.size(); ++i) {
    const Param& p = s.params[i];
    if (std::any_of(args.keyword.begin(), args.keyword.end(),
                    [&](const auto& kw) { return kw.first == p.name; })) {
      continue;
    }
    if (p.default_value) {
      ASSIGN_OR_RETURN(Value v, eval_.Eval(*p.default_value, scope));
      scope->Set(p.name, std::move(v));
    } else {
      scope->Set(p.name, Value::Undefined(absl::StrCat("UndefinedError: parameter '", p.name,
                                                       "' was not provided")));
    }
  }
  scope->Set("varargs", Value::List(std::move(varargs), /*is_tuple=*/true));
  scope->Set("kwargs", Value::Dict(std::move(kwargs)));
  std::string out;
  RETURN_IF_ERROR(ExecBody(body, scope, &out));
  flow_ = Flow::kNormal;
  return Value::String(std::move(out));
}

}  // namespace pagoda::jinja
