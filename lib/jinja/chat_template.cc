#include "lib/jinja/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {
namespace {

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<std::string> LoadChatTemplate(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  std::error_code ec;
  if (std::filesystem::exists(dir / "chat_template.jinja", ec)) {
    return ReadFile(dir / "chat_template.jinja");
  }
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  ASSIGN_OR_RETURN(const std::string text, ReadFile(config_path));
  const nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path.string(), ": not a JSON object"));
  }
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return absl::NotFoundError(absl::StrCat(config_path.string(), " has no chat_template"));
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    return absl::NotFoundError(
        absl::StrCat(config_path.string(), ": chat_template lists no \"default\" template"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(config_path.string(), ": chat_template is neither a string nor a list"));
}

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view source) {
  ASSIGN_OR_RETURN(Template t, Template::Parse(source));
  return ChatTemplate(std::move(t));
}

absl::StatusOr<std::string> ChatTemplate::Apply(const ChatTemplateInputs& inputs,
                                                const RenderOptions& options) const {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = inputs.messages;
  context["tools"] = inputs.tools;
  context["documents"] = inputs.documents;
  context["add_generation_prompt"] = inputs.add_generation_prompt;
  if (inputs.bos_token) context["bos_token"] = *inputs.bos_token;
  if (inputs.eos_token) context["eos_token"] = *inputs.eos_token;
  if (inputs.extra_context.is_object()) {
    // Extra variables never replace the checked ones (messages, tools, bos_token, ...).
    for (const auto& [key, value] : inputs.extra_context.items()) {
      if (!context.contains(key)) context[key] = value;
    }
  } else if (!inputs.extra_context.is_null()) {
    return absl::InvalidArgumentError("extra template variables must be a JSON object");
  }
  return RenderContext(context, options);
}

absl::StatusOr<std::string> ChatTemplate::RenderContext(const nlohmann::ordered_json& context,
                                                        const RenderOptions& options) const {
  if (!context.is_object()) return absl::InvalidArgumentError("the context must be a JSON object");
  ValueDict variables;
  for (const auto& [key, value] : context.items()) {
    ASSIGN_OR_RETURN(Value v, FromJson(value));
    variables.Set(key, std::move(v));
  }
  return template_.Render(variables, options);
}

}  // namespace pagoda::jinja
