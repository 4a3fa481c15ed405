// A model's tool calls, parsed out of its output text into OpenAI's `tool_calls`, whole
// (ParseToolCalls) or as the text streams in (ToolCallStream). The formats are
// tool_call_format.h's. Text around the calls stays content; a call that does not parse (not
// JSON, no "name", no arguments object) stays content too, never an error.
//
// A call's `arguments` is the model's own JSON text of the arguments object, so the streamed
// argument deltas add up to exactly the whole parse's. Streamed, text that may still become a
// call marker, and content's trailing whitespace, are held back until they cannot; a call is
// announced (index, id, name) once its name and the start of its arguments are in, then its
// arguments follow in pieces. For well-formed output the stream's content and calls equal the
// whole parse's, however the text is split; a call that breaks after it was announced stays
// a call in the stream (it cannot be taken back) where the whole parse makes it content.
#ifndef PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_PARSER_H_
#define PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_PARSER_H_

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "router/api/openai/tools/tool_call_format.h"

namespace pagoda {

// Calls per output at most when the client allows parallel calls.
inline constexpr int kUnlimitedToolCalls = std::numeric_limits<int>::max();

struct ToolCall {
  std::string id;         // NewToolCallId
  std::string name;       // function.name
  std::string arguments;  // function.arguments: JSON text of an object
};

struct ParsedToolCalls {
  // The text that is not a call; nullopt (OpenAI's null) when there are calls and nothing
  // else but whitespace.
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

// `text`: a whole output. Calls past `max_calls` are dropped (parallel_tool_calls: false keeps
// the first, as vLLM does). kNone: all of it is content.
ParsedToolCalls ParseToolCalls(ToolCallFormat format, std::string_view text,
                               int max_calls = kUnlimitedToolCalls);

// One piece of a streamed call: the first of each call carries id and name, the others
// arguments text only.
struct ToolCallDelta {
  int index = 0;
  std::string id;    // "" after the first
  std::string name;  // "" after the first
  std::string arguments;
};

struct ToolCallStreamDelta {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

// Not thread-safe: one per streamed output.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format, int max_calls = kUnlimitedToolCalls);
  ~ToolCallStream();

  // The output's next text; returns what may be sent now.
  ToolCallStreamDelta Add(std::string_view text);
  // The output ended: the rest.
  ToolCallStreamDelta Finish();
  // Calls announced so far.
  int num_calls() const { return static_cast<int>(calls_.size()); }

  struct ScanMemo;  // tool_call_parser.cc

 private:
  struct Sent {
    std::string id;
    bool announced = false;
    size_t arguments = 0;  // bytes sent
  };
  ToolCallStreamDelta Emit(bool final);

  const ToolCallFormat format_;
  const int max_calls_;
  std::string text_;          // the output so far
  size_t content_sent_ = 0;   // bytes of the content sent
  size_t content_seen_ = 0;   // bytes of the content read
  size_t content_solid_ = 0;  // the content's length without its trailing whitespace
  std::vector<Sent> calls_;
  std::unique_ptr<ScanMemo> memo_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_TOOLS_TOOL_CALL_PARSER_H_
