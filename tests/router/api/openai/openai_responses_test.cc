// /v1/responses bodies read as chat calls: input and instructions as messages, Responses' own
// names for chat's fields (max_output_tokens, text.format, flat tools), what needs state refused
// by name, and the chat path's errors renamed to the fields the client sent.
#include "router/api/openai/openai_responses.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;

class OpenAiResponsesTest : public testing::OpenAiContextTest {
 protected:
  absl::StatusOr<ResponsesCall> Parse(const OrderedJson& body) {
    return ParseResponsesRequest(body, context_);
  }
  absl::StatusOr<ResponsesCall> ParseWith(const OrderedJson& extra) {
    return Parse(With({{"input", "Hi"}}, extra));
  }
};

TEST_F(OpenAiResponsesTest, AValidBodyIsAChatCall) {
  const absl::StatusOr<ResponsesCall> call = Parse(Body(R"({
      "model": "stories", "input": "Hi", "instructions": "Be brief.",
      "max_output_tokens": 12, "temperature": 0.5, "top_p": 0.75, "seed": 3, "stream": true,
      "metadata": {"k": "v"}, "user": "u", "store": false, "background": false,
      "truncation": "disabled", "service_tier": "auto", "include": []})"));
  ASSERT_TRUE(call.ok()) << call.status();
  const OpenAiCall& chat = call->chat;
  EXPECT_TRUE(chat.chat);
  EXPECT_EQ(chat.model, "stories");
  EXPECT_TRUE(chat.stream);
  // The instructions are the system message, before the input.
  const std::string text = "<|system|>Be brief.<|end|><|user|>Hi<|end|><|assistant|>";
  EXPECT_THAT(chat.prompt_texts, ElementsAre(text));
  ASSERT_EQ(chat.requests.size(), 1u);
  const GenerationRequest& r = chat.requests[0];
  EXPECT_EQ(r.prompt_ids, Encode(text, /*add_special_tokens=*/false));
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.75f);
  EXPECT_EQ(r.sampling.seed, 3u);
  EXPECT_EQ(r.n, 1);
  // Echoed as sent.
  EXPECT_EQ(call->instructions, "Be brief.");
  EXPECT_EQ(call->max_output_tokens, 12);
  EXPECT_EQ(call->metadata, OrderedJson({{"k", "v"}}));
  EXPECT_EQ(call->user, "u");
  EXPECT_EQ(call->text_format, OrderedJson({{"type", "text"}}));
  EXPECT_EQ(call->tool_choice, "auto");
  EXPECT_TRUE(call->parallel_tool_calls);
}

TEST_F(OpenAiResponsesTest, NullIsAbsentForEveryOptionalField) {
  OrderedJson body = {{"input", "Hi"}};
  for (const char* field : {"model",
                            "instructions",
                            "max_output_tokens",
                            "temperature",
                            "top_p",
                            "stream",
                            "seed",
                            "text",
                            "tools",
                            "tool_choice",
                            "metadata",
                            "user",
                            "store",
                            "background",
                            "service_tier",
                            "truncation",
                            "include",
                            "previous_response_id",
                            "conversation",
                            "reasoning",
                            "top_logprobs",
                            "frobnicate",
                            "parallel_tool_calls"}) {
    body[field] = nullptr;
  }
  const absl::StatusOr<ResponsesCall> call = Parse(body);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->chat.prompt_texts, ElementsAre("<|user|>Hi<|end|><|assistant|>"));
  EXPECT_FALSE(call->chat.requests[0].max_tokens.has_value());
  EXPECT_TRUE(call->instructions.is_null());
  EXPECT_TRUE(call->max_output_tokens.is_null());
}

