// `pagoda render-template`: render a chat template with one context, as
// transformers.apply_chat_template would (for checking templates against Python).
#ifndef PAGODA_CLI_RENDER_TEMPLATE_COMMAND_H_
#define PAGODA_CLI_RENDER_TEMPLATE_COMMAND_H_

#include <ostream>
#include <string>

namespace pagoda {

struct RenderTemplateOptions {
  std::string template_file;  // a Jinja file, or
  std::string model;          // a model directory (chat_template.jinja / tokenizer_config.json)
  std::string context_file;   // a JSON object: messages, add_generation_prompt, bos_token, ...
  // What strftime_now() formats, e.g. 2026-11-22T00:00:00; "": $PAGODA_TEMPLATE_NOW, else
  // the clock.
  std::string now;
};

// Prints exactly the rendered text and returns 0, or prints "error: MESSAGE" to `err` and
// returns 1 (2 for bad usage).
int RenderTemplateCommand(const RenderTemplateOptions& options, std::ostream& out,
                          std::ostream& err);

}  // namespace pagoda

#endif  // PAGODA_CLI_RENDER_TEMPLATE_COMMAND_H_
