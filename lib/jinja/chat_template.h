// Chat templates of Hugging Face models: where a model directory keeps its template, and
// rendering a conversation through it as transformers' apply_chat_template does.
#ifndef PAGODA_LIB_JINJA_CHAT_TEMPLATE_H_
#define PAGODA_LIB_JINJA_CHAT_TEMPLATE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/jinja/template.h"
#include "nlohmann/json.hpp"

namespace pagoda::jinja {

// The chat template of a model directory: `chat_template.jinja` if present (the newer HF
// layout), else tokenizer_config.json's `chat_template` (a string, or a list of
// {name, template} from which "default" is taken). NOT_FOUND when there is none.
absl::StatusOr<std::string> LoadChatTemplate(const std::string& model_dir);

// One render's inputs, as an OpenAI chat request carries them.
struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null, or a list of tool schemas
  nlohmann::ordered_json documents;  // null, or a list of documents
  bool add_generation_prompt = true;
  std::optional<std::string> bos_token;  // absent: the variable is left undefined
  std::optional<std::string> eos_token;
  // More template variables (e.g. {"enable_thinking": false}); an object, or null. A key the
  // fields above set (messages, tools, ...) is ignored: they are checked, these are not.
  nlohmann::ordered_json extra_context;
};

class ChatTemplate {
 public:
  // INVALID_ARGUMENT naming the line when `source` does not parse.
  static absl::StatusOr<ChatTemplate> Create(std::string_view source);

  // The prompt text for `inputs` (tools and documents passed even when null, as
  // transformers does).
  absl::StatusOr<std::string> Apply(const ChatTemplateInputs& inputs,
                                    const RenderOptions& options = {}) const;
  // Renders with `context`, a JSON object whose members are the template's variables.
  absl::StatusOr<std::string> RenderContext(const nlohmann::ordered_json& context,
                                            const RenderOptions& options = {}) const;

 private:
  explicit ChatTemplate(Template t) : template_(std::move(t)) {}

  Template template_;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_CHAT_TEMPLATE_H_
