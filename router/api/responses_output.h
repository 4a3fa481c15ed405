// OpenAI's Responses API answer for one call: the `response` object (status, output items,
// usage), or its stream of named server-sent events (`event: TYPE` + `data: {...}`, each with
// a `sequence_number`): response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta per chunk, then
// response.output_text.done, response.content_part.done, response.output_item.done and
// response.completed (or response.incomplete when max_output_tokens cut the output).
// Not thread-safe: one per call, used by the thread that writes its response.
#ifndef PAGODA_ROUTER_API_RESPONSES_OUTPUT_H_
#define PAGODA_ROUTER_API_RESPONSES_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "router/api/call_writer.h"
#include "router/api/openai_responses.h"
#include "router/sequence.h"

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
  // "completed", or "incomplete" when the output was cut by its length.
  const char* Status() const;
  // The response object with the output so far; `status` overrides Status() (in_progress).
  nlohmann::ordered_json ResponseObject(const char* status) const;
  nlohmann::ordered_json MessageItem(const char* status) const;
  nlohmann::ordered_json TextPart() const;
  // One named event: `fields` with its type and sequence number.
  std::string Event(const char* type, nlohmann::ordered_json fields);
  // The item's place in the stream, on every event about the message.
  nlohmann::ordered_json At() const;
  void Gather(const OutputChunk& c);

  const ResponsesCall call_;
  const std::string model_;
  const std::string id_;          // "resp_..."
  const std::string message_id_;  // "msg_...": the one output message
  const int64_t created_at_;
  std::string text_;  // the output so far
  FinishReason finish_reason_ = FinishReason::kNone;
  int64_t input_tokens_ = 0, output_tokens_ = 0, cached_tokens_ = 0;
  int sequence_number_ = 0;  // of the next event
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_RESPONSES_OUTPUT_H_
