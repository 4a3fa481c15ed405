#include "cli/render_template_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lib/jinja/chat_template.h"

namespace pagoda {
namespace {

bool ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

}  // namespace

int RenderTemplateCommand(const RenderTemplateOptions& options, std::ostream& out,
                          std::ostream& err) {
  if (options.template_file.empty() == options.model.empty()) {
    err << "error: give exactly one of --template-file and --model\n";
    return 2;
  }
  if (options.context_file.empty()) {
    err << "error: --context-file is required\n";
    return 2;
  }
  std::string source;
  if (!options.template_file.empty()) {
    if (!ReadFile(options.template_file, &source)) {
      err << "error: cannot open --template-file " << options.template_file << "\n";
      return 1;
    }
  } else {
    absl::StatusOr<std::string> loaded = jinja::LoadChatTemplate(options.model);
    if (!loaded.ok()) {
      err << "error: " << loaded.status().message() << "\n";
      return 1;
    }
    source = *std::move(loaded);
  }
  std::string context_text;
  if (!ReadFile(options.context_file, &context_text)) {
    err << "error: cannot open --context-file " << options.context_file << "\n";
    return 1;
  }
  const nlohmann::ordered_json context =
      nlohmann::ordered_json::parse(context_text, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded() || !context.is_object()) {
    err << "error: " << options.context_file << ": not a JSON object\n";
    return 1;
  }
  jinja::RenderOptions render_options;
  std::string now_text = options.now;
  if (now_text.empty() && std::getenv("PAGODA_TEMPLATE_NOW") != nullptr) {
    now_text = std::getenv("PAGODA_TEMPLATE_NOW");
  }
  if (!now_text.empty()) {
    absl::StatusOr<std::tm> now = jinja::ParseDateTime(now_text);
    if (!now.ok()) {
      err << "error: --now: " << now.status().message() << "\n";
      return 2;
    }
    render_options.now = *now;
  }
  absl::StatusOr<jinja::ChatTemplate> chat_template = jinja::ChatTemplate::Create(source);
  if (!chat_template.ok()) {
    err << "error: " << chat_template.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> text = chat_template->RenderContext(context, render_options);
  if (!text.ok()) {
    err << "error: " << text.status().message() << "\n";
    return 1;
  }
  out << *text;
  out.flush();
  return 0;
}

}  // namespace pagoda
