// Chat's tool fields (tools, tool_choice, parallel_tool_calls) and tool turns in messages: what
// is rendered, what is parsed, what a grammar enforces, and each malformed field refused by name.
#include "router/api/openai/openai_tools.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;

class OpenAiToolsTest : public testing::OpenAiContextTest {
 protected:
  static OrderedJson Tools() {
    return Body(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}, "strict": true}},
      {"type": "function", "function": {"name": "get-time"}}])");
  }
  static absl::StatusOr<ToolRequest> Read(const OrderedJson& body, bool build_grammar = true) {
    return ReadToolRequest(body, ToolCallFormat::kHermes, build_grammar);
  }
  absl::StatusOr<OpenAiCall> Chat(const OrderedJson& extra) {
    return ParseChatRequest(With({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}, extra),
                            context_);
  }
};

TEST_F(OpenAiToolsTest, NoToolsIsNothingToParse) {
  const absl::StatusOr<ToolRequest> r = Read(OrderedJson::object());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tools.is_null());
  EXPECT_EQ(r->parse, ToolCallFormat::kNone);
  EXPECT_EQ(r->max_calls, kUnlimitedToolCalls);
  EXPECT_FALSE(r->gbnf.has_value());
  // An empty list is no tools either.
  EXPECT_TRUE(Read({{"tools", OrderedJson::array()}})->tools.is_null());
  // Null is absent.
  EXPECT_TRUE(
      Read({{"tools", nullptr}, {"tool_choice", nullptr}, {"parallel_tool_calls", nullptr}}).ok());
}

