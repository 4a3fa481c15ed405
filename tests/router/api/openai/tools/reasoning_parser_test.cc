#include "router/api/openai/tools/reasoning_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::Optional;

ReasoningStream::Delta Stream(ReasoningFormat format, bool inside,
                              const std::vector<std::string>& pieces) {
  ReasoningStream stream(format, inside);
  ReasoningStream::Delta all;
  auto add = [&](const ReasoningStream::Delta& d) {
    all.reasoning += d.reasoning;
    all.content += d.content;
  };
  for (const std::string& p : pieces) add(stream.Add(p));
  add(stream.Finish());
  return all;
}

TEST(ReasoningParserTest, Qwen3SplitsTheThinkBlockFromTheAnswer) {
  const ReasoningSplit s = SplitReasoning(ReasoningFormat::kQwen3, false,
                                          "<think>\nThe user greets me.\n</think>\n\nHello!");
  EXPECT_THAT(s.reasoning, Optional(std::string("\nThe user greets me.\n")));
  EXPECT_EQ(s.content, "Hello!");
}

TEST(ReasoningParserTest, Qwen3WithoutABlockIsAllContent) {
  const ReasoningSplit s = SplitReasoning(ReasoningFormat::kQwen3, false, "Hello <think> x");
  EXPECT_EQ(s.reasoning, std::nullopt);
  EXPECT_EQ(s.content, "Hello <think> x");
}

TEST(ReasoningParserTest, DeepSeekR1StartsInsideTheBlock) {
  EXPECT_TRUE(StartsInReasoning(ReasoningFormat::kDeepSeekR1, "<｜Assistant｜><think>\n"));
  EXPECT_TRUE(StartsInReasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(StartsInReasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n"));
  EXPECT_FALSE(StartsInReasoning(ReasoningFormat::kDeepSeekR1, "<｜Assistant｜></think>"));
  const ReasoningSplit s =
      SplitReasoning(ReasoningFormat::kDeepSeekR1, true, "Think hard.</think>The answer.");
  EXPECT_THAT(s.reasoning, Optional(std::string("Think hard.")));
  EXPECT_EQ(s.content, "The answer.");
  // Cut off while thinking: all reasoning.
  const ReasoningSplit cut = SplitReasoning(ReasoningFormat::kDeepSeekR1, true, "Still </thi");
  EXPECT_THAT(cut.reasoning, Optional(std::string("Still </thi")));
  EXPECT_EQ(cut.content, "");
}

TEST(ReasoningParserTest, StreamingSplitAnywhereMatchesTheWholeSplit) {
  struct Case {
    ReasoningFormat format;
    bool inside;
    std::string text;
  };
  for (const Case& c : std::vector<Case>{
           {ReasoningFormat::kQwen3, false, "<think>\nabc </ think\n</think>\n\nHello!"},
           {ReasoningFormat::kQwen3, false, "  <think>x</think>"},
           {ReasoningFormat::kQwen3, false, "<thinking> is not it"},
           {ReasoningFormat::kDeepSeekR1, true, "Think.</think> Answer </think> more"},
           {ReasoningFormat::kDeepSeekR1, true, "never closed </thin"},
           {ReasoningFormat::kNone, false, "<think>x</think>y"},
       }) {
    const ReasoningSplit whole = SplitReasoning(c.format, c.inside, c.text);
    for (size_t k = 0; k <= c.text.size(); ++k) {
      const ReasoningStream::Delta got =
          Stream(c.format, c.inside, {c.text.substr(0, k), c.text.substr(k)});
      EXPECT_EQ(got.reasoning, whole.reasoning.value_or("")) << c.text << " at " << k;
      EXPECT_EQ(got.content, whole.content) << c.text << " at " << k;
    }
  }
}

}  // namespace
}  // namespace pagoda
