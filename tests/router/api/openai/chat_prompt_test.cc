// A request's messages as the chat template sees them, and the prompt rendered with the
// request's template options (the fixture's template writes "<|role|>content<|end|>").
#include "router/api/openai/chat_prompt.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

class ChatPromptTest : public testing::OpenAiContextTest {};

TEST_F(ChatPromptTest, ContentPartsBecomeOneStringAndNullContentIsLeftOut) {
  const absl::StatusOr<OrderedJson> messages = ReadChatMessages(Body(R"({"messages": [
      {"role": "system", "content": "Be kind.", "name": "s"},
      {"role": "user", "content": [{"type": "text", "text": "Once"},
                                   {"type": "text", "text": "upon"}]},
      {"role": "assistant", "content": null}]})"));
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_EQ(*messages, Body(R"([{"role": "system", "content": "Be kind.", "name": "s"},
                                {"role": "user", "content": "Once\nupon"},
                                {"role": "assistant", "content": null}])"));
}

TEST_F(ChatPromptTest, MessagesAreRequiredAndEachNeedsARoleAndTextContent) {
  EXPECT_TRUE(
      Refused(ReadChatMessages(OrderedJson::object()).status(), "messages", kMissingRequired));
  EXPECT_TRUE(
      Refused(ReadChatMessages({{"messages", nullptr}}).status(), "messages", kMissingRequired));
  const std::vector<OrderedJson> bad = {
      "hi",
      OrderedJson::array(),
      {5},
      {{{"role", nullptr}, {"content", "x"}}},
      {{{"role", "user"}, {"content", {{{"type", "text"}}}}}},
      {{{"role", "user"}, {"content", {{{"type", nullptr}, {"text", "x"}}}}}},
  };
  for (const OrderedJson& messages : bad) {
    EXPECT_TRUE(
        Refused(ReadChatMessages({{"messages", messages}}).status(), "messages", kInvalidValue))
        << messages;
  }
  const OrderedJson message = {{"role", "user"}, {"content", "x"}};
  EXPECT_TRUE(
      ReadChatMessages({{"messages", std::vector<OrderedJson>(kMaxMessages, message)}}).ok());
  EXPECT_TRUE(
      Refused(ReadChatMessages({{"messages", std::vector<OrderedJson>(kMaxMessages + 1, message)}})
                  .status(),
              "messages", kInvalidValue));
}

TEST_F(ChatPromptTest, TheTemplateOptionsShapeTheText) {
  const OrderedJson turns = {
      {"messages",
       {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", " Once "}}}}};
  absl::StatusOr<std::string> text = RenderChat(turns, context_);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<|user|>Hi<|end|><|assistant|> Once <|end|><|assistant|>");
  text = RenderChat(With(turns, {{"add_generation_prompt", false}}), context_);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<|user|>Hi<|end|><|assistant|> Once <|end|>");
  // The text ends where the final message's content (without its outer spaces) ends.
  text = RenderChat(With(turns, {{"continue_final_message", true}}), context_);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<|user|>Hi<|end|><|assistant|> Once");
  text = RenderChat(
      With(turns, {{"continue_final_message", true}, {"add_generation_prompt", false}}), context_);
  EXPECT_TRUE(text.ok()) << text.status();
  text = RenderChat(With(turns, {{"chat_template_kwargs", {{"greeting", "hey"}}}}), context_);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<|user|>Hi<|end|><|assistant|> Once <|end|>[hey]<|assistant|>");
}

TEST_F(ChatPromptTest, ContinueFinalMessageIsRefusedWhereItCannotApply) {
  const OrderedJson empty_last = {
      {"messages",
       {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "  "}}}},
      {"continue_final_message", true}};
  EXPECT_TRUE(
      Refused(RenderChat(empty_last, context_).status(), "continue_final_message", kInvalidValue));
  EXPECT_TRUE(
      Refused(RenderChat(With(empty_last, {{"add_generation_prompt", true}}), context_).status(),
              "continue_final_message", kInvalidValue));
}

TEST_F(ChatPromptTest, ATemplateThatFailsIsRefusedAsMessages) {
  absl::StatusOr<jinja::ChatTemplate> failing =
      jinja::ChatTemplate::Create("{{ raise_exception('no system messages') }}");
  ASSERT_TRUE(failing.ok()) << failing.status();
  context_.chat_template = &*failing;
  const absl::Status status =
      RenderChat({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, context_).status();
  EXPECT_TRUE(Refused(status, "messages", kInvalidValue));
  EXPECT_NE(status.message().find("no system messages"), absl::string_view::npos) << status;
}

}  // namespace
}  // namespace pagoda
