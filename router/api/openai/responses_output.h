// OpenAI's Responses API answer for one call: the `response` object (status, output items,
// usage), or its stream of named server-sent events (`event: TYPE` + `data: {...}`, each with
// a `sequence_number`). The output text becomes items as the chat path parses it
// (openai_chat_output.h): a `reasoning` item for the model's reasoning block, a `message`
// item with one `output_text` part for the content, a `function_call` item per tool call.
// Streamed, each item is opened (response.output_item.added, and for a message
// response.content_part.added), grows (response.reasoning_text.delta,
// response.output_text.delta, response.function_call_arguments.delta) and is closed (the
// matching .done events, then response.output_item.done) before the next one opens; the
// stream starts with response.created and response.in_progress and ends with
// response.completed, or response.incomplete when max_output_tokens cut the output.
// Not thread-safe: one per call, used by the thread that writes its response.
#ifndef PAGODA_ROUTER_API_OPENAI_RESPONSES_OUTPUT_H_
#define PAGODA_ROUTER_API_OPENAI_RESPONSES_OUTPUT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "router/api/openai/call_writer.h"
#include "router/api/openai/openai_chat_output.h"
#include "router/api/openai/openai_responses.h"
#include "router/core/sequence.h"

namespace pagoda {

class ResponsesOutput final : public CallWriter {
 public:
  // `model`: the served name.
  ResponsesOutput(ResponsesCall call, std::string model);

  const OpenAiCall& call() const override { return call_.chat; }
  void Add(const std::vector<OutputChunk>& chunks) override;
  std::string Body() override;
  std::string Opening() override;
  std::string Events(const std::vector<OutputChunk>& chunks) override;
  std::string Closing() override;
  std::string Failed(const absl::Status& error) override;

 private:
  struct Item {
    enum class Kind { kReasoning, kMessage, kFunctionCall };
    Kind kind = Kind::kMessage;
    std::string id;             // "rs_...", "msg_...", "fc_..."
    std::string text;           // the reasoning, the message's text, or the call's arguments
    std::string call_id, name;  // function calls
    bool closed = false;
  };

  // "completed", or "incomplete" when the output was cut by its length.
  const char* Status() const;
  // The response object with the items so far; `status` overrides Status() (in_progress).
  OrderedJson ResponseObject(const char* status) const;
  // An item as OpenAI writes it; an open one is in_progress, the last one takes Status().
  OrderedJson ItemJson(const Item& item) const;
  // One named event: `fields` with its type and sequence number.
  std::string Event(const char* type, OrderedJson fields);
  // The place of item `index` in the stream, on every event about it.
  OrderedJson At(size_t index) const;
  void Gather(const OutputChunk& c);
  // A new item of `kind` (closing the open one); its opening events.
  std::string Open(Item::Kind kind, std::string call_id = "", std::string name = "");
  // The open item's closing events, if one is open.
  std::string CloseOpen();
  // The events for one delta of the chat output ({"reasoning_content", "content",
  // "tool_calls"}).
  std::string Stream(const OrderedJson& delta);

  const ResponsesCall call_;
  const std::string model_;
  const std::string id_;  // "resp_..."
  const int64_t created_at_;
  std::unique_ptr<ChatOutput> parser_;  // streaming, when the text is parsed
  std::string text_;                    // the output text so far
  std::vector<Item> items_;
  int open_ = -1;                     // the item being streamed, or -1
  std::map<int, size_t> call_items_;  // a streamed tool call's index -> its item
  FinishReason finish_reason_ = FinishReason::kNone;
  int64_t input_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;
  int sequence_number_ = 0;  // of the next event
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_RESPONSES_OUTPUT_H_