TEST_F(OpenAiResponsesTest, InputItemsBecomeChatMessages) {
  const absl::StatusOr<ResponsesCall> call = Parse(Body(R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
      {"type": "function_call", "call_id": "c1", "name": "get_weather",
       "arguments": "{\"city\": \"Oslo\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "cold"}],
    "tools": [{"type": "function", "name": "get_weather",
               "parameters": {"type": "object"}}]})"));
  ASSERT_TRUE(call.ok()) << call.status();
  // developer is the system's role to a chat template; the call is an assistant's tool call.
  EXPECT_THAT(
      call->chat.prompt_texts,
      ElementsAre(
          "<|system|>Rules.<|end|><|user|>Weather?<|end|><|assistant|>call get_weather(Oslo)<|end|>"
          "<|tool|>cold<|end|>[tools:get_weather;]<|assistant|>"));
  EXPECT_EQ(call->chat.output.tool_format, ToolCallFormat::kHermes);
  // The tools are echoed in their flat form.
  EXPECT_EQ(call->tools[0]["name"], "get_weather");
}

TEST_F(OpenAiResponsesTest, MalformedInputIsRefusedAsInput) {
  EXPECT_TRUE(Refused(Parse(OrderedJson::object()).status(), "input", kMissingRequired));
  struct Case {
    const char* input;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {"5", kInvalidValue},
           {"[]", kInvalidValue},
           {"[5]", kInvalidValue},
           {R"([{"type": 5}])", kInvalidValue},
           {R"([{"role": "user"}])", kInvalidValue},
           {R"([{"content": "x"}])", kInvalidValue},
           {R"([{"role": "critic", "content": "x"}])", kInvalidValue},
           {R"([{"role": "user", "content": "x", "name": "n"}])", kUnsupportedParameter},
           {R"([{"type": "function_call", "call_id": "c1", "name": "f"}])", kInvalidValue},
           {R"([{"type": "function_call_output", "call_id": "c1"}])", kInvalidValue},
           {R"([{"type": "reasoning", "summary": []}])", kUnsupportedParameter},
       }) {
    EXPECT_TRUE(Refused(Parse({{"input", OrderedJson::parse(c.input)}}).status(), "input", c.code))
        << c.input;
  }
  EXPECT_TRUE(Refused(ParseWith({{"instructions", 5}}).status(), "instructions", kInvalidType));
}

TEST_F(OpenAiResponsesTest, WhatNeedsStateOrIsNotServedIsRefusedByName) {
  struct Case {
    const char* field;
    OrderedJson value;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"previous_response_id", "resp_1", kUnsupportedParameter},
      {"conversation", "conv_1", kUnsupportedParameter},
      {"prompt", {{"id", "p"}}, kUnsupportedParameter},
      {"reasoning", {{"effort", "low"}}, kUnsupportedParameter},
      {"top_logprobs", 2, kUnsupportedParameter},
      {"top_logprobs", 2147483647, kUnsupportedParameter},
      {"stream_options", {{"include_usage", true}}, kUnsupportedParameter},
      {"messages", OrderedJson::array(), kUnsupportedParameter},
      {"frobnicate", 1, kUnsupportedParameter},
      {"store", true, kUnsupportedParameter},
      {"store", "no", kInvalidType},
      {"background", true, kUnsupportedParameter},
      {"background", 0, kInvalidType},
      {"service_tier", "flex", kUnsupportedParameter},
      {"service_tier", 1, kInvalidType},
      {"truncation", "auto", kUnsupportedParameter},
      {"include", {"reasoning.encrypted_content"}, kUnsupportedParameter},
      {"include", "x", kInvalidType},
      {"user", 1, kInvalidType},
      {"safety_identifier", 1, kInvalidType},
      {"prompt_cache_key", 1, kInvalidType},
      {"metadata", "x", kInvalidValue},
      {"metadata", {{"k", 1}}, kInvalidValue},
      {"metadata", {{std::string(kMaxMetadataKeyBytes + 1, 'k'), "v"}}, kInvalidValue},
      {"metadata", {{"k", std::string(kMaxMetadataValueBytes + 1, 'v')}}, kInvalidValue},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(ParseWith({{c.field, c.value}}).status(), c.field, c.code))
        << c.field << " = " << c.value.dump().substr(0, 80);
  }
  OrderedJson metadata = OrderedJson::object();
  for (size_t i = 0; i < kMaxMetadataKeys; ++i) metadata[absl::StrCat("k", i)] = "v";
  EXPECT_TRUE(ParseWith({{"metadata", metadata}}).ok());
  metadata["one_more"] = "v";
  EXPECT_TRUE(Refused(ParseWith({{"metadata", metadata}}).status(), "metadata", kInvalidValue));
}

TEST_F(OpenAiResponsesTest, ChatErrorsAreNamedAsResponsesNamesTheFields) {
  EXPECT_TRUE(
      Refused(ParseWith({{"max_output_tokens", 0}}).status(), "max_output_tokens", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"max_output_tokens", 2147483647}}).status(), "max_output_tokens",
                      kContextLengthExceeded));
  EXPECT_TRUE(
      Refused(ParseWith({{"max_output_tokens", "8"}}).status(), "max_output_tokens", kInvalidType));
  // Chat's sampling fields keep their names.
  EXPECT_TRUE(Refused(ParseWith({{"temperature", -1}}).status(), "temperature", kInvalidValue));
  EXPECT_TRUE(Refused(ParseWith({{"stop", 5}}).status(), "stop", kInvalidValue));
  // A prompt past the model length is the input's.
  EXPECT_TRUE(Refused(Parse({{"input", std::string(kMaxModelLen * 64 + 1, 'a')}}).status(), "input",
                      kContextLengthExceeded));
  EXPECT_EQ(ErrorOf(InResponsesFieldNames(absl::InvalidArgumentError(
                        "prompt (300 tokens) + max_tokens (10) exceeds the model length")))
                .param,
            "max_output_tokens");
  EXPECT_EQ(ErrorOf(InResponsesFieldNames(BadField("response_format", "bad"))).param,
            "text.format");
  // "prompt_logprobs" is not "prompt".
  EXPECT_EQ(ErrorOf(InResponsesFieldNames(BadField("prompt_logprobs", "bad"))).param,
            "prompt_logprobs");
}

