// Renders a template source with a JSON context, as the jinja tests check it against jinja2.
#ifndef PAGODA_TESTS_LIB_JINJA_JINJA_TEST_UTIL_H_
#define PAGODA_TESTS_LIB_JINJA_JINJA_TEST_UTIL_H_

#include <string>

#include "lib/jinja/template.h"
#include "lib/jinja/value_format.h"
#include "nlohmann/json.hpp"

namespace pagoda::jinja::testing {

// The render at the golden sets' fixed date, or "ERROR: <message>".
inline std::string RenderOrError(const std::string& source,
                                 const std::string& context_json = "{}") {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return "ERROR: " + std::string(t.status().message());
  ValueDict context;
  const nlohmann::ordered_json json = nlohmann::ordered_json::parse(context_json);
  for (const auto& [key, value] : json.items()) {
    absl::StatusOr<Value> v = FromJson(value);
    if (!v.ok()) return "ERROR: " + std::string(v.status().message());
    context.Set(key, *v);
  }
  RenderOptions options;
  options.now = *ParseDateTime("2026-11-22T00:00:00");
  absl::StatusOr<std::string> out = t->Render(context, options);
  return out.ok() ? *out : "ERROR: " + std::string(out.status().message());
}

}  // namespace pagoda::jinja::testing

#endif  // PAGODA_TESTS_LIB_JINJA_JINJA_TEST_UTIL_H_
