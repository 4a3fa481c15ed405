// Structured output in OpenAI's API: response_format ({"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}), llama.cpp's `grammar` (GBNF)
// and vLLM's guided_json / guided_regex / guided_choice / guided_grammar, read into the
// request's Constraint. At most one per request; a grammar or schema the engine cannot serve
// is INVALID_ARGUMENT starting with the field's name (the error's `param`).
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_

#include "absl/status/status.h"
#include "common/json.h"
#include "router/api/constraint_compiler.h"
#include "router/core/engine.h"

namespace pagoda {

// Choices in guided_choice at most, and bytes per choice.
inline constexpr size_t kMaxChoices = 1024;
inline constexpr size_t kMaxChoiceBytes = 4096;

// Sets `request->constraint` from `body`'s fields (unchanged when it has none). `compiler`
// null: every such field is refused as unsupported.
absl::Status ReadConstraint(const OrderedJson& body, ConstraintCompiler* compiler,
                            GenerationRequest* request);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_CONSTRAINT_H_
