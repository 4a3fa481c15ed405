#include "router/api/openai/tools/tool_call_format.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::StatusOr<ToolCallFormat> ToolCallFormatFromName(std::string_view name) {
  for (ToolCallFormat f : {ToolCallFormat::kNone, ToolCallFormat::kHermes,
                           ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
    if (name == ToolCallFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown tool-call parser \"",
                                                 std::string(name.substr(0, 64)),
                                                 "\": none, hermes, llama3_json or mistral"));
}

std::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "none";
}

absl::StatusOr<ReasoningFormat> ReasoningFormatFromName(std::string_view name) {
  for (ReasoningFormat f :
       {ReasoningFormat::kNone, ReasoningFormat::kQwen3, ReasoningFormat::kDeepSeekR1}) {
    if (name == ReasoningFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reasoning parser \"",
                                                 std::string(name.substr(0, 64)),
                                                 "\": none, qwen3 or deepseek_r1"));
}

std::string_view ReasoningFormatName(ReasoningFormat format) {
  switch (format) {
    case ReasoningFormat::kNone:
      return "none";
    case ReasoningFormat::kQwen3:
      return "qwen3";
    case ReasoningFormat::kDeepSeekR1:
      return "deepseek_r1";
  }
  return "none";
}

ToolCallFormat DetectToolCallFormat(std::string_view chat_template) {
  // Mistral's first: its templates may mention other formats in examples, not the reverse.
  if ((chat_template.find("[TOOL_CALLS]") != std::string_view::npos))
    return ToolCallFormat::kMistral;
  if ((chat_template.find("<tool_call>") != std::string_view::npos)) return ToolCallFormat::kHermes;
  if ((chat_template.find("<|python_tag|>") != std::string_view::npos) ||
      (chat_template.find("ipython") != std::string_view::npos)) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

ReasoningFormat DetectReasoningFormat(std::string_view chat_template) {
  if (!(chat_template.find("<think>") != std::string_view::npos)) return ReasoningFormat::kNone;
  // DeepSeek's fullwidth bars (R1 and its distills): the generation prompt opens the block.
  return (chat_template.find("<\xEF\xBD\x9C"
                             "Assistant\xEF\xBD\x9C>") != std::string_view::npos)
             ? ReasoningFormat::kDeepSeekR1
             : ReasoningFormat::kQwen3;
}

std::string NewToolCallId(ToolCallFormat format) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
  const bool mistral = format == ToolCallFormat::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace pagoda
