#include "lib/text/llama2c_tokenizer.h"

#include <cstring>

#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/incremental_decoder.h"
#include "lib/text/utf8.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Llama2cTokenizer> Load(const std::string& path) {
  auto t = Llama2cTokenizer::Load(path);
  CHECK(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<int> WithBos(const Tokenizer& t, const std::string& text) {
  std::vector<int> ids = {t.bos_id()};
  for (int id : t.Encode(text)) ids.push_back(id);
  return ids;
}

TEST(Llama2cTokenizerTest, Tok512EncodesGoldenPromptsLikeRunC) {
  auto tok = Load(testing::Stories260KTokenizer());
  EXPECT_EQ(tok->vocab_size(), 512);
  for (const auto& c : testing::LoadGoldenCases()) {
    EXPECT_EQ(WithBos(*tok, c.prompt), c.prompt_ids) << c.prompt;
  }
  // More encodings from the model's SOURCE.md.
  EXPECT_THAT(WithBos(*tok, "Hello world"), ElementsAre(1, 346, 306, 414, 263, 304, 341));
  EXPECT_THAT(WithBos(*tok, "a  b"), ElementsAre(1, 261, 410, 268));
  EXPECT_THAT(WithBos(*tok, ""), ElementsAre(1));
}

TEST(Llama2cTokenizerTest, Llama2TokenizerEncodesGoldenPrompts) {
  auto tok = Load(testing::SharedPath("models/llama2-tokenizer/tokenizer.bin"));
  EXPECT_EQ(tok->vocab_size(), 32000);
  for (const auto& c : testing::LoadGoldenCases()) {
    EXPECT_EQ(WithBos(*tok, c.prompt), c.llama2_prompt_ids) << c.prompt;
  }
}

TEST(Llama2cTokenizerTest, DecodeRoundTripsVariedText) {
  for (const std::string& path : {testing::SharedPath("models/llama2-tokenizer/tokenizer.bin"),
                                  testing::Stories260KTokenizer()}) {
    auto tok = Load(path);
    for (const std::string& text : std::vector<std::string>{
             "Hello world", "  leading and trailing spaces  ", "tabs\tand\nnewlines\n\n",
             "digits 0123456789 and 3.14159", "Ünïcödé façade naïve", "日本語のテキスト",
             "Привет, мир", "emoji 🦙🚀 mixed", "a  b   c", "<0x41> looks like a byte token",
             "\xE2\x82\xAC euro"}) {
      EXPECT_EQ(tok->Decode(tok->Encode(text)), text) << path << ": " << text;
    }
  }
}

TEST(Llama2cTokenizerTest, UnknownCharactersFallBackToBytes) {
  auto tok = Load(testing::Stories260KTokenizer());
  // 🦙 is not in a 512-token vocabulary: its 4 UTF-8 bytes become <0xF0> <0x9F> <0xA6> <0x99>.
  const std::vector<int> ids = tok->Encode("🦙");
  ASSERT_EQ(ids.size(), 5u);  // dummy-prefix space + 4 bytes
  EXPECT_THAT(std::vector<int>(ids.begin() + 1, ids.end()),
              ElementsAre(0xF0 + 3, 0x9F + 3, 0xA6 + 3, 0x99 + 3));
}

TEST(Llama2cTokenizerTest, MalformedFilesAreErrors) {
  const std::string dir = testing::TempDir();
  const std::string good = testing::ReadFile(testing::Stories260KTokenizer());
  auto load = [&](const std::string& data, int vocab = 0) {
    testing::WriteFile(dir + "/tok.bin", data);
    return Llama2cTokenizer::Load(dir + "/tok.bin", vocab).status();
  };
  EXPECT_THAT(load(good.substr(0, 2)).message(), HasSubstr("header"));
  EXPECT_THAT(load(good.substr(0, good.size() - 3)).message(), HasSubstr("entry 511"));
  std::string bad_len = good;
  const int32_t huge = 1 << 20;
  std::memcpy(&bad_len[4 + 4], &huge, 4);  // first entry's length
  EXPECT_THAT(load(bad_len).message(), HasSubstr("length"));
  EXPECT_THAT(load(good, 32000).message(), HasSubstr("does not match"));
  EXPECT_TRUE(load(good, 512).ok());
  EXPECT_EQ(Llama2cTokenizer::Load(dir + "/missing.bin").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(IncrementalDecoderTest, EmitsOnlyWholeCharacters) {
  auto tok = Load(testing::Stories260KTokenizer());
  const std::vector<int> ids = tok->Encode("é🦙!");
  IncrementalDecoder decoder(tok.get(), tok->bos_id());
  std::string text;
  for (int id : ids) {
    const std::string piece = decoder.Append(id);
    EXPECT_EQ(ValidUtf8(piece), piece) << "half a character, or invalid bytes, was emitted";
    text += piece;
  }
  text += decoder.Flush();
  EXPECT_EQ(text, "é🦙!");
}

}  // namespace
}  // namespace pagoda