TEST_F(OpenAiToolsTest, AutoIsTheDefaultWithToolsAndParsesCalls) {
  const absl::StatusOr<ToolRequest> r = Read({{"tools", Tools()}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tools, Tools());  // handed to the template as sent
  EXPECT_EQ(r->parse, ToolCallFormat::kHermes);
  EXPECT_FALSE(r->gbnf.has_value());  // auto: the model may answer in text
  const absl::StatusOr<ToolRequest> explicit_auto =
      Read({{"tools", Tools()}, {"tool_choice", "auto"}});
  ASSERT_TRUE(explicit_auto.ok()) << explicit_auto.status();
  EXPECT_EQ(explicit_auto->parse, ToolCallFormat::kHermes);
}

TEST_F(OpenAiToolsTest, NoneRendersTheToolsButParsesNoCalls) {
  const absl::StatusOr<ToolRequest> r = Read({{"tools", Tools()}, {"tool_choice", "none"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tools, Tools());
  EXPECT_EQ(r->parse, ToolCallFormat::kNone);
  const absl::StatusOr<OpenAiCall> call = Chat({{"tools", Tools()}, {"tool_choice", "none"}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(call->prompt_texts,
              ElementsAre("<|user|>Hi<|end|>[tools:get_weather;get-time;]<|assistant|>"));
  EXPECT_EQ(call->output.tool_format, ToolCallFormat::kNone);
  EXPECT_EQ(call->requests[0].constraint, nullptr);
}

TEST_F(OpenAiToolsTest, RequiredAndANamedFunctionAreEnforcedByAGrammar) {
  const absl::StatusOr<ToolRequest> required =
      Read({{"tools", Tools()}, {"tool_choice", "required"}});
  ASSERT_TRUE(required.ok()) << required.status();
  ASSERT_TRUE(required->gbnf.has_value());
  EXPECT_THAT(*required->gbnf, ::testing::HasSubstr("get-time"));
  const absl::StatusOr<ToolRequest> named =
      Read({{"tools", Tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_TRUE(named->gbnf.has_value());
  EXPECT_THAT(*named->gbnf, ::testing::HasSubstr("get_weather"));
  EXPECT_THAT(*named->gbnf, ::testing::Not(::testing::HasSubstr("get-time")));
  // Rendering alone (/tokenize) builds no grammar.
  EXPECT_FALSE(Read({{"tools", Tools()}, {"tool_choice", "required"}}, /*build_grammar=*/false)
                   ->gbnf.has_value());
  // Through chat: the grammar is the request's constraint, and a call is all it takes.
  const absl::StatusOr<OpenAiCall> call =
      Chat({{"tools", Tools()},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_NE(call->requests[0].constraint, nullptr);
  EXPECT_FALSE(Accepts(*call->requests[0].constraint, "It is sunny."));
  EXPECT_EQ(call->output.tool_format, ToolCallFormat::kHermes);
  EXPECT_EQ(call->output.reasoning, ReasoningFormat::kNone);
}

TEST_F(OpenAiToolsTest, ParallelToolCallsFalseIsOneCallAtMost) {
  const absl::StatusOr<ToolRequest> r = Read({{"tools", Tools()}, {"parallel_tool_calls", false}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->max_calls, 1);
  EXPECT_EQ(Read({{"tools", Tools()}, {"parallel_tool_calls", true}})->max_calls,
            kUnlimitedToolCalls);
  const absl::StatusOr<OpenAiCall> call =
      Chat({{"tools", Tools()}, {"parallel_tool_calls", false}});
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(call->output.max_tool_calls, 1);
}

TEST_F(OpenAiToolsTest, AMalformedToolIsRefusedAsTools) {
  struct Case {
    const char* tools;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {R"("get_weather")", kInvalidType},
           {R"({"type": "function"})", kInvalidType},
           {R"([5])", kInvalidValue},
           {R"([{"type": "retrieval"}])", kInvalidValue},
           {R"([{"function": {"name": "f"}}])", kInvalidValue},
           {R"([{"type": "function"}])", kMissingRequired},
           {R"([{"type": "function", "function": "f"}])", kMissingRequired},
           {R"([{"type": "function", "function": {}}])", kMissingRequired},
           {R"([{"type": "function", "function": {"name": "f"}, "id": 1}])", kUnsupportedParameter},
           {R"([{"type": "function", "function": {"name": "f", "returns": {}}}])",
            kUnsupportedParameter},
           {R"([{"type": "function", "function": {"name": "has space"}}])", kInvalidValue},
           {R"([{"type": "function", "function": {"name": 5}}])", kInvalidValue},
           {R"([{"type": "function", "function": {"name": "f", "description": 1}}])",
            kInvalidValue},
           {R"([{"type": "function", "function": {"name": "f", "parameters": "{}"}}])",
            kInvalidValue},
           {R"([{"type": "function", "function": {"name": "f", "strict": "yes"}}])", kInvalidValue},
           {R"([{"type": "function", "function": {"name": "f"}},
                {"type": "function", "function": {"name": "f"}}])",
            kInvalidValue},
       }) {
    EXPECT_TRUE(Refused(Read({{"tools", OrderedJson::parse(c.tools)}}).status(), "tools", c.code))
        << c.tools;
  }
  // Names: [a-zA-Z0-9_-]{1,64}.
  const OrderedJson longest = {
      {{"type", "function"}, {"function", {{"name", std::string(64, 'f')}}}}};
  EXPECT_TRUE(Read({{"tools", longest}}).ok());
  const OrderedJson too_long = {
      {{"type", "function"}, {"function", {{"name", std::string(65, 'f')}}}}};
  EXPECT_TRUE(Refused(Read({{"tools", too_long}}).status(), "tools", kInvalidValue));
  // At most kMaxTools.
  OrderedJson many = OrderedJson::array();
  for (size_t i = 0; i <= kMaxTools; ++i) {
    many.push_back({{"type", "function"}, {"function", {{"name", absl::StrCat("f", i)}}}});
  }
  EXPECT_TRUE(Refused(Read({{"tools", many}}).status(), "tools", kInvalidType));
  many.erase(many.size() - 1);
  EXPECT_TRUE(Read({{"tools", many}}).ok());
}

TEST_F(OpenAiToolsTest, AToolChoiceThatCannotBeMetIsRefusedAsToolChoice) {
  struct Case {
    OrderedJson body;
    const char* param;
    const char* code;
  };
  const OrderedJson tools = Tools();
  const std::vector<Case> cases = {
      {{{"tool_choice", "required"}}, "tool_choice", kInvalidValue},  // no tools to call
      {{{"tool_choice", "auto"}}, "tool_choice", kInvalidValue},
      {{{"tools", tools}, {"tool_choice", "maybe"}}, "tool_choice", kInvalidValue},
      {{{"tools", tools}, {"tool_choice", 1}}, "tool_choice", kInvalidValue},
      {{{"tools", tools}, {"tool_choice", {{"type", "function"}}}}, "tool_choice", kInvalidValue},
      {{{"tools", tools},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}},
       "tool_choice",
       kInvalidValue},
      {{{"tools", tools}, {"tool_choice", {{"type", "web"}, {"function", {{"name", "get-time"}}}}}},
       "tool_choice",
       kInvalidValue},
      {{{"tools", tools}, {"parallel_tool_calls", "no"}}, "parallel_tool_calls", kInvalidType},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(Read(c.body).status(), c.param, c.code)) << c.body;
  }
  // "none" needs no tools.
  EXPECT_TRUE(Read({{"tool_choice", "none"}}).ok());
  // A required call with no tool-call format on the server cannot be enforced.
  EXPECT_TRUE(Refused(
      ReadToolRequest({{"tools", tools}, {"tool_choice", "required"}}, ToolCallFormat::kNone)
          .status(),
      "tool_choice", kUnsupportedParameter));
}

TEST_F(OpenAiToolsTest, ARequiredCallTakesNoOtherConstraint) {
  EXPECT_TRUE(Refused(Chat({{"tools", Tools()},
                            {"tool_choice", "required"},
                            {"response_format", {{"type", "json_object"}}}})
                          .status(),
                      "tool_choice", kInvalidValue));
  context_.constraints = nullptr;
  EXPECT_TRUE(Refused(Chat({{"tools", Tools()}, {"tool_choice", "required"}}).status(),
                      "tool_choice", kUnsupportedParameter));
  // auto needs no grammar, so no compiler either.
  EXPECT_TRUE(Chat({{"tools", Tools()}}).ok());
}

TEST_F(OpenAiToolsTest, AToolTurnReachesTheTemplateWithItsArgumentsAsAnObject) {
  OrderedJson message = Body(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})");
  ASSERT_TRUE(PrepareToolTurn(&message).ok());
  EXPECT_EQ(message["content"], "");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], Body(R"({"city": "Paris"})"));
  // Arguments already an object stay as they are.
  OrderedJson as_object = Body(R"({"role": "assistant", "tool_calls": [
      {"function": {"name": "f", "arguments": {"city": "Rome"}}}]})");
  ASSERT_TRUE(PrepareToolTurn(&as_object).ok());
  EXPECT_EQ(as_object["tool_calls"][0]["function"]["arguments"]["city"], "Rome");
  // Through chat, rendered by the template.
  const absl::StatusOr<OpenAiCall> call = ParseChatRequest(Body(R"({"messages": [
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "cold"}],
        "tools": [{"type": "function", "function": {"name": "get_weather"}}]})"),
                                                           context_);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_THAT(
      call->prompt_texts,
      ElementsAre(
          "<|user|>Weather?<|end|><|assistant|>call get_weather(Oslo)<|end|><|tool|>cold<|end|>"
          "[tools:get_weather;]<|assistant|>"));
}

