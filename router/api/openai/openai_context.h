// What every OpenAI endpoint's request is parsed against: the model's limits (the Cluster), its
// tokenizer and chat template, the structured-output compiler, and how its output is parsed.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_CONTEXT_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_CONTEXT_H_

#include <optional>
#include <string>

#include "lib/jinja/chat_template.h"
#include "lib/text/tokenizer.h"
#include "router/api/constraint_compiler.h"
#include "router/api/openai/openai_chat_output.h"
#include "router/core/cluster.h"

namespace pagoda {

// What a request is parsed against. Pointers not owned; `chat_template` may be null (chat
// requests are then refused).
struct OpenAiContext {
  const Cluster* cluster = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const jinja::ChatTemplate* chat_template = nullptr;
  std::optional<std::string> bos_token, eos_token;  // the template's variables
  // Structured output (response_format, grammar, guided_*); null: those fields are refused.
  ConstraintCompiler* constraints = nullptr;
  // How this model writes tool calls and reasoning (--tool-call-parser, --reasoning-parser, or
  // detected from its chat template); kNone: not parsed.
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_CONTEXT_H_
