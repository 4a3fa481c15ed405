// The next turn of a tool conversation through real chat templates: messages as OpenAI clients
// send them (arguments as JSON text), prepared by the request layer, rendered by our jinja
// engine, must equal Python jinja2's renders (tool_turns.json, from make_tool_turns.py).
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "common/json.h"
#include "gtest/gtest.h"
#include "lib/jinja/chat_template.h"
#include "router/api/openai/openai_tools.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

OrderedJson ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return OrderedJson::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

TEST(ToolTurnTest, RealTemplatesRenderToolCallsAndResultsAsJinja2Does) {
  const OrderedJson turns =
      ReadJson(PAGODA_SOURCE_DIR "/tests/router/api/openai/tools/tool_turns.json");
  const OrderedJson golden = ReadJson(testing::SharedPath("golden/chat_templates.json"));
  ASSERT_TRUE(turns.is_object() && golden.is_object());
  jinja::RenderOptions options;
  options.now = std::tm{};
  options.now->tm_year = 2026 - 1900;  // the generator's fixed date, 2026-11-22
  options.now->tm_mon = 10;
  options.now->tm_mday = 22;
  options.now->tm_wday = 0;
  options.now->tm_yday = 325;
  int rendered = 0;
  for (const OrderedJson& c : turns["cases"]) {
    const std::string name = c["template"];
    const std::string conversation = c["conversation"];
    SCOPED_TRACE(name + " " + conversation);
    absl::StatusOr<jinja::ChatTemplate> tmpl =
        jinja::ChatTemplate::Create(golden["templates"][name].get<std::string>());
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    jinja::ChatTemplateInputs inputs;
    for (OrderedJson message : turns["conversations"][conversation]) {
      ASSERT_TRUE(PrepareToolTurn(&message).ok());
      inputs.messages.push_back(std::move(message));
    }
    inputs.tools = turns["tools"];
    if (c["bos_token"].is_string()) inputs.bos_token = c["bos_token"].get<std::string>();
    inputs.eos_token = c["eos_token"].get<std::string>();
    absl::StatusOr<std::string> text = tmpl->Apply(inputs, options);
    if (c.contains("error")) {
      EXPECT_FALSE(text.ok()) << "jinja2 refused: " << c["error"];
      continue;
    }
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, c["expected"].get<std::string>());
    ++rendered;
  }
  EXPECT_GE(rendered, 10);
}

TEST(ToolTurnTest, ToolCallsGetObjectArgumentsAndAStringContent) {
  OrderedJson message =
      OrderedJson::parse(R"({"role": "assistant", "tool_calls": [{"id": "c", "type":
      "function", "function": {"name": "f", "arguments": "{\"a\": [1]}"}}]})");
  ASSERT_TRUE(PrepareToolTurn(&message).ok());
  EXPECT_EQ(message["content"], "");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], OrderedJson::parse(R"({"a": [1]})"));
  for (
      const char* bad : {
          R"({"role": "assistant", "tool_calls": {}})",
          R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})",
          R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]})",
          R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]})",
          R"({"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]})",
          R"({"role": "tool", "tool_call_id": 7, "content": "x"})",
      }) {
    OrderedJson m = OrderedJson::parse(bad);
    const absl::Status s = PrepareToolTurn(&m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().substr(0, 10), "messages: ") << s;
  }
  // Arguments nested past the limit are refused before they are parsed.
  OrderedJson deep = message;
  deep["tool_calls"][0]["function"]["arguments"] =
      std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(PrepareToolTurn(&deep).ok());
}

TEST(ToolTurnTest, FormatsAreDetectedFromRealTemplates) {
  const OrderedJson golden = ReadJson(testing::SharedPath("golden/chat_templates.json"));
  ASSERT_TRUE(golden.is_object());
  struct Case {
    const char* name;
    ToolCallFormat tools;
    ReasoningFormat reasoning;
  };
  for (const Case& c : {
           Case{"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::kHermes, ReasoningFormat::kNone},
           Case{"Qwen-Qwen3-0.6B", ToolCallFormat::kHermes, ReasoningFormat::kQwen3},
           Case{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::kHermes,
                ReasoningFormat::kNone},
           Case{"Qwen3-Coder", ToolCallFormat::kHermes, ReasoningFormat::kNone},
           Case{"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::kLlama3Json,
                ReasoningFormat::kNone},
           Case{"meta-llama-Llama-3.2-3B-Instruct", ToolCallFormat::kLlama3Json,
                ReasoningFormat::kNone},
           Case{"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistral,
                ReasoningFormat::kNone},
           Case{"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::kMistral,
                ReasoningFormat::kNone},
           Case{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ToolCallFormat::kNone,
                ReasoningFormat::kDeepSeekR1},
           Case{"microsoft-Phi-3.5-mini-instruct", ToolCallFormat::kNone, ReasoningFormat::kNone},
       }) {
    const std::string source = golden["templates"][c.name].get<std::string>();
    EXPECT_EQ(DetectToolCallFormat(source), c.tools) << c.name;
    EXPECT_EQ(DetectReasoningFormat(source), c.reasoning) << c.name;
  }
}

}  // namespace
}  // namespace pagoda
