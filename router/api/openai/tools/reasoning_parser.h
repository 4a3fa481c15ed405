// A reasoning model's <think>...</think> block split from its answer: OpenAI-compatible
// servers return it as `reasoning_content` beside `content`. The block counts only at the
// start of the output (after whitespace), or from the first byte when the prompt opened it
// (DeepSeek-R1's generation prompt ends in "<think>\n"). An output cut off inside the block is
// all reasoning. The answer after "</think>" starts at its first non-whitespace byte.
#ifndef PAGODA_ROUTER_API_OPENAI_TOOLS_REASONING_PARSER_H_
#define PAGODA_ROUTER_API_OPENAI_TOOLS_REASONING_PARSER_H_

#include <optional>
#include <string>
#include <string_view>

#include "router/api/openai/tools/tool_call_format.h"

namespace pagoda {

// Whether an output after `prompt` starts inside the reasoning block: the prompt ends in an
// open "<think>" (and whitespace); for kDeepSeekR1 also unless it ends in "</think>" (a
// template that closed the block for a non-thinking turn). False for kNone.
bool StartsInReasoning(ReasoningFormat format, std::string_view prompt);

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // nullopt: the output had no block
  std::string content;
};

// `text`: a whole output.
ReasoningSplit SplitReasoning(ReasoningFormat format, bool starts_inside, std::string_view text);

// Not thread-safe: one per streamed output. The pieces add up to SplitReasoning's.
class ReasoningStream {
 public:
  ReasoningStream(ReasoningFormat format, bool starts_inside)
      : format_(format), starts_inside_(starts_inside) {}

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta Add(std::string_view text);
  Delta Finish();

 private:
  Delta Emit(bool final);

  const ReasoningFormat format_;
  const bool starts_inside_;
  std::string text_;  // the output so far
  size_t reasoning_sent_ = 0, content_sent_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_TOOLS_REASONING_PARSER_H_
