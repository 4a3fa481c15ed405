#include "router/api/openai/openai_responses.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "common/status_macros.h"
#include "router/api/openai/chat_prompt.h"
#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

// Fields the chat path reads as they are: Responses' own sampling fields and vLLM's extras,
// which vLLM's /v1/responses takes too.
constexpr absl::string_view kChatFields[] = {"model",
                                             "temperature",
                                             "top_p",
                                             "stream",
                                             "seed",
                                             "top_k",
                                             "min_p",
                                             "repetition_penalty",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "logit_bias",
                                             "min_tokens",
                                             "stop",
                                             "chat_template_kwargs",
                                             "parallel_tool_calls",
                                             "cache_salt"};

// Fields read below.
constexpr absl::string_view kOwnFields[] = {"input",
                                            "instructions",
                                            "max_output_tokens",
                                            "text",
                                            "tools",
                                            "tool_choice",
                                            "metadata",
                                            "user",
                                            "safety_identifier",
                                            "prompt_cache_key",
                                            "store",
                                            "background",
                                            "service_tier",
                                            "truncation",
                                            "include"};

// Known and not served: each needs state or a feature this server has not.
struct Refused {
  absl::string_view field;
  absl::string_view why;
};
constexpr Refused kRefusedFields[] = {
    {"previous_response_id",
     "is not supported: this server keeps no responses (send the "
     "conversation in `input`)"},
    {"conversation",
     "is not supported: this server keeps no conversations (send them in "
     "`input`)"},
    {"prompt", "is not supported: this server keeps no prompt templates"},
    {"reasoning", "is not supported"},
    {"max_tool_calls", "is not supported"},
    {"top_logprobs", "is not supported on /v1/responses (use /v1/chat/completions)"},
    {"stream_options", "is not supported on /v1/responses"},
};

bool IsOneOf(absl::string_view key, const auto& list) {
  for (absl::string_view k : list) {
    if (k == key) return true;
  }
  return false;
}

absl::Status CheckFieldsKnown(const OrderedJson& body) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    for (const Refused& r : kRefusedFields) {
      if (r.field == key) return BadField(key, r.why, kUnsupportedParameter);
    }
    if (!IsOneOf(key, kChatFields) && !IsOneOf(key, kOwnFields)) {
      return BadField(key.substr(0, 64), "is not a field of /v1/responses this server supports",
                      kUnsupportedParameter);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> StringOf(const OrderedJson& v, absl::string_view field) {
  if (!v.is_string()) return BadField(field, "must be a string", kInvalidType);
  return v.get<std::string>();
}

// Settings that would need state or other service, accepted only at their stateless values.
absl::Status CheckStateless(const OrderedJson& body) {
  if (const OrderedJson* store = JsonMember(body, "store")) {
    if (!store->is_boolean()) return BadField("store", "must be true or false", kInvalidType);
    if (store->get<bool>()) {
      return BadField("store",
                      "true is not supported: this server keeps no responses (send false or "
                      "leave it out)",
                      kUnsupportedParameter);
    }
  }
  if (const OrderedJson* background = JsonMember(body, "background")) {
    if (!background->is_boolean())
      return BadField("background", "must be true or false", kInvalidType);
    if (background->get<bool>()) {
      return BadField("background", "true is not supported: responses are answered in the call",
                      kUnsupportedParameter);
    }
  }
  if (const OrderedJson* tier = JsonMember(body, "service_tier")) {
    ASSIGN_OR_RETURN(std::string name, StringOf(*tier, "service_tier"));
    if (name != "auto" && name != "default") {
      return BadField("service_tier", "only \"auto\" and \"default\" are supported",
                      kUnsupportedParameter);
    }
  }
  if (const OrderedJson* truncation = JsonMember(body, "truncation")) {
    ASSIGN_OR_RETURN(std::string name, StringOf(*truncation, "truncation"));
    if (name != "disabled") {
      return BadField("truncation",
                      "only \"disabled\" is supported (a prompt longer than the model is refused)",
                      kUnsupportedParameter);
    }
  }
  if (const OrderedJson* include = JsonMember(body, "include")) {
    if (!include->is_array()) return BadField("include", "must be a list", kInvalidType);
    if (!include->empty()) {
      return BadField("include", "no additional output data is supported", kUnsupportedParameter);
    }
  }
  // Identifiers for the client's own bookkeeping; prefix caching needs no key here.
  for (const char* id : {"user", "safety_identifier", "prompt_cache_key"}) {
    if (const OrderedJson* v = JsonMember(body, id)) RETURN_IF_ERROR(StringOf(*v, id).status());
  }
  return absl::OkStatus();
}

absl::Status ReadMetadata(const OrderedJson& body, ResponsesCall* call) {
  const OrderedJson* metadata = JsonMember(body, "metadata");
  if (metadata == nullptr) return absl::OkStatus();
  if (!metadata->is_object() || metadata->size() > kMaxMetadataKeys) {
    return BadField("metadata", absl::StrCat("must be an object of at most ", kMaxMetadataKeys,
                                             " string values"));
  }
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > kMaxMetadataKeyBytes || !value.is_string() ||
        value.get_ref<const std::string&>().size() > kMaxMetadataValueBytes) {
      return BadField("metadata", absl::StrCat("keys must be at most ", kMaxMetadataKeyBytes,
                                               " bytes and values strings of at most ",
                                               kMaxMetadataValueBytes));
    }
  }
  call->metadata = *metadata;
  return absl::OkStatus();
}

