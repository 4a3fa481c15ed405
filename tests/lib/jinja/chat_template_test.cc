// Where model directories keep their chat template, and the API the router renders with.
#include "lib/jinja/chat_template.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

TEST(ChatTemplateTest, LoadsTheStringFormFromTokenizerConfig) {
  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer_config.json", R"({"chat_template": "{{ 'hi' }}", "x": 1})");
  EXPECT_EQ(*LoadChatTemplate(dir), "{{ 'hi' }}");
}

TEST(ChatTemplateTest, LoadsTheDefaultOfTheListForm) {
  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer_config.json",
            R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                  {"name": "default", "template": "D"}]})");
  EXPECT_EQ(*LoadChatTemplate(dir), "D");
}

TEST(ChatTemplateTest, PrefersChatTemplateJinja) {
  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer_config.json", R"({"chat_template": "old"})");
  WriteFile(dir + "/chat_template.jinja", "new\n");
  EXPECT_EQ(*LoadChatTemplate(dir), "new\n");
}

TEST(ChatTemplateTest, AModelWithoutATemplateIsNotFound) {
  const std::string dir = TempDir();
  WriteFile(dir + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(LoadChatTemplate(dir).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadChatTemplate(dir + "/nope").status().code(), absl::StatusCode::kNotFound);
  WriteFile(dir + "/tokenizer_config.json", "{not json");
  EXPECT_EQ(LoadChatTemplate(dir).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, ApplyPassesMessagesToolsTokensAndExtraVariables) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "|{{ tools is none }}|{{ documents is none }}|{{ eos_token is defined }}"
      "|{{ enable_thinking }}{% if add_generation_prompt %}<assistant>{% endif %}");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])");
  inputs.bos_token = "<s>";
  inputs.extra_context = {{"enable_thinking", false}};
  EXPECT_EQ(*t->Apply(inputs), "<s><system>be brief<user>hi|True|True|False|False<assistant>");
  inputs.add_generation_prompt = false;
  inputs.tools = nlohmann::ordered_json::array();
  EXPECT_EQ(*t->Apply(inputs), "<s><system>be brief<user>hi|False|True|False|False");
}

TEST(ChatTemplateTest, ExtraVariablesNeverReplaceTheCheckedOnes) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}|{{ tools is none }}");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  inputs.extra_context = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": 7, "content": {"x": 1}}], "tools": [1]})");
  EXPECT_EQ(*t->Apply(inputs), "<user>hi|True");
}

TEST(ChatTemplateTest, ATemplateErrorIsAnErrorOfTheRender) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(
      "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(R"([{"role": "system", "content": "x"}])");
  EXPECT_EQ(t->Apply(inputs).status().message(), "System role not supported");
  EXPECT_THAT(ChatTemplate::Create("{% if %}").status().message(), HasSubstr("line 1"));
}

}  // namespace
}  // namespace pagoda::jinja
