#include "router/api/text_assembler.h"

#include "gtest/gtest.h"
#include "lib/text/llama2c_tokenizer.h"
#include "lib/text/utf8.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

class TextAssemblerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Llama2cTokenizer::Load(testing::Stories260KTokenizer());
    ASSERT_TRUE(t.ok());
    tok_ = *std::move(t);
  }
  // Feeds `text`'s tokens one by one; returns what was sent and whether it stopped.
  std::pair<std::string, bool> Run(const std::string& text, std::vector<std::string> stops) {
    TextAssembler a(tok_.get(), 1, std::move(stops));
    std::string sent;
    for (int id : tok_->Encode(text)) sent += a.Add(id);
    sent += a.Flush();
    return {sent, a.stopped()};
  }
  std::unique_ptr<Llama2cTokenizer> tok_;
};

TEST_F(TextAssemblerTest, WithoutStopsEverythingIsSent) {
  EXPECT_EQ(Run("Once upon a time", {}), std::make_pair(std::string("Once upon a time"), false));
}

TEST_F(TextAssemblerTest, CutsBeforeAStopStringSplitAcrossTokens) {
  // "upon" is several tokens in this small vocabulary; the stop spans them.
  const auto [sent, stopped] = Run("Once upon a time, there was", {"pon a"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(sent, "Once u");
}

TEST_F(TextAssemblerTest, EarliestOfSeveralStopsWins) {
  const auto [sent, stopped] = Run("Lily and Tom went to the park.", {"park", "Tom"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(sent, "Lily and ");
}

TEST_F(TextAssemblerTest, HeldBackTextIsReleasedWhenNoStopCompletes) {
  const auto [sent, stopped] = Run("a time to play", {"timex"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(sent, "a time to play");
}

TEST_F(TextAssemblerTest, NeverSplitsACharacter) {
  TextAssembler a(tok_.get(), 1, {"zz"});
  for (int id : tok_->Encode("é🦙é")) {
    const std::string piece = a.Add(id);
    EXPECT_EQ(ValidUtf8(piece), piece);
  }
}

}  // namespace
}  // namespace pagoda
