// Renders a parsed template within the bounds of RenderLimits: statements here, expressions
// in ExpressionEvaluator, spending in RenderBudget. Filters, tests, methods and globals are
// declared in builtins.h. Internal to pagoda_jinja; users go through Template (template.h).
#ifndef PAGODA_LIB_JINJA_INTERPRETER_H_
#define PAGODA_LIB_JINJA_INTERPRETER_H_

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/expression_evaluator.h"
#include "lib/jinja/render_budget.h"
#include "lib/jinja/scope.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

// The payload key marking a raise_exception() error, whose message is the template's own.
inline constexpr char kRaisedPayload[] = "pagoda.jinja/raised";

// One render: runs statements and macros, and owns the render's budget and the evaluator of
// its expressions. Not thread-safe.
class Interpreter {
 public:
  // `now` is what strftime_now() formats.
  Interpreter(const RenderLimits& limits, const std::tm& now) : budget_(limits), now_(now) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `globals` (context variables over builtins) into *out.
  absl::Status Render(const Body& body, const ScopePtr& globals, std::string* out);

  // ---- for builtins ----
  // The render's RenderBudget: Charge, ChargeBytes and CheckSize as it defines them.
  absl::Status Charge(int64_t steps) { return budget_.Charge(steps); }
  absl::Status ChargeBytes(int64_t bytes) { return budget_.ChargeBytes(bytes); }
  absl::Status CheckSize(int64_t size) const { return budget_.CheckSize(size); }
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args);
  // A fresh namespace() object (the interpreter breaks reference cycles through it at the end).
  Value NewNamespace();
  const std::tm& now() const { return now_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::Status ExecBody(const Body& body, const ScopePtr& scope, std::string* out);
  absl::Status Exec(const Stmt& s, const ScopePtr& scope, std::string* out);
  absl::Status ExecFor(const Stmt& s, const ScopePtr& scope, std::string* out);
  absl::Status ExecSet(const Stmt& s, const ScopePtr& scope);
  absl::Status Assign(const Stmt& s, const Value& value, Scope& scope, int line);
  Value MakeMacro(const Stmt& s, const ScopePtr& scope, const Body* body, std::string name);
  absl::StatusOr<Value> CallMacro(const Stmt& s, const Body& body, const ScopePtr& defined_in,
                                  CallArgs& args);
  absl::Status Append(absl::string_view text, std::string* out);

  RenderBudget budget_;
  ExpressionEvaluator eval_{*this, budget_};  // after budget_, which it borrows
  const std::tm now_;
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

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_INTERPRETER_H_
