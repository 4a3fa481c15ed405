#include "router/api/openai/responses_output.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/json.h"
#include "common/sampling_params.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_response.h"

namespace pagoda {
namespace {

std::string NewId(const char* prefix) {
  return absl::StrFormat("%s_%016x%016x", prefix, RandomSeed(), RandomSeed());
}

}  // namespace

ResponsesOutput::ResponsesOutput(ResponsesCall call, std::string model)
    : call_(std::move(call)),
      model_(std::move(model)),
      id_(NewId("resp")),
      created_at_(absl::ToUnixSeconds(absl::Now())) {
  if (call_.chat.output.active()) parser_ = std::make_unique<ChatOutput>(call_.chat.output);
}

const char* ResponsesOutput::Status() const {
  return finish_reason_ == FinishReason::kLength ? "incomplete" : "completed";
}

OrderedJson ResponsesOutput::ItemJson(const Item& item) const {
  const bool last = !items_.empty() && &item == &items_.back();
  const char* status = !item.closed ? "in_progress" : last ? Status() : "completed";
  switch (item.kind) {
    case Item::Kind::kReasoning:
      return {{"id", item.id},
              {"type", "reasoning"},
              {"summary", OrderedJson::array()},
              {"content",
               item.closed ? OrderedJson::array({{{"type", "reasoning_text"}, {"text", item.text}}})
                           : OrderedJson::array()},
              {"status", status}};
    case Item::Kind::kFunctionCall:
      return {{"id", item.id},           {"type", "function_call"}, {"status", status},
              {"call_id", item.call_id}, {"name", item.name},       {"arguments", item.text}};
    case Item::Kind::kMessage:
      break;
  }
  OrderedJson content = OrderedJson::array();
  if (item.closed) {
    content.push_back({{"type", "output_text"},
                       {"text", item.text},
                       {"annotations", OrderedJson::array()},
                       {"logprobs", OrderedJson::array()}});
  }
  return {{"id", item.id},
          {"type", "message"},
          {"status", status},
          {"role", "assistant"},
          {"content", std::move(content)}};
}

OrderedJson ResponsesOutput::ResponseObject(const char* status) const {
  const bool done = status == nullptr;
  if (done) status = Status();
  const SamplingParams& sampling = call_.chat.requests.front().sampling;
  OrderedJson output = OrderedJson::array();
  if (done) {
    for (const Item& item : items_) output.push_back(ItemJson(item));
  }
  OrderedJson j;
  j["id"] = id_;
  j["object"] = "response";
  j["created_at"] = created_at_;
  j["status"] = status;
  j["background"] = false;
  j["error"] = nullptr;
  j["incomplete_details"] = std::string_view(status) == "incomplete"
                                ? OrderedJson{{"reason", "max_output_tokens"}}
                                : OrderedJson(nullptr);
  j["instructions"] = call_.instructions;
  j["max_output_tokens"] = call_.max_output_tokens;
  j["model"] = model_;
  j["output"] = std::move(output);
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
  j["usage"] = done ? OrderedJson{{"input_tokens", input_tokens_},
                                  {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
                                  {"output_tokens", output_tokens_},
                                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                                  {"total_tokens", input_tokens_ + output_tokens_}}
                    : OrderedJson(nullptr);
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

std::string ResponsesOutput::Body() {
  // The whole text parsed at once: reasoning, then the content, then the calls.
  OrderedJson message = {{"content", text_}};
  if (parser_ != nullptr) {
    bool has_tool_calls = false;
    message = ChatOutput::Message(call_.chat.output, text_, &has_tool_calls);
  }
  auto add = [this](Item::Kind kind, std::string text, const char* prefix) -> Item& {
    Item& item = items_.emplace_back();
    item.kind = kind;
    item.id = NewId(prefix);
    item.text = std::move(text);
    item.closed = true;
    return item;
  };
  if (const auto r = message.find("reasoning_content"); r != message.end() && r->is_string()) {
    if (!r->get_ref<const std::string&>().empty()) add(Item::Kind::kReasoning, *r, "rs");
  }
  if (message["content"].is_string()) add(Item::Kind::kMessage, message["content"], "msg");
  for (const OrderedJson& call : message.value("tool_calls", OrderedJson::array())) {
    Item& item = add(Item::Kind::kFunctionCall, call["function"]["arguments"], "fc");
    item.call_id = call["id"];
    item.name = call["function"]["name"];
  }
  return DumpJson(ResponseObject(nullptr));
}

std::string ResponsesOutput::Event(const char* type, OrderedJson fields) {
  OrderedJson j = {{"type", type}, {"sequence_number", sequence_number_++}};
  for (auto& [key, value] : fields.items()) j[key] = std::move(value);
  return absl::StrCat("event: ", type, "\n", SseEvent(DumpJson(j)));
}

OrderedJson ResponsesOutput::At(size_t index) const {
  OrderedJson at = {{"item_id", items_[index].id}, {"output_index", index}};
  if (items_[index].kind != Item::Kind::kFunctionCall) at["content_index"] = 0;
  return at;
}

std::string ResponsesOutput::Open(Item::Kind kind, std::string call_id, std::string name) {
  std::string out = CloseOpen();
  const char* prefix = kind == Item::Kind::kReasoning ? "rs"
                       : kind == Item::Kind::kMessage ? "msg"
                                                      : "fc";
  Item& item = items_.emplace_back();
  item.kind = kind;
  item.id = NewId(prefix);
  item.call_id = std::move(call_id);
  item.name = std::move(name);
  open_ = static_cast<int>(items_.size()) - 1;
  out += Event("response.output_item.added",
               {{"output_index", open_}, {"item", ItemJson(items_.back())}});
  if (kind == Item::Kind::kMessage) {
    OrderedJson part = At(open_);
    part["part"] = {{"type", "output_text"},
                    {"text", ""},
                    {"annotations", OrderedJson::array()},
                    {"logprobs", OrderedJson::array()}};
    out += Event("response.content_part.added", std::move(part));
  }
  return out;
}

std::string ResponsesOutput::CloseOpen() {
  if (open_ < 0) return "";
  const size_t index = static_cast<size_t>(open_);
  Item& item = items_[index];
  item.closed = true;
  open_ = -1;
  std::string out;
  OrderedJson done = At(index);
  switch (item.kind) {
    case Item::Kind::kReasoning:
      done["text"] = item.text;
      out += Event("response.reasoning_text.done", std::move(done));
      break;
    case Item::Kind::kFunctionCall:
      done["arguments"] = item.text;
      out += Event("response.function_call_arguments.done", std::move(done));
      break;
    case Item::Kind::kMessage: {
      OrderedJson part = done;
      done["text"] = item.text;
      done["logprobs"] = OrderedJson::array();
      out += Event("response.output_text.done", std::move(done));
      part["part"] = ItemJson(item)["content"][0];
      out += Event("response.content_part.done", std::move(part));
      break;
    }
  }
  return out +
         Event("response.output_item.done", {{"output_index", index}, {"item", ItemJson(item)}});
}

std::string ResponsesOutput::Stream(const OrderedJson& delta) {
  std::string out;
  auto grow = [&](Item::Kind kind, const std::string& text, const char* event) {
    if (text.empty()) return;
    if (open_ < 0 || items_[open_].kind != kind) out += Open(kind);
    items_[open_].text += text;
    OrderedJson e = At(open_);
    e["delta"] = text;
    if (kind == Item::Kind::kMessage) e["logprobs"] = OrderedJson::array();
    out += Event(event, std::move(e));
  };
  grow(Item::Kind::kReasoning, delta.value("reasoning_content", ""),
       "response.reasoning_text.delta");
  grow(Item::Kind::kMessage, delta.value("content", ""), "response.output_text.delta");
  for (const OrderedJson& call : delta.value("tool_calls", OrderedJson::array())) {
    const int index = call["index"];
    if (call.contains("id")) {
      out += Open(Item::Kind::kFunctionCall, call["id"], call["function"]["name"]);
      call_items_[index] = static_cast<size_t>(open_);
    }
    const auto item = call_items_.find(index);
    const std::string& arguments = call["function"]["arguments"].get_ref<const std::string&>();
    if (item == call_items_.end() || arguments.empty()) continue;
    items_[item->second].text += arguments;
    OrderedJson e = At(item->second);
    e["delta"] = arguments;
    out += Event("response.function_call_arguments.delta", std::move(e));
  }
  return out;
}

std::string ResponsesOutput::Opening() {
  const OrderedJson opened = ResponseObject("in_progress");
  // Two statements: the operands of + are evaluated in no set order, and each takes the next
  // sequence number.
  std::string out = Event("response.created", {{"response", opened}});
  return out + Event("response.in_progress", {{"response", opened}});
}

std::string ResponsesOutput::Events(const std::vector<OutputChunk>& chunks) {
  std::string out;
  for (const OutputChunk& c : chunks) {
    Gather(c);
    if (c.text.empty()) continue;
    out += Stream(parser_ != nullptr ? parser_->Delta(c.text) : OrderedJson{{"content", c.text}});
  }
  return out;
}

std::string ResponsesOutput::Closing() {
  std::string out;
  if (parser_ != nullptr) out += Stream(parser_->Finish());
  // An output with no text at all is still one (empty) message.
  if (items_.empty()) out += Open(Item::Kind::kMessage);
  out += CloseOpen();
  const bool incomplete = finish_reason_ == FinishReason::kLength;
  return out + Event(incomplete ? "response.incomplete" : "response.completed",
                     {{"response", ResponseObject(nullptr)}});
}

std::string ResponsesOutput::Failed(const absl::Status& error) {
  const OpenAiError e = ErrorOf(error);
  return Event("error", {{"code", e.code.empty() ? OrderedJson(nullptr) : OrderedJson(e.code)},
                         {"message", e.message},
                         {"param", e.param.empty() ? OrderedJson(nullptr) : OrderedJson(e.param)}});
}

}  // namespace pagoda