// A message's content: a string, or a list of text parts joined (the chat path's form).
absl::StatusOr<OrderedJson> MessageContent(const OrderedJson& content) {
  if (content.is_string()) return content;
  if (!content.is_array())
    return BadField("input", "a message's content must be a string or a list");
  OrderedJson parts = OrderedJson::array();
  for (const OrderedJson& part : content) {
    const OrderedJson* type = part.is_object() ? JsonMember(part, "type") : nullptr;
    if (type == nullptr || !type->is_string()) {
      return BadField("input", "each content part needs a type");
    }
    const std::string& name = type->get_ref<const std::string&>();
    const char* text_key = name == "refusal" ? "refusal" : "text";
    if (name != "input_text" && name != "output_text" && name != "refusal") {
      return BadField(
          "input",
          absl::StrCat("content type \"", name.substr(0, 64), "\" is not supported (text only)"),
          kUnsupportedParameter);
    }
    const OrderedJson* text = JsonMember(part, text_key);
    if (text == nullptr || !text->is_string()) {
      return BadField("input", absl::StrCat("a ", name, " part needs its ", text_key, " string"));
    }
    parts.push_back({{"type", "text"}, {"text", *text}});
  }
  return parts;
}

absl::StatusOr<OrderedJson> Message(const OrderedJson& item) {
  for (const auto& [key, value] : item.items()) {
    if (key != "type" && key != "role" && key != "content" && key != "id" && key != "status") {
      return BadField("input",
                      absl::StrCat("a message has an unknown field \"", key.substr(0, 64), "\""),
                      kUnsupportedParameter);
    }
  }
  const OrderedJson* role = JsonMember(item, "role");
  if (role == nullptr || !role->is_string()) {
    return BadField("input", "each message needs a role string");
  }
  const std::string& name = role->get_ref<const std::string&>();
  if (name != "user" && name != "system" && name != "developer" && name != "assistant") {
    return BadField("input", absl::StrCat("role \"", name.substr(0, 64),
                                          "\" is not one of user, system, developer, assistant"));
  }
  const OrderedJson* content = JsonMember(item, "content");
  if (content == nullptr) return BadField("input", "each message needs its content");
  ASSIGN_OR_RETURN(OrderedJson text, MessageContent(*content));
  // Chat templates know system, not developer: the developer's are the system's instructions.
  return OrderedJson{{"role", name == "developer" ? "system" : name}, {"content", std::move(text)}};
}

absl::StatusOr<std::string> ItemString(const OrderedJson& item, const char* key,
                                       absl::string_view type) {
  const OrderedJson* v = JsonMember(item, key);
  if (v == nullptr || !v->is_string()) {
    return BadField("input", absl::StrCat("a ", type, " item needs its ", key, " string"));
  }
  return v->get<std::string>();
}

