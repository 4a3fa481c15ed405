// Which text a model writes its tool calls in, and reasoning blocks, as vLLM names the
// parsers (--tool-call-parser, --reasoning-parser):
//
//   hermes       <tool_call>{"name": "f", "arguments": {...}}</tool_call>, possibly several
//                (Hermes 2/3, Qwen2.5, Qwen3, Qwen3-Coder's JSON form)
//   llama3_json  {"name": "f", "parameters": {...}}, optionally after <|python_tag|>, several
//                separated by ';' (Llama 3.1-3.3)
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...], or Mistral Small 3.2's
//                [TOOL_CALLS]f[ARGS]{...}
//
//   qwen3        <think>...</think> at the start of the output is reasoning
//   deepseek_r1  the same, and the output starts inside the block (the prompt opened it)
#ifndef PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_FORMAT_H_
#define PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_FORMAT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pagoda {

enum class ToolCallFormat { kNone, kHermes, kLlama3Json, kMistral };
enum class ReasoningFormat { kNone, kQwen3, kDeepSeekR1 };

// "none", "hermes", "llama3_json", "mistral"; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<ToolCallFormat> ToolCallFormatFromName(std::string_view name);
std::string_view ToolCallFormatName(ToolCallFormat format);
// "none", "qwen3", "deepseek_r1".
absl::StatusOr<ReasoningFormat> ReasoningFormatFromName(std::string_view name);
std::string_view ReasoningFormatName(ReasoningFormat format);

// The format a chat template teaches its model, from what the template writes: [TOOL_CALLS],
// <tool_call>, <|python_tag|> or the ipython role. kNone when it writes none of them.
ToolCallFormat DetectToolCallFormat(std::string_view chat_template);
// kDeepSeekR1 for DeepSeek's templates with <think>, kQwen3 for others with <think>.
ReasoningFormat DetectReasoningFormat(std::string_view chat_template);

// A fresh tool call id: "call_" and 24 random letters and digits; Mistral's templates demand
// 9 letters and digits.
std::string NewToolCallId(ToolCallFormat format);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_FORMAT_H_
