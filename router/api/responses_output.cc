#include "router/api/responses_output.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/sampling_params.h"
#include "router/api/openai_error.h"
#include "router/api/openai_response.h"

namespace pagoda {

using Json = nlohmann::ordered_json;

ResponsesOutput::ResponsesOutput(ResponsesCall call, std::string model)
    : call_(std::move(call)),
      model_(std::move(model)),
      id_(absl::StrFormat("resp_%016x%016x", RandomSeed(), RandomSeed())),
      message_id_(absl::StrFormat("msg_%016x%016x", RandomSeed(), RandomSeed())),
      created_at_(absl::ToUnixSeconds(absl::Now())) {}

const char* ResponsesOutput::Status() const {
  return finish_reason_ == FinishReason::kLength ? "incomplete" : "completed";
}

Json ResponsesOutput::TextPart() const {
  return {{"type", "output_text"},
          {"text", text_},
          {"annotations", Json::array()},
          {"logprobs", Json::array()}};
}

Json ResponsesOutput::MessageItem(const char* status) const {
  Json content = Json::array();
  if (absl::string_view(status) != "in_progress") content.push_back(TextPart());
  return {{"id", message_id_},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

Json ResponsesOutput::ResponseObject(const char* status) const {
  const bool done = status == nullptr;
  if (done) status = Status();
  const SamplingParams& sampling = call_.chat.requests.front().sampling;
  Json j;
  j["id"] = id_;
  j["object"] = "response";
  j["created_at"] = created_at_;
  j["status"] = status;
  j["background"] = false;
  j["error"] = nullptr;
  j["incomplete_details"] = absl::string_view(status) == "incomplete"
                                ? Json{{"reason", "max_output_tokens"}}
                                : Json(nullptr);
  j["instructions"] = call_.instructions;
  j["max_output_tokens"] = call_.max_output_tokens;
  j["model"] = model_;
  j["output"] = done ? Json::array({MessageItem(status)}) : Json::array();
  j["parallel_tool_calls"] = call_.parallel_tool_calls;
  j["previous_response_id"] = nullptr;
  j["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  j["service_tier"] = "default";
  j["store"] = false;
  j["temperature"] = sampling.temperature;
  j["text"] = {{"format", call_.text_format}};
  j["tool_choice"] = call_.tool_choice;
  j["tools"] = call_.tools;
  j["top_p"] = sampling.top_p;
  j["truncation"] = "disabled";
  j["usage"] = done ? Json{{"input_tokens", input_tokens_},
                           {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
                           {"output_tokens", output_tokens_},
                           {"output_tokens_details", {{"reasoning_tokens", 0}}},
                           {"total_tokens", input_tokens_ + output_tokens_}}
                    : Json(nullptr);
  j["user"] = call_.user;
  j["metadata"] = call_.metadata;
  // As every Pagoda answer: the seed this call sampled with, so it can be replayed.
  j["seed"] = call_.chat.seed;
  return j;
}

void ResponsesOutput::Gather(const OutputChunk& c) {
  text_ += c.text;
  if (!c.finished) return;
  finish_reason_ = c.finish_reason;
  input_tokens_ += c.prompt_tokens;
  output_tokens_ += c.completion_tokens;
  cached_tokens_ += c.cached_tokens;
}

void ResponsesOutput::Add(const std::vector<OutputChunk>& chunks) {
  for (const OutputChunk& c : chunks) Gather(c);
}

std::string ResponsesOutput::Body() { return DumpJson(ResponseObject(nullptr)); }

std::string ResponsesOutput::Event(const char* type, Json fields) {
  Json j = {{"type", type}, {"sequence_number", sequence_number_++}};
  for (auto& [key, value] : fields.items()) j[key] = std::move(value);
  return absl::StrCat("event: ", type, "\n", SseEvent(DumpJson(j)));
}

Json ResponsesOutput::At() const {
  return {{"item_id", message_id_}, {"output_index", 0}, {"content_index", 0}};
}

std::string ResponsesOutput::Opening() {
  const Json opened = ResponseObject("in_progress");
  std::string out = Event("response.created", {{"response", opened}});
  out += Event("response.in_progress", {{"response", opened}});
  out += Event("response.output_item.added",
               {{"output_index", 0}, {"item", MessageItem("in_progress")}});
  Json part = At();
  part["part"] = {{"type", "output_text"},
                  {"text", ""},
                  {"annotations", Json::array()},
                  {"logprobs", Json::array()}};
  return out + Event("response.content_part.added", std::move(part));
}

std::string ResponsesOutput::Events(const std::vector<OutputChunk>& chunks) {
  std::string out;
  for (const OutputChunk& c : chunks) {
    Gather(c);
    if (c.text.empty()) continue;
    Json delta = At();
    delta["delta"] = c.text;
    delta["logprobs"] = Json::array();
    out += Event("response.output_text.delta", std::move(delta));
  }
  return out;
}

std::string ResponsesOutput::Closing() {
  Json text_done = At();
  text_done["text"] = text_;
  text_done["logprobs"] = Json::array();
  std::string out = Event("response.output_text.done", std::move(text_done));
  Json part_done = At();
  part_done["part"] = TextPart();
  out += Event("response.content_part.done", std::move(part_done));
  out += Event("response.output_item.done", {{"output_index", 0}, {"item", MessageItem(Status())}});
  const bool incomplete = finish_reason_ == FinishReason::kLength;
  return out + Event(incomplete ? "response.incomplete" : "response.completed",
                     {{"response", ResponseObject(nullptr)}});
}

std::string ResponsesOutput::Failed(const absl::Status& error) {
  const OpenAiError e = ErrorOf(error);
  return Event("error", {{"code", e.code.empty() ? Json(nullptr) : Json(e.code)},
                         {"message", e.message},
                         {"param", e.param.empty() ? Json(nullptr) : Json(e.param)}});
}

}  // namespace pagoda
