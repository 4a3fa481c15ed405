// The grammar that makes a model call a tool (OpenAI's tool_choice "required", or a named
// function): its output must be calls in the model's own format (tool_call_format.h), each
// naming one of the tools with arguments that its `parameters` JSON Schema accepts. Built as
// one JSON Schema (an anyOf of {"name": const, "arguments": parameters}) through the schema
// compiler, framed by the format's markers.
#ifndef PAGODA_ROUTER_API_TOOLS_TOOL_GRAMMAR_H_
#define PAGODA_ROUTER_API_TOOLS_TOOL_GRAMMAR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "router/api/tools/tool_call_format.h"

namespace pagoda {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema object; null: any object
};

// GBNF (start rule root) of one call (`parallel` false) or one or more, each to one of
// `tools`. INVALID_ARGUMENT when a schema is one the compiler refuses (its message names the
// keyword) or `format` is kNone. REQUIRES: `tools` is not empty.
absl::StatusOr<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                         bool parallel);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_TOOLS_TOOL_GRAMMAR_H_
