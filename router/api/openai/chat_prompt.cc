#include "router/api/openai/chat_prompt.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_fields.h"
#include "router/api/openai/openai_tools.h"

namespace pagoda {
namespace {

// A message's content as one string: a list of text parts joined by newlines.
std::string ContentText(const OrderedJson& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  for (const OrderedJson& part : content) {
    if (!text.empty()) text += "\n";
    text += part.find("text")->get_ref<const std::string&>();
  }
  return text;
}

}  // namespace

absl::StatusOr<OrderedJson> ReadChatMessages(const OrderedJson& body) {
  const OrderedJson* messages = JsonMember(body, "messages");
  if (messages == nullptr) return BadField("messages", "is required", kMissingRequired);
  if (!messages->is_array() || messages->empty() || messages->size() > kMaxMessages) {
    return BadField("messages", absl::StrCat("must be a list of 1 to ", kMaxMessages, " messages"));
  }
  OrderedJson out = OrderedJson::array();
  for (const OrderedJson& m : *messages) {
    if (!m.is_object()) return BadField("messages", "each message must be an object");
    const OrderedJson* role = JsonMember(m, "role");
    if (role == nullptr || !role->is_string())
      return BadField("messages", "each needs a role string");
    OrderedJson message = m;
    if (const OrderedJson* content = JsonMember(m, "content")) {
      bool ok = content->is_string() || content->is_array();
      if (content->is_array()) {
        for (const OrderedJson& part : *content) {
          const OrderedJson* type = part.is_object() ? JsonMember(part, "type") : nullptr;
          const OrderedJson* text = part.is_object() ? JsonMember(part, "text") : nullptr;
          ok = ok && type != nullptr && type->is_string() && *type == "text" && text != nullptr &&
               text->is_string();
        }
      }
      if (!ok) {
        return BadField("messages",
                        "content must be a string or a list of {\"type\": \"text\"} parts");
      }
      message["content"] = ContentText(*content);
    }
    RETURN_IF_ERROR(PrepareToolTurn(&message));
    out.push_back(std::move(message));
  }
  return out;
}

absl::StatusOr<std::string> RenderChat(const OrderedJson& body, const OpenAiContext& context) {
  if (context.chat_template == nullptr) {
    return absl::FailedPreconditionError(
        "messages: this model has no chat template; start the router with --chat-template=FILE");
  }
  jinja::ChatTemplateInputs inputs;
  ASSIGN_OR_RETURN(inputs.messages, ReadChatMessages(body));
  RETURN_IF_ERROR(ReadBoolField(body, "add_generation_prompt", &inputs.add_generation_prompt));
  bool continue_final = false;
  RETURN_IF_ERROR(ReadBoolField(body, "continue_final_message", &continue_final));
  if (continue_final) {
    if (JsonMember(body, "add_generation_prompt") != nullptr && inputs.add_generation_prompt) {
      return BadField("continue_final_message", "cannot be used with add_generation_prompt: true");
    }
    inputs.add_generation_prompt = false;
  }
  ASSIGN_OR_RETURN(ToolRequest tools,
                   ReadToolRequest(body, context.tool_format, /*build_grammar=*/false));
  inputs.tools = std::move(tools.tools);
  if (const OrderedJson* documents = JsonMember(body, "documents")) {
    if (!documents->is_array()) return BadField("documents", "must be a list", kInvalidType);
    inputs.documents = *documents;
  }
  if (const OrderedJson* kwargs = JsonMember(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      return BadField("chat_template_kwargs", "must be an object", kInvalidType);
    inputs.extra_context = *kwargs;
  }
  inputs.bos_token = context.bos_token;
  inputs.eos_token = context.eos_token;
  absl::StatusOr<std::string> text = context.chat_template->Apply(inputs);
  if (!text.ok())
    return BadField("messages",
                    absl::StrCat("the chat template failed: ", text.status().message()));
  if (continue_final) {
    // As transformers does: the text ends where the final message's content ends.
    const OrderedJson& last = inputs.messages.back();
    const std::string content(absl::StripAsciiWhitespace(last.value("content", std::string())));
    const size_t at = content.empty() ? std::string::npos : text->rfind(content);
    if (at == std::string::npos) {
      return BadField("continue_final_message", "the final message's content is not in the prompt");
    }
    text->resize(at + content.size());
  }
  return text;
}

}  // namespace pagoda
