// The chat completions request (/v1/chat/completions): messages rendered by the template, the
// fields chat adds or reads differently from completions, and its refusals by name.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/api/openai/chat_prompt.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/request_json.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ChatRequestTest : public testing::OpenAiContextTest {
 protected:
  absl::StatusOr<OpenAiCall> Parse(const OrderedJson& body) {
    return ParseChatRequest(body, context_);
  }
  // One user message and `extra`.
  absl::StatusOr<OpenAiCall> ParseWith(const OrderedJson& extra) {
    return Parse(With({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, extra));
  }
};

TEST_F(ChatRequestTest, MessagesAreRenderedByTheTemplateWithoutAddedSpecialTokens) {
  const absl::StatusOr<OpenAiCall> call = Parse(Body(R"({
      "model": "stories",
      "messages": [{"role": "system", "content": "Be kind."},
                   {"role": "user", "content": [{"type": "text", "text": "Once"},
                                                {"type": "text", "text": "upon"}]}],
      "temperature": 0, "max_completion_tokens": 8, "n": 2, "seed": 5,
      "logprobs": true, "top_logprobs": 2, "stop": "."})"));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_TRUE(call->chat);
  EXPECT_EQ(call->model, "stories");
  // Content parts are joined by a newline.
  const std::string text = "<|system|>Be kind.<|end|><|user|>Once\nupon<|end|><|assistant|>";
  EXPECT_THAT(call->prompt_texts, ElementsAre(text));
  ASSERT_EQ(call->requests.size(), 1u);
  const GenerationRequest& r = call->requests[0];
  EXPECT_EQ(r.prompt_ids, Encode(text, /*add_special_tokens=*/false));
  EXPECT_EQ(r.max_tokens, 8);
  EXPECT_EQ(r.n, 2);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0);
  EXPECT_EQ(r.sampling.seed, 5u);
  EXPECT_EQ(call->top_logprobs, 2);
  EXPECT_EQ(r.sampling.logprobs, 2);
  EXPECT_THAT(call->stops, ElementsAre("."));
  EXPECT_TRUE(cluster_->Validate(r).ok()) << cluster_->Validate(r);
}

TEST_F(ChatRequestTest, ChatRunsToTheModelLengthUnlessAsked) {
  absl::StatusOr<OpenAiCall> call = ParseWith({});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_FALSE(call->requests[0].max_tokens.has_value());
  EXPECT_EQ(call->top_logprobs, -1);
  EXPECT_EQ(call->requests[0].sampling.logprobs, 0);
  // max_completion_tokens wins over max_tokens.
  call = ParseWith({{"max_tokens", 9}, {"max_completion_tokens", 4}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->requests[0].max_tokens, 4);
  call = ParseWith({{"max_tokens", 9}, {"max_completion_tokens", nullptr}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->requests[0].max_tokens, 9);
  // Chat asks for a token at least.
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    EXPECT_TRUE(Refused(ParseWith({{field, 0}}).status(), field, kInvalidValue));
    EXPECT_TRUE(
        Refused(ParseWith({{field, kMaxModelLen}}).status(), field, kContextLengthExceeded));
    EXPECT_TRUE(Refused(ParseWith({{field, 2147483647}}).status(), field, kContextLengthExceeded));
  }
}

TEST_F(ChatRequestTest, LogprobsTakeTopLogprobsOnlyWithLogprobsTrue) {
  absl::StatusOr<OpenAiCall> call = ParseWith({{"logprobs", true}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->top_logprobs, 0);
  EXPECT_EQ(call->requests[0].sampling.logprobs, 1);  // the chosen token's own
  call = ParseWith({{"logprobs", false}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->top_logprobs, -1);
  EXPECT_TRUE(Refused(ParseWith({{"top_logprobs", 2}}).status(), "top_logprobs", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"logprobs", true}, {"top_logprobs", kMaxLogprobs + 1}}).status(),
                      "top_logprobs", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"logprobs", true}, {"top_logprobs", 2147483647}}).status(),
                      "top_logprobs", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"logprobs", 3}}).status(), "logprobs", kInvalidType));
  // Completions' fields are not chat's.
  for (const char* field : {"prompt", "echo", "suffix"}) {
    EXPECT_TRUE(Refused(ParseWith({{field, "x"}}).status(), field, kUnsupportedParameter));
  }
}

