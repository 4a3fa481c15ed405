#include "router/api/openai/tools/tool_call_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::Optional;

// What a client makes of a stream: the content and each call put back together.
struct Assembled {
  std::string content;
  std::vector<ToolCall> calls;
};

void Apply(const ToolCallStreamDelta& d, Assembled* out) {
  out->content += d.content;
  for (const ToolCallDelta& c : d.calls) {
    ASSERT_LE(c.index, static_cast<int>(out->calls.size())) << "calls come in order";
    if (c.index == static_cast<int>(out->calls.size())) {
      ASSERT_FALSE(c.id.empty()) << "a call's first delta carries its id";
      ASSERT_FALSE(c.name.empty()) << "and its name";
      out->calls.push_back({c.id, c.name, ""});
    } else {
      EXPECT_TRUE(c.id.empty() && c.name.empty()) << "the id and name come once";
    }
    out->calls[c.index].arguments += c.arguments;
  }
}

// The stream fed `pieces`.
Assembled Stream(ToolCallFormat format, const std::vector<std::string>& pieces,
                 int max_calls = kUnlimitedToolCalls) {
  ToolCallStream stream(format, max_calls);
  Assembled out;
  for (const std::string& p : pieces) Apply(stream.Add(p), &out);
  Apply(stream.Finish(), &out);
  return out;
}

// Streaming split anywhere gives what the whole parse gives (ids aside).
void ExpectStreamMatchesWhole(ToolCallFormat format, const std::string& text) {
  const ParsedToolCalls whole = ParseToolCalls(format, text);
  auto same = [&](const Assembled& got, const std::string& how) {
    EXPECT_EQ(got.content, whole.content.value_or("")) << how;
    ASSERT_EQ(got.calls.size(), whole.calls.size()) << how;
    for (size_t i = 0; i < got.calls.size(); ++i) {
      EXPECT_EQ(got.calls[i].name, whole.calls[i].name) << how;
      EXPECT_EQ(got.calls[i].arguments, whole.calls[i].arguments) << how;
    }
  };
  for (size_t k = 0; k <= text.size(); ++k) {
    same(Stream(format, {text.substr(0, k), text.substr(k)}), "split at " + std::to_string(k));
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  same(Stream(format, bytes), "byte by byte");
}

// Qwen2.5-7B-Instruct's answer to "temperature in San Francisco now and tomorrow" (its docs).
constexpr char kQwenTwoCalls[] =
    "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San "
    "Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", "
    "\"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": "
    "\"2024-10-01\"}}\n</tool_call>";

TEST(ToolCallParserTest, HermesParsesSeveralCallsWithNullContent) {
  const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kHermes, kQwenTwoCalls);
  EXPECT_EQ(p.content, std::nullopt);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_current_temperature");
  EXPECT_EQ(p.calls[0].arguments, "{\"location\": \"San Francisco, CA, USA\"}");
  EXPECT_EQ(p.calls[1].name, "get_temperature_date");
  EXPECT_EQ(nlohmann::json::parse(p.calls[1].arguments)["date"], "2024-10-01");
  EXPECT_TRUE(p.calls[0].id.starts_with("call_"));
  EXPECT_EQ(p.calls[0].id.size(), 29u);
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
}

TEST(ToolCallParserTest, HermesKeepsTextAroundCallsAsContent) {
  const ParsedToolCalls p = ParseToolCalls(
      ToolCallFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone.");
  EXPECT_THAT(p.content, Optional(std::string("Let me check.\n\nDone.")));
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(ToolCallParserTest, MalformedCallsStayContent) {
  for (const char* text : {
           "<tool_call>\nnot json\n</tool_call>",
           "<tool_call>{\"arguments\": {}}</tool_call>",                    // no name
           "<tool_call>{\"name\": \"f\"}</tool_call>",                      // no arguments
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",  // not an object
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ",          // cut off
           "<tool_call",
       }) {
    const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kHermes, text);
    EXPECT_THAT(p.calls, ::testing::IsEmpty()) << text;
    EXPECT_THAT(p.content, Optional(std::string(text)));
  }
  // A bad call among good ones: the bad one is content.
  const ParsedToolCalls p = ParseToolCalls(
      ToolCallFormat::kHermes,
      "<tool_call>{oops}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>");
  EXPECT_THAT(p.content, Optional(std::string("<tool_call>{oops}</tool_call>")));
  EXPECT_THAT(p.calls, ElementsAre(Field(&ToolCall::name, "g")));
}

TEST(ToolCallParserTest, HermesAcceptsACallCutBeforeItsClosingTag) {
  // A stop string or EOS may take the closing tag.
  const ParsedToolCalls p =
      ParseToolCalls(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {}}");
  EXPECT_THAT(p.calls, ElementsAre(Field(&ToolCall::name, "f")));
}

TEST(ToolCallParserTest, Llama3JsonParsesCallsWithOrWithoutThePythonTag) {
  constexpr char kCall[] =
      "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, "
      "CA\", \"unit\": \"Fahrenheit\"}}";
  for (const std::string& text : {std::string(kCall), "<|python_tag|>" + std::string(kCall)}) {
    const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kLlama3Json, text);
    EXPECT_EQ(p.content, std::nullopt);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_current_conditions");
    EXPECT_EQ(nlohmann::json::parse(p.calls[0].arguments)["unit"], "Fahrenheit");
  }
  const ParsedToolCalls two = ParseToolCalls(
      ToolCallFormat::kLlama3Json,
      "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}");
  EXPECT_THAT(two.calls, ElementsAre(Field(&ToolCall::name, "a"), Field(&ToolCall::name, "b")));
}

