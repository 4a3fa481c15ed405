// The field reader every OpenAI endpoint shares (null is absent) and the fields completions and
// chat read (anything else refused by name).
#include "router/api/openai/openai_fields.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(GivenFieldTest, AnAbsentOrNullFieldIsNotGiven) {
  const OrderedJson body = OrderedJson::parse(R"({"a": 1, "b": null, "c": false, "d": 0})");
  ASSERT_NE(GivenField(body, "a"), nullptr);
  EXPECT_EQ(*GivenField(body, "a"), 1);
  EXPECT_EQ(GivenField(body, "a"), &body["a"]);  // the body's own value, not a copy
  EXPECT_EQ(GivenField(body, "b"), nullptr);
  EXPECT_EQ(GivenField(body, "z"), nullptr);
  // False and zero are values, not absence.
  ASSERT_NE(GivenField(body, "c"), nullptr);
  EXPECT_EQ(*GivenField(body, "c"), false);
  ASSERT_NE(GivenField(body, "d"), nullptr);
  // Not an object: nothing is given.
  EXPECT_EQ(GivenField(OrderedJson::array({1, 2}), "a"), nullptr);
  EXPECT_EQ(GivenField(OrderedJson("a"), "a"), nullptr);
  EXPECT_EQ(GivenField(OrderedJson(nullptr), "a"), nullptr);
}

// The param and code OpenAI's error reports for `status`.
std::string ParamAndCode(const absl::Status& status) {
  const OpenAiError e = ErrorOf(status);
  return e.param + " " + e.code;
}

TEST(CheckKnownFieldsTest, EachEndpointTakesItsOwnFields) {
  const OrderedJson both = {
      {"model", "m"}, {"temperature", 1},    {"n", 1},
      {"top_k", 1},   {"guided_json", "{}"}, {"stream_options", {{"include_usage", true}}}};
  EXPECT_TRUE(CheckKnownFields(both, /*chat=*/true).ok());
  EXPECT_TRUE(CheckKnownFields(both, /*chat=*/false).ok());
  for (const char* chat_only : {"messages", "max_completion_tokens", "top_logprobs", "tools",
                                "tool_choice", "parallel_tool_calls", "add_generation_prompt",
                                "continue_final_message", "chat_template_kwargs", "documents"}) {
    const OrderedJson body = {{chat_only, 1}};
    EXPECT_TRUE(CheckKnownFields(body, /*chat=*/true).ok()) << chat_only;
    EXPECT_EQ(ParamAndCode(CheckKnownFields(body, /*chat=*/false)),
              std::string(chat_only) + " " + kUnsupportedParameter);
  }
  for (const char* completions_only : {"prompt", "echo", "suffix"}) {
    const OrderedJson body = {{completions_only, 1}};
    EXPECT_TRUE(CheckKnownFields(body, /*chat=*/false).ok()) << completions_only;
    EXPECT_EQ(ParamAndCode(CheckKnownFields(body, /*chat=*/true)),
              std::string(completions_only) + " " + kUnsupportedParameter);
  }
  // logprobs is both's (an integer in completions, a flag in chat).
  EXPECT_TRUE(CheckKnownFields({{"logprobs", 1}}, /*chat=*/false).ok());
  EXPECT_TRUE(CheckKnownFields({{"logprobs", true}}, /*chat=*/true).ok());
}

TEST(CheckKnownFieldsTest, AKnownFieldThatIsNotServedSaysWhy) {
  for (const auto& [field, why] : std::vector<std::pair<std::string, std::string>>{
           {"audio", "audio output"},
           {"store", "stored completions"},
           {"functions", "send tools"},
           {"function_call", "send tool_choice"},
           {"best_of", "ask for n samples"},
           {"chat_template", "--chat-template"},
           {"prompt_cache_key", "cached automatically"}}) {
    const absl::Status status = CheckKnownFields({{field, 1}}, /*chat=*/true);
    EXPECT_EQ(ParamAndCode(status), field + " " + kUnsupportedParameter);
    EXPECT_THAT(std::string(status.message()), HasSubstr(why)) << field;
  }
}

TEST(CheckKnownFieldsTest, AnUnknownFieldIsRefusedUnlessNull) {
  const absl::Status status = CheckKnownFields({{"frobnicate", 1}}, /*chat=*/false);
  EXPECT_EQ(ParamAndCode(status), std::string("frobnicate ") + kUnsupportedParameter);
  EXPECT_THAT(std::string(status.message()), HasSubstr("/v1/completions"));
  EXPECT_THAT(std::string(CheckKnownFields({{"frobnicate", 1}}, true).message()),
              HasSubstr("/v1/chat/completions"));
  EXPECT_TRUE(CheckKnownFields({{"frobnicate", nullptr}, {"store", nullptr}}, true).ok());
  // stream_options takes include_usage only; a null member is absent.
  EXPECT_EQ(ParamAndCode(CheckKnownFields({{"stream_options", {{"x", 1}}}}, true)),
            std::string("stream_options ") + kUnsupportedParameter);
  EXPECT_TRUE(CheckKnownFields({{"stream_options", {{"x", nullptr}}}}, true).ok());
  // The name is quoted at most 64 printable bytes long.
  EXPECT_EQ(ErrorOf(CheckKnownFields({{std::string(80, 'x'), 1}}, true)).param,
            std::string(64, 'x'));
  EXPECT_THAT(std::string(CheckKnownFields({{"a\x01"
                                             "b",
                                             1}},
                                           true)
                              .message()),
              ::testing::StartsWith("a?b: "));
}

}  // namespace
}  // namespace pagoda
