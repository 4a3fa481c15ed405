#include "common/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/jinja/builtins.h"
#include "common/jinja/text.h"
#include "common/jinja/value_format.h"
#include "common/status_macros.h"
#include "common/text/utf8.h"

namespace pagoda::jinja {

const Value* Scope::Lookup(absl::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    const auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

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

namespace {

absl::Status UndefinedError(const Value& v) {
  return absl::InvalidArgumentError(v.undefined_error());
}

// Depth of nested Eval/Exec/macro calls, released on scope exit.
class DepthGuard {
 public:
  explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~DepthGuard() { --*depth_; }

 private:
  int* depth_;
};

absl::StatusOr<Value> IntResult(__int128 r) {
  if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
    return absl::ResourceExhaustedError("OverflowError: integer result out of the int64 range");
  }
  return Value::Int(static_cast<int64_t>(r));
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Interpreter::~Interpreter() {
  for (const ScopePtr& s : macro_scopes_) s->Clear();
  for (const auto& ns : namespaces_) ns->Clear();
}

absl::Status Interpreter::Charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        absl::StrCat("template exceeded its limit of ", limits_.max_steps,
                     " steps (loop iterations, calls, filters, elements built)"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::ChargeBytes(int64_t bytes) {
  copied_bytes_ += bytes;
  if (copied_bytes_ > limits_.max_copied_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template exceeded its limit of ", limits_.max_copied_bytes, " bytes copied into strings"));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckSize(int64_t size) const {
  if (size > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("template built a value of ", size,
                                                     " bytes, over the limit of ",
                                                     limits_.max_output_bytes));
  }
  return absl::OkStatus();
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
  DepthGuard guard(&depth_);
  if (depth_ > limits_.max_call_depth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "line ", s.line, ": template nests or recurses deeper than ", limits_.max_call_depth));
  }
  switch (s.kind) {
    case Stmt::Kind::kText:
      return Append(s.text, out);
    case Stmt::Kind::kOutput: {
      ASSIGN_OR_RETURN(const Value v, Eval(*s.expr, scope));
      ASSIGN_OR_RETURN(const std::string text, ToPythonStr(v));
      return Append(text, out);
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        ASSIGN_OR_RETURN(const Value c, Eval(*s.conditions[i], scope));
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
        ASSIGN_OR_RETURN(v, EvalFilter(*s.filter, std::move(v), scope));
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
      ASSIGN_OR_RETURN(const Value callee, Eval(*call.children[0], scope));
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(call, 1, scope, &args));
      args.keyword.emplace_back("caller", MakeMacro(s, scope, &s.body, "caller"));
      ASSIGN_OR_RETURN(const Value result, Call(callee, args));
      ASSIGN_OR_RETURN(const std::string text, ToPythonStr(result));
      return WithLine(Append(text, out), s.line);
    }
    case Stmt::Kind::kFilterBlock: {
      std::string text;
      RETURN_IF_ERROR(ExecBody(s.body, scope, &text));
      ASSIGN_OR_RETURN(const Value v, EvalFilter(*s.filter, Value::String(std::move(text)), scope));
      ASSIGN_OR_RETURN(const std::string filtered, ToPythonStr(v));
      return Append(filtered, out);
    }
    case Stmt::Kind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (size_t i = 0; i < s.targets.size(); ++i) {
        ASSIGN_OR_RETURN(Value v, Eval(*s.values[i], scope));
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
  ASSIGN_OR_RETURN(const Value v, Eval(*s.expr, scope));
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
  ASSIGN_OR_RETURN(const Value iterable, Eval(*s.expr, scope));
  absl::StatusOr<ValueList> all = Iterate(*this, iterable);
  if (!all.ok()) return WithLine(all.status(), s.line);
  ValueList items;
  if (s.filter) {
    for (Value& item : *all) {
      RETURN_IF_ERROR(Charge(1));
      auto probe = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(Assign(s, item, *probe, s.line));
      ASSIGN_OR_RETURN(const Value keep, Eval(*s.filter, probe));
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
  DepthGuard guard(&depth_);
  if (depth_ > limits_.max_call_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("line ", s.line, ": macro calls nest deeper than ", limits_.max_call_depth));
  }
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
      ASSIGN_OR_RETURN(Value v, Eval(*p.default_value, scope));
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

absl::StatusOr<Value> Interpreter::Call(const Value& callee, CallArgs& args) {
  if (callee.is_callable()) return callee.function()(args);
  if (callee.is_undefined()) return UndefinedError(callee);
  return TemplateError("TypeError",
                       absl::StrCat("'", callee.TypeName(), "' object is not callable"));
}

absl::Status Interpreter::EvalArgs(const Expr& e, size_t first, const ScopePtr& scope,
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

absl::StatusOr<Value> Interpreter::EvalFilter(const Expr& e, Value subject, const ScopePtr& scope) {
  // A filter chain parsed without a subject (block set / filter block): the innermost
  // filter's subject slot is null and takes `subject`.
  if (e.children[0] && e.children[0]->kind == Expr::Kind::kFilter) {
    ASSIGN_OR_RETURN(subject, EvalFilter(*e.children[0], std::move(subject), scope));
  } else if (e.children[0]) {
    ASSIGN_OR_RETURN(subject, Eval(*e.children[0], scope));
  }
  CallArgs args;
  RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
  absl::StatusOr<Value> v = ApplyFilter(*this, e.name, subject, args);
  if (!v.ok()) return WithLine(v.status(), e.line);
  return v;
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  DepthGuard guard(&depth_);
  if (depth_ > limits_.max_call_depth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "line ", e.line, ": template nests or recurses deeper than ", limits_.max_call_depth));
  }
  absl::StatusOr<Value> v = EvalInner(e, scope);
  if (!v.ok()) return WithLine(v.status(), e.line);
  // Deeper values would recurse without bound when printed, compared or freed.
  if (v->depth() > kMaxValueDepth) {
    return absl::ResourceExhaustedError(absl::StrCat("line ", e.line, ": value nests deeper than ",
                                                     kMaxValueDepth, " lists and dicts"));
  }
  return v;
}

absl::StatusOr<Value> Interpreter::EvalInner(const Expr& e, const ScopePtr& scope) {
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
      RETURN_IF_ERROR(Charge(static_cast<int64_t>(e.children.size())));
      ValueList items;
      for (const ExprPtr& c : e.children) {
        ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      RETURN_IF_ERROR(Charge(static_cast<int64_t>(e.children.size())));
      auto dict = std::make_shared<ValueDict>();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        ASSIGN_OR_RETURN(const Value key, Eval(*e.children[i], scope));
        if (!key.is_string()) {
          return TemplateError("TypeError", "only string dict keys are supported");
        }
        ASSIGN_OR_RETURN(Value value, Eval(*e.children[i + 1], scope));
        dict->Set(key.as_string(), std::move(value));
      }
      return Value::Dict(std::move(dict));
    }
    case Expr::Kind::kGetAttr: {
      ASSIGN_OR_RETURN(const Value obj, Eval(*e.children[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      return GetAttribute(*this, obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      ASSIGN_OR_RETURN(const Value obj, Eval(*e.children[0], scope));
      if (obj.is_undefined()) return UndefinedError(obj);
      ASSIGN_OR_RETURN(const Value key, Eval(*e.children[1], scope));
      return GetItem(*this, obj, key);
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
      } else if (obj.is_list()) {
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
      RETURN_IF_ERROR(Charge(static_cast<int64_t>(picked.size())));
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
      return Call(callee, args);
    }
    case Expr::Kind::kFilter:
      return EvalFilter(e, Value(), scope);
    case Expr::Kind::kTest: {
      ASSIGN_OR_RETURN(const Value subject, Eval(*e.children[0], scope));
      CallArgs args;
      RETURN_IF_ERROR(EvalArgs(e, 1, scope, &args));
      ASSIGN_OR_RETURN(const bool result, ApplyTest(*this, e.name, subject, args));
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
      return Binary(e.name, a, b);
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
        ASSIGN_OR_RETURN(const bool holds, Compare(e.ops[i], left, right));
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

absl::StatusOr<Value> Interpreter::Binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    ASSIGN_OR_RETURN(std::string s, ToPythonStr(a));
    ASSIGN_OR_RETURN(const std::string t, ToPythonStr(b));
    RETURN_IF_ERROR(CheckSize(static_cast<int64_t>(s.size() + t.size())));
    RETURN_IF_ERROR(ChargeBytes(static_cast<int64_t>(s.size() + t.size())));
    return Value::String(s + t);
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  const auto unsupported = [&] {
    return TemplateError("TypeError", absl::StrCat("unsupported operand type(s) for ", op, ": '",
                                                   a.TypeName(), "' and '", b.TypeName(), "'"));
  };
  if (a.is_number() && b.is_number()) {
    const bool floats = a.is_float() || b.is_float();
    if (op == "/") {
      if (b.as_float() == 0) return TemplateError("ZeroDivisionError", "division by zero");
      return Value::Float(a.as_float() / b.as_float());
    }
    if (floats) {
      const double x = a.as_float();
      const double y = b.as_float();
      if (op == "+") return Value::Float(x + y);
      if (op == "-") return Value::Float(x - y);
      if (op == "*") return Value::Float(x * y);
      if (op == "**") return Value::Float(std::pow(x, y));
      if (y == 0) return TemplateError("ZeroDivisionError", "float division by zero");
      if (op == "//") return Value::Float(std::floor(x / y));
      if (op == "%") {
        double m = std::fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::Float(m);
      }
      return unsupported();
    }
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    if (op == "+") return IntResult(static_cast<__int128>(x) + y);
    if (op == "-") return IntResult(static_cast<__int128>(x) - y);
    if (op == "*") return IntResult(static_cast<__int128>(x) * y);
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      __int128 r = 1;
      for (int64_t i = 0; i < y; ++i) {
        r *= x;
        if (r > std::numeric_limits<int64_t>::max() || r < std::numeric_limits<int64_t>::min()) {
          return IntResult(r);
        }
        if (r == 0 || r == 1) break;
      }
      return IntResult(r);
    }
    if (y == 0) return TemplateError("ZeroDivisionError", "integer division or modulo by zero");
    if (op == "//") {
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        return IntResult(-static_cast<__int128>(x));
      return Value::Int(FloorDiv(x, y));
    }
    if (op == "%") {
      if (y == -1) return Value::Int(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    return unsupported();
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      const int64_t size = static_cast<int64_t>(a.as_string().size() + b.as_string().size());
      RETURN_IF_ERROR(CheckSize(size));
      RETURN_IF_ERROR(ChargeBytes(size));
      return Value::String(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList items = a.as_list();
      const ValueList& more = b.as_list();
      RETURN_IF_ERROR(CheckSize(static_cast<int64_t>(items.size() + more.size())));
      RETURN_IF_ERROR(Charge(static_cast<int64_t>(items.size() + more.size())));
      items.insert(items.end(), more.begin(), more.end());
      return Value::List(std::move(items), a.is_tuple());
    }
    return unsupported();
  }
  if (op == "%" && a.is_string()) {
    ASSIGN_OR_RETURN(std::string out,
                     PercentFormat(a.as_string(), b.is_tuple() ? b.as_list() : ValueList{b}));
    RETURN_IF_ERROR(CheckSize(static_cast<int64_t>(out.size())));
    return Value::String(std::move(out));
  }
  if (op == "*") {
    // Repetition: str * int, list * int (either order).
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if (!count.is_int() && !count.is_bool()) return unsupported();
    const int64_t n = std::max<int64_t>(0, count.as_int());
    if (seq.is_string()) {
      const __int128 size = static_cast<__int128>(seq.as_string().size()) * n;
      RETURN_IF_ERROR(CheckSize(size > limits_.max_output_bytes ? limits_.max_output_bytes + 1
                                                                : static_cast<int64_t>(size)));
      RETURN_IF_ERROR(ChargeBytes(static_cast<int64_t>(size)));
      std::string out;
      out.reserve(static_cast<size_t>(size));
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return Value::String(std::move(out));
    }
    if (seq.is_list()) {
      const __int128 size = static_cast<__int128>(seq.as_list().size()) * n;
      RETURN_IF_ERROR(CheckSize(size > limits_.max_output_bytes ? limits_.max_output_bytes + 1
                                                                : static_cast<int64_t>(size)));
      RETURN_IF_ERROR(Charge(static_cast<int64_t>(size)));
      ValueList out;
      for (int64_t i = 0; i < n; ++i) {
        out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
      }
      return Value::List(std::move(out), seq.is_tuple());
    }
    return unsupported();
  }
  return unsupported();
}

absl::StatusOr<bool> Interpreter::Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        return TemplateError("TypeError", absl::StrCat("'in <string>' requires string as left "
                                                       "operand, not ",
                                                       a.TypeName()));
      }
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& item : b.as_list()) {
        if (Equals(a, item)) {
          found = true;
          break;
        }
      }
    } else if (b.is_dict()) {
      found = a.is_string() && b.as_dict().Find(a.as_string()) != nullptr;
    } else if (!b.is_undefined()) {
      return TemplateError("TypeError",
                           absl::StrCat("argument of type '", b.TypeName(), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  int order = 0;  // <0, 0, >0
  if (a.is_number() && b.is_number()) {
    const double x = a.as_float();
    const double y = b.as_float();
    if (a.is_float() || b.is_float()) {
      order = x < y ? -1 : (x > y ? 1 : 0);
    } else {
      order = a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    }
  } else if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    order = c < 0 ? -1 : (c > 0 ? 1 : 0);
  } else if (a.is_list() && b.is_list()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    size_t i = 0;
    while (i < x.size() && i < y.size() && Equals(x[i], y[i])) ++i;
    if (i < x.size() && i < y.size()) {
      ASSIGN_OR_RETURN(const bool less, Compare("<", x[i], y[i]));
      order = less ? -1 : 1;
    } else {
      order = x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
  } else {
    return TemplateError(
        "TypeError", absl::StrCat("'", op, "' not supported between instances of '", a.TypeName(),
                                  "' and '", b.TypeName(), "'"));
  }
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace pagoda::jinja
