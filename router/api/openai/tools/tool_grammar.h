// The grammar that makes a model call a tool (OpenAI's tool_choice "required", or a named
// function): its output must be calls in the model's own format (tool_call_format.h), each
// naming one of the tools with arguments that its `parameters` JSON Schema accepts. Built as
// one JSON Schema (an anyOf of {"name": const, "arguments": parameters}) through the schema
// compiler, framed by the format's markers.
#ifndef PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_GRAMMAR_H_
#define PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_GRAMMAR_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/tools/tool_call_format.h"

namespace pagoda {

struct ToolSpec {
  std::string name;
  OrderedJson parameters;  // a JSON Schema object; null: any object
};

// The id of the special token whose text is `text` in the model's tokenizer, else -1.
using SpecialTokenIds = std::function<int(std::string_view text)>;

// GBNF (start rule root) of one call (`parallel` false) or one or more, each to one of
// `tools`. A marker of the format (<tool_call>, </tool_call>, [TOOL_CALLS]) that `special`
// finds as one token is written as that token's terminal (<[id]>), so the model writes the
// token it was trained on rather than spelling the marker out of pieces; else as bytes.
// Mistral's calls are [TOOL_CALLS][{"name", "arguments"}, ...], or, when the tokenizer also
// has [ARGS] (Mistral Small 3.2's format), [TOOL_CALLS]name[ARGS]{...} per call.
// INVALID_ARGUMENT when a schema is one the compiler refuses (its message names the keyword)
// or `format` is kNone. REQUIRES: `tools` is not empty.
absl::StatusOr<std::string> ToolCallGbnf(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                         bool parallel, const SpecialTokenIds& special = {});

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_GRAMMAR_H_