// The input as chat messages: function_call items become an assistant message's tool_calls
// (those in a row, one message), function_call_output items tool messages.
absl::StatusOr<OrderedJson> InputMessages(const OrderedJson& input) {
  OrderedJson messages = OrderedJson::array();
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return messages;
  }
  if (!input.is_array() || input.empty() || input.size() > kMaxMessages) {
    return BadField("input",
                    absl::StrCat("must be a string or a list of 1 to ", kMaxMessages, " items"));
  }
  OrderedJson call_names =
      OrderedJson::object();  // call_id -> function name, for the tool messages
  for (const OrderedJson& item : input) {
    if (!item.is_object()) return BadField("input", "each item must be an object");
    const OrderedJson* type = JsonMember(item, "type");
    if (type != nullptr && !type->is_string()) return BadField("input", "type must be a string");
    const std::string kind = type == nullptr ? "message" : type->get<std::string>();
    if (kind == "message") {
      ASSIGN_OR_RETURN(OrderedJson message, Message(item));
      messages.push_back(std::move(message));
    } else if (kind == "function_call") {
      ASSIGN_OR_RETURN(std::string call_id, ItemString(item, "call_id", kind));
      ASSIGN_OR_RETURN(std::string name, ItemString(item, "name", kind));
      ASSIGN_OR_RETURN(std::string arguments, ItemString(item, "arguments", kind));
      OrderedJson tool_call = {{"id", call_id},
                               {"type", "function"},
                               {"function", {{"name", name}, {"arguments", arguments}}}};
      call_names[call_id] = name;
      if (messages.empty() || !messages.back().contains("tool_calls")) {
        messages.push_back(
            {{"role", "assistant"}, {"content", ""}, {"tool_calls", OrderedJson::array()}});
      }
      messages.back()["tool_calls"].push_back(std::move(tool_call));
    } else if (kind == "function_call_output") {
      ASSIGN_OR_RETURN(std::string call_id, ItemString(item, "call_id", kind));
      const OrderedJson* output = JsonMember(item, "output");
      if (output == nullptr) return BadField("input", "a function_call_output item needs output");
      ASSIGN_OR_RETURN(OrderedJson content, MessageContent(*output));
      OrderedJson message = {
          {"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(content)}};
      if (auto name = call_names.find(call_id); name != call_names.end()) message["name"] = *name;
      messages.push_back(std::move(message));
    } else {
      return BadField("input",
                      absl::StrCat("item type \"", kind.substr(0, 64),
                                   "\" is not supported (message, function_call, "
                                   "function_call_output)"),
                      kUnsupportedParameter);
    }
  }
  return messages;
}

// text.format as chat's response_format.
absl::Status ReadTextFormat(const OrderedJson& body, OrderedJson* chat, ResponsesCall* call) {
  const OrderedJson* text = JsonMember(body, "text");
  if (text == nullptr) return absl::OkStatus();
  if (!text->is_object()) return BadField("text", "must be an object", kInvalidType);
  for (const auto& [key, value] : text->items()) {
    if (key == "verbosity" && (value.is_null() || value == "medium")) continue;
    if (key != "format") {
      return BadField(absl::StrCat("text.", key.substr(0, 64)), "is not supported",
                      kUnsupportedParameter);
    }
  }
  const OrderedJson* format = JsonMember(*text, "format");
  if (format == nullptr) return absl::OkStatus();
  const OrderedJson* type = format->is_object() ? JsonMember(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return BadField("text.format", "needs a type: \"text\", \"json_object\" or \"json_schema\"");
  }
  call->text_format = *format;
  if (*type == "text" || *type == "json_object") {
    if (format->size() > 1) {
      return BadField("text.format",
                      absl::StrCat("type ", type->get<std::string>(), " takes no other field"));
    }
    (*chat)["response_format"] = {{"type", *type}};
    return absl::OkStatus();
  }
  if (*type != "json_schema") {
    return BadField("text.format", "type must be \"text\", \"json_object\" or \"json_schema\"");
  }
  OrderedJson spec = OrderedJson::object();
  for (const auto& [key, value] : format->items()) {
    if (key == "type") continue;
    if (key != "name" && key != "schema" && key != "strict" && key != "description") {
      return BadField("text.format", absl::StrCat("unknown field \"", key.substr(0, 64), "\""),
                      kUnsupportedParameter);
    }
    spec[key] = value;
  }
  if (!spec.contains("name")) return BadField("text.format", "json_schema needs a name");
  if (!spec.contains("schema")) return BadField("text.format", "json_schema needs a schema");
  (*chat)["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
  return absl::OkStatus();
}

// Function tools in the flat form ({"type": "function", "name", "parameters", ...}) as chat's
// nested one, which the chat path checks, renders and parses calls for; built-in tools are
// refused by name.
absl::Status ReadTools(const OrderedJson& body, OrderedJson* chat, ResponsesCall* call) {
  const OrderedJson* tools = JsonMember(body, "tools");
  if (tools != nullptr) {
    if (!tools->is_array()) return BadField("tools", "must be a list", kInvalidType);
    OrderedJson nested = OrderedJson::array();
    for (const OrderedJson& tool : *tools) {
      const OrderedJson* type = tool.is_object() ? JsonMember(tool, "type") : nullptr;
      if (type == nullptr || !type->is_string()) return BadField("tools", "each tool needs a type");
      if (*type != "function") {
        return BadField("tools",
                        absl::StrCat("built-in tool \"", type->get<std::string>().substr(0, 64),
                                     "\" is not supported (function tools only)"),
                        kUnsupportedParameter);
      }
      OrderedJson function = OrderedJson::object();
      for (const auto& [key, value] : tool.items()) {
        if (key == "type" || value.is_null()) continue;
        if (key != "name" && key != "description" && key != "parameters" && key != "strict") {
          return BadField(
              "tools",
              absl::StrCat("a function tool has an unknown field \"", key.substr(0, 64), "\""),
              kUnsupportedParameter);
        }
        function[key] = value;
      }
      nested.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    call->tools = *tools;
    if (!nested.empty()) (*chat)["tools"] = std::move(nested);
  }
  const OrderedJson* choice = JsonMember(body, "tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  call->tool_choice = *choice;
  // OpenAI's default, "auto", comes without tools too: then there is nothing to choose.
  const bool no_tools = !chat->contains("tools");
  if (no_tools && choice->is_string() && (*choice == "auto" || *choice == "none")) {
    return absl::OkStatus();
  }
  // Chat's named choice is {"type": "function", "function": {"name"}}.
  if (choice->is_object() && JsonMember(*choice, "type") != nullptr &&
      (*choice)["type"] == "function" && JsonMember(*choice, "name") != nullptr) {
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
  } else {
    (*chat)["tool_choice"] = *choice;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InResponsesFieldNames(const absl::Status& status) {
  const absl::Status in_chat_names = InOpenAiFieldNames(status);
  if (in_chat_names.code() != absl::StatusCode::kInvalidArgument &&
      in_chat_names.code() != absl::StatusCode::kFailedPrecondition) {
    return in_chat_names;
  }
  std::string message(in_chat_names.message());
  for (const auto& [chat, responses] :
       {std::pair<absl::string_view, absl::string_view>{"messages", "input"},
        {"prompt", "input"},
        {"response_format", "text.format"},
        {"max_completion_tokens", "max_output_tokens"},
        {"max_tokens", "max_output_tokens"}}) {
    // The whole name: "prompt: ..." or "prompt (...", not "prompt_logprobs".
    if (absl::StartsWith(message, chat) && message.size() > chat.size() &&
        (message[chat.size()] == ':' || message[chat.size()] == ' ')) {
      message = absl::StrCat(responses, message.substr(chat.size()));
      break;
    }
  }
  // The core's "prompt (N tokens) + max_tokens (M) exceeds ..." names the field in its text too.
  message = absl::StrReplaceAll(message, {{"+ max_tokens (", "+ max_output_tokens ("}});
  absl::Status renamed(in_chat_names.code(), message);
  in_chat_names.ForEachPayload([&renamed](absl::string_view url, const absl::Cord& payload) {
    renamed.SetPayload(url, payload);
  });
  return renamed;
}

absl::StatusOr<ResponsesCall> ParseResponsesRequest(const OrderedJson& body,
                                                    const OpenAiContext& context) {
  RETURN_IF_ERROR(CheckFieldsKnown(body));
  RETURN_IF_ERROR(CheckStateless(body));
  ResponsesCall call;
  RETURN_IF_ERROR(ReadMetadata(body, &call));
  OrderedJson chat = OrderedJson::object();
  for (absl::string_view key : kChatFields) {
    if (const OrderedJson* v = JsonMember(body, key)) chat[std::string(key)] = *v;
  }
  if (const OrderedJson* tokens = JsonMember(body, "max_output_tokens")) {
    call.max_output_tokens = *tokens;
    chat["max_completion_tokens"] = *tokens;
  }
  if (const OrderedJson* user = JsonMember(body, "user")) call.user = *user;
  if (const OrderedJson* parallel = JsonMember(body, "parallel_tool_calls");
      parallel && parallel->is_boolean()) {
    call.parallel_tool_calls = parallel->get<bool>();
  }
  RETURN_IF_ERROR(ReadTextFormat(body, &chat, &call));
  RETURN_IF_ERROR(ReadTools(body, &chat, &call));

  const OrderedJson* input = JsonMember(body, "input");
  if (input == nullptr) return BadField("input", "is required", kMissingRequired);
  ASSIGN_OR_RETURN(OrderedJson messages, InputMessages(*input));
  if (const OrderedJson* instructions = JsonMember(body, "instructions")) {
    ASSIGN_OR_RETURN(std::string text, StringOf(*instructions, "instructions"));
    call.instructions = *instructions;
    messages.insert(messages.begin(),
                    OrderedJson{{"role", "system"}, {"content", std::move(text)}});
  }
  chat["messages"] = std::move(messages);
  absl::StatusOr<OpenAiCall> parsed = ParseChatRequest(chat, context);
  if (!parsed.ok()) return InResponsesFieldNames(parsed.status());
  call.chat = *std::move(parsed);
  return call;
}

}  // namespace pagoda