TEST_F(ChatRequestTest, NullIsAbsentForEveryOptionalField) {
  OrderedJson body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"seed", 1}};
  for (const char* field : {"model",
                            "user",
                            "temperature",
                            "n",
                            "max_tokens",
                            "max_completion_tokens",
                            "logprobs",
                            "top_logprobs",
                            "tools",
                            "tool_choice",
                            "parallel_tool_calls",
                            "add_generation_prompt",
                            "continue_final_message",
                            "chat_template_kwargs",
                            "documents",
                            "response_format",
                            "stop",
                            "stream",
                            "stream_options",
                            "store",
                            "functions"}) {
    body[field] = nullptr;
  }
  const absl::StatusOr<OpenAiCall> call = Parse(body);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre("<|user|>Hi<|end|><|assistant|>"));
  EXPECT_FALSE(call->requests[0].max_tokens.has_value());
  EXPECT_EQ(call->output.tool_format, ToolCallFormat::kNone);
  EXPECT_EQ(call->requests[0].constraint, nullptr);
  // A message's null content is absent too (an assistant's turn of tool calls).
  EXPECT_TRUE(Parse({{"messages", {{{"role", "user"}, {"content", nullptr}}}}}).ok());
}

TEST_F(ChatRequestTest, MalformedMessagesAreRefusedAsMessages) {
  EXPECT_TRUE(Refused(Parse(OrderedJson::object()).status(), "messages", kMissingRequired));
  const std::vector<OrderedJson> bad = {
      "hi",
      OrderedJson::array(),
      {5},
      {{{"content", "x"}}},                  // no role
      {{{"role", 1}, {"content", "x"}}},     // a role that is not a string
      {{{"role", "user"}, {"content", 7}}},  // content neither text nor parts
      {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}},
      {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 5}}}}}},
      {{{"role", "user"}, {"content", {"text"}}}},
      {{{"role", "assistant"}, {"tool_calls", "call"}}},
  };
  for (const OrderedJson& messages : bad) {
    EXPECT_TRUE(Refused(Parse({{"messages", messages}}).status(), "messages", kInvalidValue))
        << messages;
  }
  const OrderedJson message = {{"role", "user"}, {"content", "x"}};
  EXPECT_TRUE(
      Refused(Parse({{"messages", std::vector<OrderedJson>(kMaxMessages + 1, message)}}).status(),
              "messages", kInvalidValue));
}

TEST_F(ChatRequestTest, TemplateOptionsShapeTheRenderedPrompt) {
  absl::StatusOr<OpenAiCall> call = ParseWith({{"add_generation_prompt", false}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre("<|user|>Hi<|end|>"));
  call = ParseWith({{"chat_template_kwargs", {{"greeting", "hello"}}}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre("<|user|>Hi<|end|>[hello]<|assistant|>"));
  // continue_final_message: the text ends where the last message's content ends.
  call = Parse(
      {{"messages",
        {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Once"}}}},
       {"continue_final_message", true}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre("<|user|>Hi<|end|><|assistant|>Once"));
  EXPECT_TRUE(Refused(
      ParseWith({{"continue_final_message", true}, {"add_generation_prompt", true}}).status(),
      "continue_final_message", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"chat_template_kwargs", "x"}}).status(), "chat_template_kwargs",
                      kInvalidType));
  EXPECT_TRUE(Refused(ParseWith({{"documents", {{"a", 1}}}}).status(), "documents", kInvalidType));
  EXPECT_TRUE(Refused(ParseWith({{"add_generation_prompt", "no"}}).status(),
                      "add_generation_prompt", kInvalidType));
  EXPECT_TRUE(ParseWith({{"documents", {{{"title", "a"}, {"text", "b"}}}}}).ok());
}

TEST_F(ChatRequestTest, WithoutAChatTemplateChatIsRefused) {
  context_.chat_template = nullptr;
  const absl::Status status = ParseWith({}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(ErrorOf(status).param, "messages");
}

TEST_F(ChatRequestTest, RenderChatIsWhatChatPrompts) {
  const OrderedJson body = {
      {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
      {"tools", Body(R"([{"type": "function", "function": {"name": "f"}}])")}};
  const absl::StatusOr<std::string> text = RenderChat(body, context_);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<|user|>Hi<|end|>[tools:f;]<|assistant|>");
  const absl::StatusOr<OpenAiCall> call = Parse(body);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts, ElementsAre(*text));
}

}  // namespace
}  // namespace pagoda
