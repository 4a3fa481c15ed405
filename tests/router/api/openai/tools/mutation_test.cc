// The parsers on mutated model outputs (bit flips, byte writes, cuts, repeated spans) fed
// whole and in random pieces: never a crash, and every call they return has arguments that
// a JSON parser accepts as an object.
#include <random>
#include <string>
#include <vector>

#include "common/json.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/api/openai/openai_chat_output.h"
#include "router/api/openai/tools/tool_call_parser.h"

namespace pagoda {
namespace {

std::string Mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 5) {
      case 0:
        s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:
        s[at] = "{}[]\",:;<>/\\ 0-e."[rng() % 18];
        break;
      case 2:
        s.resize(at);
        break;
      case 3:
        s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 16));
        break;
      default:
        s.erase(at, 1 + rng() % 8);
        break;
    }
  }
  return s;
}

TEST(ToolCallMutationTest, MutatedOutputsNeverCrashAndCallsAreJsonObjects) {
  const std::vector<std::pair<ToolCallFormat, std::string>> seeds = {
      {ToolCallFormat::kHermes,
       "Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, -2.5e+3, true, null], "
       "\"b\": \"x\\\"\\u00e9\"}}\n</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": "
       "{}}</tool_call>"},
      {ToolCallFormat::kLlama3Json,
       "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"n\": 0.5, \"o\": {\"p\": []}}}; "
       "{\"name\": \"g\", \"parameters\": {}}"},
      {ToolCallFormat::kMistral,
       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"l\": \"Paris\"}}, {\"name\": \"g\", "
       "\"arguments\": {\"x\": 1}}] ok[TOOL_CALLS]h[ARGS]{\"y\": -0}"},
  };
  std::mt19937 rng(25);
  int calls = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    const auto& [format, seed] = seeds[iteration % seeds.size()];
    const std::string text = Mutate(seed, rng);
    for (const ToolCall& c : ParseToolCalls(format, text).calls) {
      ++calls;
      EXPECT_TRUE(nlohmann::json::accept(c.arguments)) << text;
      EXPECT_EQ(c.arguments.front(), '{') << text;
      EXPECT_FALSE(c.name.empty()) << text;
    }
    // Streamed in random pieces, through reasoning too.
    ChatOutputOptions options;
    options.tool_format = format;
    options.reasoning = ReasoningFormat::kQwen3;
    ChatOutput output(options);
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + rng() % 12;
      output.Delta(std::string_view(text).substr(i, n));
      i += n;
    }
    output.Finish();
  }
  EXPECT_GT(calls, 1000) << "most mutations leave some call whole";
}

TEST(ChatOutputTest, ReasoningThenCallsWholeAndStreamed) {
  ChatOutputOptions options;
  options.tool_format = ToolCallFormat::kHermes;
  options.reasoning = ReasoningFormat::kQwen3;
  const std::string text =
      "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
      "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  bool calls = false;
  const OrderedJson m = ChatOutput::Message(options, text, &calls);
  EXPECT_TRUE(calls);
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "\nThe user wants the weather.\n");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
  ChatOutput stream(options);
  std::string reasoning, arguments, name;
  auto add = [&](const OrderedJson& d) {
    EXPECT_FALSE(d.contains("content")) << d;
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    for (const auto& c : d.value("tool_calls", OrderedJson::array())) {
      if (c.contains("id")) name += c["function"]["name"].get<std::string>();
      arguments += c["function"]["arguments"].get<std::string>();
    }
  };
  for (char c : text) add(stream.Delta(std::string(1, c)));
  add(stream.Finish());
  EXPECT_TRUE(stream.has_tool_calls());
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, m["tool_calls"][0]["function"]["arguments"]);
}

}  // namespace
}  // namespace pagoda