TEST_F(OpenAiToolsTest, AMalformedToolTurnIsRefusedAsMessages) {
  for (const char* text : {
           R"({"role": "assistant", "tool_calls": {"id": "c1"}})",
           R"({"role": "assistant", "tool_calls": [5]})",
           R"({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})",
           R"({"role": "assistant", "tool_calls": [{"function": {"name": 1}}]})",
           R"({"role": "assistant", "tool_calls": [{"function": {"name": "f",
               "arguments": "not json"}}]})",
           R"({"role": "assistant", "tool_calls": [{"function": {"name": "f",
               "arguments": "[1, 2]"}}]})",
           R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 5}}]})",
           R"({"role": "tool", "tool_call_id": 5, "content": "x"})",
       }) {
    OrderedJson message = OrderedJson::parse(text);
    EXPECT_TRUE(Refused(PrepareToolTurn(&message), "messages", kInvalidValue)) << text;
  }
  // Arguments nested past the limit are refused, not recursed into.
  OrderedJson deep = {
      {"role", "assistant"},
      {"tool_calls",
       {{{"function",
          {{"name", "f"},
           {"arguments", "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}"}}}}}}};
  EXPECT_TRUE(Refused(PrepareToolTurn(&deep), "messages", kInvalidValue));
  // Null tool calls and a null tool_call_id are absent.
  OrderedJson plain = {
      {"role", "assistant"}, {"content", "x"}, {"tool_calls", nullptr}, {"tool_call_id", nullptr}};
  EXPECT_TRUE(PrepareToolTurn(&plain).ok());
  EXPECT_EQ(plain["content"], "x");
}

}  // namespace
}  // namespace pagoda