TEST_F(OpenAiResponsesTest, TextFormatIsChatsResponseFormat) {
  const absl::StatusOr<ResponsesCall> call = ParseWith(Body(R"({"text": {"format": {
      "type": "json_schema", "name": "n", "strict": true,
      "schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                 "required": ["n"], "additionalProperties": false}}, "verbosity": "medium"}})"));
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->text_format["name"], "n");
  ASSERT_NE(call->chat.requests[0].constraint, nullptr);
  EXPECT_TRUE(Accepts(*call->chat.requests[0].constraint, R"({"n": 1})"));
  EXPECT_FALSE(Accepts(*call->chat.requests[0].constraint, R"({"n": true})"));
  const absl::StatusOr<ResponsesCall> object =
      ParseWith({{"text", {{"format", {{"type", "json_object"}}}}}});
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_NE(object->chat.requests[0].constraint, nullptr);
  const absl::StatusOr<ResponsesCall> text =
      ParseWith({{"text", {{"format", {{"type", "text"}}}}}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->chat.requests[0].constraint, nullptr);
  struct Case {
    const char* text;
    const char* param;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {R"("json")", "text", kInvalidType},
           {R"({"verbosity": "high"})", "text.verbosity", kUnsupportedParameter},
           {R"({"format": {}})", "text.format", kInvalidValue},
           {R"({"format": {"type": "xml"}})", "text.format", kInvalidValue},
           {R"({"format": {"type": "text", "name": "n"}})", "text.format", kInvalidValue},
           {R"({"format": {"type": "json_schema", "schema": {}}})", "text.format", kInvalidValue},
           {R"({"format": {"type": "json_schema", "name": "n"}})", "text.format", kInvalidValue},
           {R"({"format": {"type": "json_schema", "name": "n", "schema": {}, "x": 1}})",
            "text.format", kUnsupportedParameter},
           {R"({"format": {"type": "json_schema", "name": "n", "schema": {"type": "frob"}}})",
            "text.format", kInvalidValue},
       }) {
    EXPECT_TRUE(
        Refused(ParseWith({{"text", OrderedJson::parse(c.text)}}).status(), c.param, c.code))
        << c.text;
  }
}

TEST_F(OpenAiResponsesTest, FlatFunctionToolsAreChatsTools) {
  const OrderedJson tools = Body(R"([{"type": "function", "name": "get_weather", "description": "d",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                "strict": true}])");
  absl::StatusOr<ResponsesCall> call = ParseWith(
      {{"tools", tools}, {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->tools, tools);
  EXPECT_EQ(call->tool_choice["name"], "get_weather");
  // A named function is enforced as in chat.
  ASSERT_NE(call->chat.requests[0].constraint, nullptr);
  EXPECT_EQ(call->chat.output.tool_format, ToolCallFormat::kHermes);
  call = ParseWith({{"tools", tools}, {"parallel_tool_calls", false}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_FALSE(call->parallel_tool_calls);
  EXPECT_EQ(call->chat.output.max_tool_calls, 1);
  // "auto" and "none" without tools choose nothing.
  EXPECT_TRUE(ParseWith({{"tool_choice", "auto"}}).ok());
  EXPECT_TRUE(ParseWith({{"tool_choice", "none"}}).ok());
  EXPECT_TRUE(
      Refused(ParseWith({{"tool_choice", "required"}}).status(), "tool_choice", kInvalidValue));
  struct Case {
    OrderedJson tools;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {"get_weather", kInvalidType},
           {Body(R"([{"name": "f"}])"), kInvalidValue},
           {Body(R"([{"type": "web_search"}])"), kUnsupportedParameter},
           {Body(R"([{"type": "file_search", "vector_store_ids": []}])"), kUnsupportedParameter},
           {Body(R"([{"type": "function", "name": "f", "function": {}}])"), kUnsupportedParameter},
           {Body(R"([{"type": "function", "name": "has space"}])"), kInvalidValue},
       }) {
    EXPECT_TRUE(Refused(ParseWith({{"tools", c.tools}}).status(), "tools", c.code)) << c.tools;
  }
}

}  // namespace
}  // namespace pagoda
