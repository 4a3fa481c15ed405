// Renders a parsed template: scopes, statements and expressions, within the bounds of
// RenderLimits. Filters, tests, methods and globals are declared in builtins.h. Internal to
// pagoda_jinja; users go through Template (template.h).
#ifndef PAGODA_LIB_JINJA_INTERPRETER_H_
#define PAGODA_LIB_JINJA_INTERPRETER_H_

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

// What one render may spend. A template from a model file and a context from a request are
// both untrusted: exceeding any bound is RESOURCE_EXHAUSTED, never a crash or a hang.
struct RenderLimits {
  int64_t max_output_bytes = 16 << 20;   // also bounds any one string or list built
  int64_t max_steps = 1'000'000;         // loop iterations, calls, filters, elements built
  int64_t max_copied_bytes = 256 << 20;  // bytes copied into new strings (concatenation, ...)
  int max_call_depth = 200;              // nested macro calls and nested evaluation
};

// The payload key marking a raise_exception() error, whose message is the template's own.
inline constexpr char kRaisedPayload[] = "pagoda.jinja/raised";

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

// Variables of one frame; a miss looks in the parent.
class Scope {
 public:
  explicit Scope(ScopePtr parent) : parent_(std::move(parent)) {}
  const Value* Lookup(absl::string_view name) const;
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }
  void Clear() { vars_.clear(); }

 private:
  ScopePtr parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};

// Statements in interpreter.cc, expressions in interpreter_expressions.cc, operators in
// interpreter_operators.cc.
class Interpreter {
 public:
  // `now` is what strftime_now() formats.
  Interpreter(const RenderLimits& limits, const std::tm& now) : limits_(limits), now_(now) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `globals` (context variables over builtins) into *out.
  absl::Status Render(const Body& body, const ScopePtr& globals, std::string* out);

  // ---- for builtins ----
  // Spends `steps`, or `bytes` of copying; RESOURCE_EXHAUSTED past the limit.
  absl::Status Charge(int64_t steps);
  absl::Status ChargeBytes(int64_t bytes);
  // RESOURCE_EXHAUSTED if a string or list of `size` would pass the output bound.
  absl::Status CheckSize(int64_t size) const;
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args);
  // A fresh namespace() object (the interpreter breaks reference cycles through it at the end).
  Value NewNamespace();
  const std::tm& now() const { return now_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Depth of nested Eval/Exec/macro calls, released on scope exit.
  class DepthGuard {
   public:
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }

   private:
    int* depth_;
  };

  absl::Status ExecBody(const Body& body, const ScopePtr& scope, std::string* out);
  absl::Status Exec(const Stmt& s, const ScopePtr& scope, std::string* out);
  absl::Status ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out);
  absl::Status ExecSet(const Stmt& s, const ScopePtr& scope);
  absl::Status Assign(const Stmt& s, const Value& value, Scope& scope, int line);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope, const Body* body, std::string name);
  absl::StatusOr<Value> CallMacro(const Stmt& s, const Body& body, const ScopePtr& defined_in,
                                  CallArgs& args);
  absl::Status Append(absl::string_view text, std::string* out);

  absl::StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope);
  absl::StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope);
  absl::Status EvalArgs(const Expr& e, size_t first, const ScopePtr& scope, CallArgs* args);
  absl::StatusOr<Value> EvalFilter(const Expr& e, Value subject, const ScopePtr& scope);
  absl::StatusOr<Value> Binary(const std::string& op, const Value& a, const Value& b);
  absl::StatusOr<bool> Compare(const std::string& op, const Value& a, const Value& b);

  const RenderLimits limits_;
  const std::tm now_;
  int64_t steps_ = 0;
  int64_t copied_bytes_ = 0;
  int depth_ = 0;
  Flow flow_ = Flow::kNormal;
  // Scopes that define macros and namespaces can reach themselves through their values;
  // they are cleared when the render ends so the cycles free.
  std::vector<ScopePtr> macro_scopes_;
  std::vector<std::shared_ptr<ValueDict>> namespaces_;
};

// "line N: message", unless `status` already names a line or came from raise_exception().
absl::Status WithLine(absl::Status status, int line);
// ns.name = value, refused for a value of depth kNamespaceDepth or more (a namespace, or
// something holding one), which keeps namespaces free of cycles and chains.
absl::Status StoreInNamespace(const Value& ns, const std::string& name, const Value& value);
// An error of a kind jinja2 names ("TypeError", "UndefinedError", ...).
absl::Status TemplateError(absl::string_view kind, absl::string_view message);
// The error an undefined value raises when it is used. REQUIRES: v.is_undefined().
absl::Status UndefinedError(const Value& v);
// `r` as an int, or OverflowError (RESOURCE_EXHAUSTED) outside the int64 range.
absl::StatusOr<Value> IntResult(__int128 r);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_INTERPRETER_H_