TEST(ToolCallParserTest, Llama3JsonLeavesTextAndOtherJsonAsContent) {
  for (const char* text : {"The weather is sunny.", "{\"answer\": 42}", "{\"name\": \"Bob\"}",
                           "{\"name\": \"f\", \"parameters\": {}"}) {
    const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kLlama3Json, text);
    EXPECT_THAT(p.calls, ::testing::IsEmpty()) << text;
    EXPECT_THAT(p.content, Optional(std::string(text)));
  }
}

TEST(ToolCallParserTest, MistralParsesTheListAndTheArgsForm) {
  // Mistral-Nemo-Instruct-2407.
  const ParsedToolCalls list = ParseToolCalls(
      ToolCallFormat::kMistral,
      "[TOOL_CALLS][{\"name\": \"get_current_weather\", \"arguments\": {\"location\": \"Paris, "
      "France\", \"format\": \"celsius\"}}, {\"name\": \"get_time\", \"arguments\": {}}]");
  EXPECT_EQ(list.content, std::nullopt);
  ASSERT_EQ(list.calls.size(), 2u);
  EXPECT_EQ(list.calls[0].name, "get_current_weather");
  EXPECT_EQ(list.calls[1].arguments, "{}");
  EXPECT_EQ(list.calls[0].id.size(), 9u) << "Mistral's templates demand 9 characters";
  // Mistral-Small-3.2-24B-Instruct-2506.
  const ParsedToolCalls args = ParseToolCalls(
      ToolCallFormat::kMistral,
      "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}");
  EXPECT_THAT(args.content, Optional(std::string("Sure.")));
  ASSERT_EQ(args.calls.size(), 2u);
  EXPECT_EQ(args.calls[0].name, "get_weather");
  EXPECT_EQ(args.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(args.calls[1].name, "get_time");
}

TEST(ToolCallParserTest, NoneParsesNothing) {
  const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kNone, kQwenTwoCalls);
  EXPECT_THAT(p.content, Optional(std::string(kQwenTwoCalls)));
  EXPECT_THAT(p.calls, ::testing::IsEmpty());
}

TEST(ToolCallParserTest, MaxCallsKeepsTheFirst) {
  const ParsedToolCalls p = ParseToolCalls(ToolCallFormat::kHermes, kQwenTwoCalls, 1);
  EXPECT_THAT(p.calls, ElementsAre(Field(&ToolCall::name, "get_current_temperature")));
  EXPECT_EQ(p.content, std::nullopt);
  const Assembled s = Stream(ToolCallFormat::kHermes, {kQwenTwoCalls}, 1);
  EXPECT_EQ(s.calls.size(), 1u);
}

TEST(ToolCallParserTest, StreamingSplitAnywhereMatchesTheWholeParse) {
  for (const char* text : {
           kQwenTwoCalls,
           "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"a}\\\"b\", "
           "\"n\": [1, 2.5e3, true, null]}}\n</tool_call>\nDone.",
           "<tool_call>\nnot json\n</tool_call> and text",
           "A plain answer with a < and a <tool and no call.",
       }) {
    ExpectStreamMatchesWhole(ToolCallFormat::kHermes, text);
  }
  for (const char* text : {
           "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
           "\"parameters\": {}}",
           "  {\"name\": \"get\", \"parameters\": {\"city\": \"Oslo\"}}",
           "The weather is sunny.",
           "{\"answer\": 42}",
       }) {
    ExpectStreamMatchesWhole(ToolCallFormat::kLlama3Json, text);
  }
  for (const char* text : {
           "[TOOL_CALLS][{\"name\": \"w\", \"arguments\": {\"l\": \"Paris\"}}, {\"name\": \"t\", "
           "\"arguments\": {}}]",
           "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]t[ARGS]{}",
           "[TOOL_CALLS] oops",
       }) {
    ExpectStreamMatchesWhole(ToolCallFormat::kMistral, text);
  }
}

TEST(ToolCallParserTest, StreamingHoldsBackAMarkerAndAnnouncesTheNameFirst) {
  ToolCallStream stream(ToolCallFormat::kHermes);
  EXPECT_EQ(stream.Add("Hi <tool_").content, "Hi");
  ToolCallStreamDelta d = stream.Add("call>{\"name\": \"get_weather\", \"arguments\": {\"ci");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, "{\"ci");
  d = stream.Add("ty\": \"Oslo\"}}</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].index, 0);
  EXPECT_EQ(d.calls[0].name, "");
  EXPECT_EQ(d.calls[0].arguments, "ty\": \"Oslo\"}");
  // The space before the call waited in case only calls followed it.
  d = stream.Finish();
  EXPECT_EQ(d.content, " ");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(stream.num_calls(), 1);
}

}  // namespace
}  // namespace pagoda
