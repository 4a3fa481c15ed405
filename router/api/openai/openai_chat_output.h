// One chat choice's output text as OpenAI's assistant message: the reasoning block as
// `reasoning_content`, the model's tool calls as `tool_calls`, the rest as `content` (null
// when there are calls and nothing else). Whole (Message) or streamed (Delta, Finish: the
// fields of each chunk's `delta`, tool calls as OpenAI streams them: index, id, type and name
// first, then arguments in pieces).
// Not thread-safe: one per choice.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_CHAT_OUTPUT_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_CHAT_OUTPUT_H_

#include <string_view>

#include "common/json.h"
#include "router/api/openai/tools/reasoning_parser.h"
#include "router/api/openai/tools/tool_call_parser.h"

namespace pagoda {

struct ChatOutputOptions {
  ToolCallFormat tool_format = ToolCallFormat::kNone;  // kNone: calls are not parsed
  int max_tool_calls = kUnlimitedToolCalls;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;  // StartsInReasoning(reasoning, prompt)
  // Whether the text needs parsing at all.
  bool active() const {
    return tool_format != ToolCallFormat::kNone || reasoning != ReasoningFormat::kNone;
  }
};

class ChatOutput {
 public:
  explicit ChatOutput(const ChatOutputOptions& options);

  // Streaming: the delta's fields for the output's next `text` (an empty object when all of
  // it is held back), and those of the rest at its end.
  OrderedJson Delta(std::string_view text);
  OrderedJson Finish();
  // Whether calls were streamed (finish_reason "tool_calls").
  bool has_tool_calls() const { return tools_.num_calls() > 0; }

  // A whole output's message: {"role": "assistant", "content", "reasoning_content"?,
  // "tool_calls"?}; `*has_tool_calls` set.
  static OrderedJson Message(const ChatOutputOptions& options, std::string_view text,
                             bool* has_tool_calls);

 private:
  OrderedJson ToJson(const ReasoningStream::Delta& reasoning,
                     const ToolCallStreamDelta& tools) const;

  ReasoningStream reasoning_;
  ToolCallStream tools_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_CHAT_OUTPUT_H_
