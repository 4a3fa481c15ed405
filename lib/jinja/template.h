// A Jinja template, parsed once and rendered many times, as transformers'
// apply_chat_template runs it: jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks, loop controls and the {% generation %} tag.
//
// Sandboxed and bounded: the source comes from model files and the context from requests,
// so a hostile template or context renders to an error, never a crash, a hang or an
// unbounded allocation (see RenderLimits).
//
// Thread safety: a Template is immutable; Render may run concurrently on one Template.
#ifndef PAGODA_LIB_JINJA_TEMPLATE_H_
#define PAGODA_LIB_JINJA_TEMPLATE_H_

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/jinja/ast.h"
#include "lib/jinja/interpreter.h"
#include "lib/jinja/render_budget.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

struct TemplateOptions {
  bool trim_blocks = true;    // transformers' setting (jinja2's default is false)
  bool lstrip_blocks = true;  // likewise
};

struct RenderOptions {
  RenderLimits limits;
  // What strftime_now() formats; absent: the local time at the call.
  std::optional<std::tm> now;
};

class Template {
 public:
  // INVALID_ARGUMENT naming the line on a syntax error.
  static absl::StatusOr<Template> Parse(std::string_view source,
                                        const TemplateOptions& options = {});

  // Renders with `context` (its entries become variables, over the globals). Errors:
  // INVALID_ARGUMENT for a template error ("line N: UndefinedError: ..."), with exactly the
  // template's message when it called raise_exception(); RESOURCE_EXHAUSTED past a limit.
  absl::StatusOr<std::string> Render(const ValueDict& context,
                                     const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}

  std::shared_ptr<const Body> body_;
};

// "2026-11-22T00:00:00" (or with a space, or a date alone) as a broken-down time.
absl::StatusOr<std::tm> ParseDateTime(std::string_view text);

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_TEMPLATE_H_
