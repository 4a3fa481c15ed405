// BpeSpec: what both loaders build; HfTokenizer::Create checks it and encodes with it.
#include "lib/text/bpe_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/hf_tokenizer.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// "a", "b", "ab" and a special token, SentencePiece style.
BpeSpec Tiny() {
  BpeSpec spec;
  spec.vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}, {"ab", 3}};
  spec.merges = {{"a", "b"}};
  spec.added_tokens = {{"<s>", 4}, {"", 5}};
  spec.unk_token = "<unk>";
  return spec;
}

TEST(BpeSpecTest, TokenIdsAreTheLowestIdOfEachPieceIgnoringEmptyAddedTokens) {
  BpeSpec spec = Tiny();
  spec.vocab.push_back({"b", 0});
  const auto ids = spec.TokenIds();
  EXPECT_EQ(ids.at("b"), 0);
  EXPECT_EQ(ids.at("<s>"), 4);
  EXPECT_FALSE(ids.contains(""));
}

TEST(BpeSpecTest, MergesSplitAtTheFirstSpace) {
  std::pair<std::string, std::string> pieces;
  ASSERT_TRUE(SplitMerge("a b c", &pieces));
  EXPECT_EQ(pieces, std::make_pair(std::string("a"), std::string("b c")));
  EXPECT_FALSE(SplitMerge("ab", &pieces));
}

TEST(BpeSpecTest, CreateEncodesWithTheSpecsMergesAndAddedTokens) {
  BpeSpec spec = Tiny();
  spec.prefix_ids = {4};
  auto t = HfTokenizer::Create(spec, "tiny");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Encode("ab<s>ba?"), std::vector<int>({3, 4, 2, 1, 0}));
  EXPECT_EQ((*t)->Encode("a", /*add_special_tokens=*/true), std::vector<int>({4, 1}));
  EXPECT_EQ((*t)->bos_id(), 4) << "guessed from the name <s>";
}

TEST(BpeSpecTest, CreateRefusesAnInconsistentSpecNamingIt) {
  BpeSpec merge = Tiny();
  merge.merges.push_back({"b", "a"});
  EXPECT_THAT(HfTokenizer::Create(merge, "tiny").status().message(),
              HasSubstr("tiny: merge \"b a\" uses a token not in the vocabulary"));
  BpeSpec id = Tiny();
  id.vocab.push_back({"c", -1});
  EXPECT_THAT(HfTokenizer::Create(id, "tiny").status().message(),
              HasSubstr("token id -1 of c is out of range"));
  BpeSpec special = Tiny();
  special.suffix_ids = {9};
  EXPECT_THAT(HfTokenizer::Create(special, "tiny").status().message(),
              HasSubstr("special token id 9 is outside the vocabulary"));
}

}  // namespace
}  // namespace pagoda
