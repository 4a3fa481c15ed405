// OpenAI's tool fields of /v1/chat/completions: `tools` (checked, then handed to the chat
// template), `tool_choice` ("none", "auto", "required" or {"type": "function", "function":
// {"name": ...}}) and `parallel_tool_calls`; and the tool turns of `messages` as templates
// expect them. As vLLM does: tools are rendered even with tool_choice "none" (its calls are
// not parsed then); "auto" parses the output's calls in the server's format; "required" and a
// named function are enforced by a grammar (tool_grammar.h) so that the output is calls;
// parallel_tool_calls false is one call at most (the grammar's; "auto" keeps the first).
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_TOOLS_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_TOOLS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "router/api/openai/tools/tool_call_parser.h"
#include "router/api/openai/tools/tool_grammar.h"

namespace pagoda {

// Tools per request at most: each is rendered into the prompt, and each is an alternative of
// a required call's grammar.
inline constexpr size_t kMaxTools = 128;

struct ToolRequest {
  OrderedJson tools;  // for the template: null, or the checked list
  // How to parse the output: kNone when there are no tools, tool_choice is "none", or the
  // server parses none.
  ToolCallFormat parse = ToolCallFormat::kNone;
  int max_calls = kUnlimitedToolCalls;
  // "required" or a named function: the grammar the output must follow.
  std::optional<std::string> gbnf;
};

// Reads the tool fields of `body` for a server that parses `format`. INVALID_ARGUMENT naming
// the field (tools, tool_choice, parallel_tool_calls) when one is malformed, names a function
// not in tools, or (with `build_grammar`; rendering alone, as /tokenize does, needs none) asks
// for a call that cannot be enforced.
// `special` finds the format's markers the grammar writes as tokens (ToolCallGbnf).
absl::StatusOr<ToolRequest> ReadToolRequest(const OrderedJson& body, ToolCallFormat format,
                                            bool build_grammar = true,
                                            const SpecialTokenIds& special = {});

// `message` (an object with a role) as a template expects it: an assistant's tool_calls with
// their arguments as objects (clients send OpenAI's JSON text; Qwen's, Hermes' and Llama's
// templates iterate or dump a mapping, as vLLM passes it) and a null content as ""; a tool
// message's tool_call_id a string. INVALID_ARGUMENT naming `messages` when they are malformed.
absl::Status PrepareToolTurn(OrderedJson* message);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_TOOLS_H_
