// The typed field readers (null is absent, another type or range refused by name) and the
// fields completions and chat read (anything else refused by name, unless null). JsonMember,
// which every endpoint reads a field with, is tested with common/json.h.
#include "router/api/openai/openai_fields.h"

#include <cstdint>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/api/openai/openai_error.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// The param and code OpenAI's error reports for `status`.
std::string ParamAndCode(const absl::Status& status) {
  const OpenAiError e = ErrorOf(status);
  return e.param + " " + e.code;
}

TEST(ReadFieldTest, AnAbsentOrNullFieldLeavesTheValueAsItWas) {
  const OrderedJson body = {{"a", nullptr}};
  std::optional<double> x;
  std::optional<int64_t> i;
  bool b = true;
  for (const char* name : {"a", "z"}) {
    EXPECT_TRUE(ReadNumberField(body, name, 0, 1, &x).ok());
    EXPECT_TRUE(ReadIntField(body, name, 0, 1, &i).ok());
    EXPECT_TRUE(ReadBoolField(body, name, &b).ok());
  }
  EXPECT_FALSE(x.has_value());
  EXPECT_FALSE(i.has_value());
  EXPECT_TRUE(b);
}

TEST(ReadFieldTest, AValueOfItsTypeWithinItsRangeIsRead) {
  const OrderedJson body = {
      {"x", 0.5}, {"i", 3}, {"whole", 2.0}, {"b", false}, {"big", UINT64_MAX}};
  std::optional<double> x;
  ASSERT_TRUE(ReadNumberField(body, "x", 0, 1, &x).ok());
  EXPECT_EQ(x, 0.5);
  ASSERT_TRUE(ReadNumberField(body, "i", 0, 3, &x).ok()) << "an integer is a number";
  EXPECT_EQ(x, 3);
  std::optional<int64_t> i;
  ASSERT_TRUE(ReadIntField(body, "i", 3, 3, &i).ok());
  EXPECT_EQ(i, 3);
  bool b = true;
  ASSERT_TRUE(ReadBoolField(body, "b", &b).ok());
  EXPECT_FALSE(b);
  // An unsigned past int64 is read as INT64_MAX, then bounded.
  i.reset();
  ASSERT_TRUE(ReadIntField(body, "big", 0, INT64_MAX, &i).ok());
  EXPECT_EQ(i, INT64_MAX);
  EXPECT_EQ(ParamAndCode(ReadIntField(body, "big", 0, 100, &i)), "big invalid_value");
}

TEST(ReadFieldTest, AnotherTypeOrOutOfRangeIsRefusedByName) {
  const OrderedJson body = {{"s", "1"}, {"f", 1.5}, {"i", 7}, {"b", 1}, {"neg", -1}};
  std::optional<double> x;
  std::optional<int64_t> i;
  bool b = false;
  EXPECT_EQ(ParamAndCode(ReadNumberField(body, "s", 0, 10, &x)), "s invalid_type");
  EXPECT_EQ(ParamAndCode(ReadNumberField(body, "i", 0, 5, &x)), "i invalid_value");
  EXPECT_EQ(ParamAndCode(ReadNumberField(body, "neg", 0, 5, &x)), "neg invalid_value");
  EXPECT_EQ(ParamAndCode(ReadIntField(body, "f", 0, 10, &i)), "f invalid_type");
  EXPECT_EQ(ParamAndCode(ReadIntField(body, "s", 0, 10, &i)), "s invalid_type");
  EXPECT_EQ(ParamAndCode(ReadIntField(body, "i", 0, 6, &i)), "i invalid_value");
  EXPECT_EQ(ParamAndCode(ReadBoolField(body, "b", &b)), "b invalid_type");
  EXPECT_FALSE(x.has_value());
  EXPECT_FALSE(i.has_value());
  EXPECT_THAT(std::string(ReadIntField(body, "i", 0, 6, &i).message()),
              HasSubstr("i: must be in [0, 6]"));
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
