#include "router/api/openai/openai_chat_output.h"

#include <string>

#include "common/json.h"

namespace pagoda {

ChatOutput::ChatOutput(const ChatOutputOptions& options)
    : reasoning_(options.reasoning, options.starts_in_reasoning),
      tools_(options.tool_format, options.max_tool_calls) {}

OrderedJson ChatOutput::ToJson(const ReasoningStream::Delta& reasoning,
                               const ToolCallStreamDelta& tools) const {
  OrderedJson delta = OrderedJson::object();
  if (!reasoning.reasoning.empty()) delta["reasoning_content"] = reasoning.reasoning;
  if (!tools.content.empty()) delta["content"] = tools.content;
  if (!tools.calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolCallDelta& c : tools.calls) {
      OrderedJson call = {{"index", c.index}};
      if (!c.id.empty()) {
        call["id"] = c.id;
        call["type"] = "function";
        call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
      } else {
        call["function"] = {{"arguments", c.arguments}};
      }
      calls.push_back(std::move(call));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

OrderedJson ChatOutput::Delta(std::string_view text) {
  const ReasoningStream::Delta r = reasoning_.Add(text);
  return ToJson(r, tools_.Add(r.content));
}

OrderedJson ChatOutput::Finish() {
  const ReasoningStream::Delta r = reasoning_.Finish();
  ToolCallStreamDelta t = tools_.Add(r.content);
  const ToolCallStreamDelta rest = tools_.Finish();
  t.content += rest.content;
  t.calls.insert(t.calls.end(), rest.calls.begin(), rest.calls.end());
  return ToJson(r, t);
}

OrderedJson ChatOutput::Message(const ChatOutputOptions& options, std::string_view text,
                                bool* has_tool_calls) {
  const ReasoningSplit split = SplitReasoning(options.reasoning, options.starts_in_reasoning, text);
  const ParsedToolCalls parsed =
      ParseToolCalls(options.tool_format, split.content, options.max_tool_calls);
  OrderedJson message = {{"role", "assistant"}};
  message["content"] =
      parsed.content.has_value() ? OrderedJson(*parsed.content) : OrderedJson(nullptr);
  if (split.reasoning.has_value()) message["reasoning_content"] = *split.reasoning;
  *has_tool_calls = !parsed.calls.empty();
  if (*has_tool_calls) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolCall& c : parsed.calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  return message;
}

}  // namespace pagoda
