// The token mask against the definition: a token is allowed exactly when the matcher accepts
// its bytes (EOS exactly when complete), on real vocabularies, at every state of random walks
// that pick allowed tokens.
#include "lib/grammar/token_masker.h"

#include <random>

#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "tests/lib/grammar/test_vocabulary.h"

namespace pagoda {
namespace {

constexpr char kJsonGbnf[] = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)";

bool Bit(const std::vector<uint64_t>& mask, int id) { return (mask[id >> 6] >> (id & 63)) & 1; }

// The mask by definition: every token tried on a copy of the matcher.
std::vector<uint64_t> BruteForceMask(const GrammarMatcher& m, const TokenVocabulary& v) {
  std::vector<uint64_t> mask(v.mask_words(), 0);
  for (int id = 0; id < v.size(); ++id) {
    bool allowed;
    if (std::find(v.eos_ids().begin(), v.eos_ids().end(), id) != v.eos_ids().end()) {
      allowed = m.IsComplete();
    } else {
      GrammarMatcher copy = m;
      allowed = !v.bytes(id).empty() && copy.Accept(v.bytes(id));
    }
    if (allowed) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
  return mask;
}

std::vector<int> Allowed(const std::vector<uint64_t>& mask, int n) {
  std::vector<int> ids;
  for (int id = 0; id < n; ++id) {
    if (Bit(mask, id)) ids.push_back(id);
  }
  return ids;
}

// Walks `gbnf` with random allowed tokens until EOS; checks the mask against brute force
// every `check_every` steps. Returns the text.
std::string RandomWalk(TokenMasker& masker, std::shared_ptr<const Grammar> g, std::mt19937& rng,
                       int check_every, int max_steps = 400) {
  const TokenVocabulary& v = masker.vocabulary();
  GrammarMatcher m(g);
  std::vector<uint64_t> mask(v.mask_words());
  std::string text;
  for (int step = 0; step < max_steps; ++step) {
    EXPECT_TRUE(masker.FillMask(m, mask).ok());
    if (check_every > 0 && step % check_every == 0) {
      EXPECT_EQ(Allowed(mask, v.size()), Allowed(BruteForceMask(m, v), v.size()))
          << "after \"" << text << "\"";
    }
    const std::vector<int> ids = Allowed(mask, v.size());
    if (ids.empty()) {
      ADD_FAILURE() << "no token allowed after \"" << text << "\"";
      return text;
    }
    // Past half the steps, EOS whenever it is allowed, to end the walk.
    const int eos = v.eos_ids()[0];
    if (step > max_steps / 2 && Bit(mask, eos)) return text;
    const int id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
    if (id == eos) return text;
    EXPECT_TRUE(m.Accept(v.bytes(id))) << v.bytes(id);
    text += v.bytes(id);
  }
  return text;
}

class TokenMaskerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenMaskerTest, MasksEqualTheirDefinitionAlongRandomWalks) {
  auto v = testing::LoadVocabulary(GetParam());
  ASSERT_NE(v, nullptr);
  auto g = ParseGbnf(kJsonGbnf);
  ASSERT_TRUE(g.ok()) << g.status();
  TokenMasker masker(*g, v);
  std::mt19937 rng(7);
  for (int walk = 0; walk < 3; ++walk) {
    const std::string text = RandomWalk(masker, *g, rng, /*check_every=*/7, /*max_steps=*/60);
    EXPECT_FALSE(text.empty());
  }
}

TEST_P(TokenMaskerTest, SmallContextAndNoCacheGiveTheSameMasks) {
  auto v = testing::LoadVocabulary(GetParam());
  ASSERT_NE(v, nullptr);
  auto g = ParseGbnf(kJsonGbnf);
  ASSERT_TRUE(g.ok());
  TokenMasker cached(*g, v);
  TokenMaskerOptions options;
  options.context_frames = 1;
  options.cache_bytes = 0;
  TokenMasker uncached(*g, v, options);
  GrammarMatcher m(*g);
  std::vector<uint64_t> a(v->mask_words()), b(v->mask_words());
  for (std::string_view piece : {"{", "\"k", "e\\u00e9", "y\"", ": ", "[1", "2.5", "e-3", ", {",
                                 "\"x\":", " \"s\"", "}", "]", "}"}) {
    ASSERT_TRUE(m.Accept(piece)) << piece;
    ASSERT_TRUE(cached.FillMask(m, a).ok());
    ASSERT_TRUE(uncached.FillMask(m, b).ok());
    EXPECT_EQ(a, b) << "after " << piece;
  }
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(Bit(a, v->eos_ids()[0]));
  EXPECT_EQ(uncached.cached_entries(), 0u);
}

// The memoized walk (default), the matcher-per-node walk (memo_sets 0) and a memo too small
// for the grammar (which gives up mid-walk and falls back) agree, on a grammar with bounded
// repetitions (a distinct stack per count) beside the JSON one.
TEST_P(TokenMaskerTest, MemoizedWalkEqualsTheStepByStepWalk) {
  auto v = testing::LoadVocabulary(GetParam());
  ASSERT_NE(v, nullptr);
  std::string gbnf = kJsonGbnf;
  const std::string_view root = "root   ::= object";
  gbnf.replace(gbnf.find(root), root.size(), R"(root ::= object | "<" [a-z "]{0,12} ">")");
  auto g = ParseGbnf(gbnf);
  ASSERT_TRUE(g.ok()) << g.status();
  TokenMaskerOptions step_by_step, tiny_memo;
  step_by_step.memo_sets = 0;
  tiny_memo.memo_sets = 3;
  TokenMasker memo(*g, v), plain(*g, v, step_by_step), tiny(*g, v, tiny_memo);
  std::vector<uint64_t> a(v->mask_words()), b(v->mask_words()), c(v->mask_words());
  for (const auto& pieces : std::vector<std::vector<std::string_view>>{
           {"{", "\"k", "e\\u00e9", "y\"", ": ", "[1", "2.5", "e-3", "]", "}"},
           {"<", "ab", " c", "\"d", "efgh", "ij", ">"}}) {
    GrammarMatcher m(*g);
    for (std::string_view piece : pieces) {
      ASSERT_TRUE(m.Accept(piece)) << piece;
      ASSERT_TRUE(memo.FillMask(m, a).ok());
      ASSERT_TRUE(plain.FillMask(m, b).ok());
      ASSERT_TRUE(tiny.FillMask(m, c).ok());
      EXPECT_EQ(a, b) << "after " << piece;
      EXPECT_EQ(a, c) << "after " << piece;
      EXPECT_GT(Allowed(a, v->size()).size(), 0u) << "after " << piece;
    }
    EXPECT_TRUE(m.IsComplete());
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, TokenMaskerTest,
                         ::testing::Values("models/llama2-tokenizer/tokenizer.json",
                                           "models/llama3-tokenizer/tokenizer.json"),
                         [](const auto& info) {
                           return info.param.find("llama2") != std::string::npos ? "Llama2"
                                                                                 : "Llama3";
                         });

// Token terminals: a stack on one allows that token alone (a special one, which no byte
// walk allows), or every token but it and EOS; other stacks add theirs.
TEST(TokenMaskerTokensTest, TokenTerminalsAllowTheirTokenOnly) {
  auto v = TokenVocabulary::Create({"a", "b", "ab", "", "", "<x>"}, {4});  // 3: special; 4: EOS
  ASSERT_TRUE(v.ok());
  const GbnfTokens tokens{.vocab_size = 6,
                          .find = [](std::string_view t) { return t == "<s3>" ? 3 : -1; }};
  auto g = ParseGbnf(R"(root ::= <s3> "ab" | "<x" "y" | !<[3]> "b")", {}, &tokens);
  ASSERT_TRUE(g.ok()) << g.status();
  TokenMasker masker(*g, *v);
  GrammarMatcher m(*g);
  std::vector<uint64_t> mask(1);
  ASSERT_TRUE(masker.FillMask(m, mask).ok());
  // 3 by the first alternative, every token but 3 and EOS by the third.
  EXPECT_EQ(Allowed(mask, 6), (std::vector<int>{0, 1, 2, 3, 5}));
  GrammarMatcher special(*g);
  ASSERT_TRUE(special.AcceptToken(3, ""));
  ASSERT_TRUE(masker.FillMask(special, mask).ok());
  EXPECT_EQ(Allowed(mask, 6), (std::vector<int>{0, 2}));
  auto only = ParseGbnf("root ::= <[3]> \"a\" | \"b\" <s3>", {}, &tokens);
  ASSERT_TRUE(only.ok()) << only.status();
  TokenMasker only_masker(*only, *v);
  GrammarMatcher m2(*only);
  ASSERT_TRUE(only_masker.FillMask(m2, mask).ok());
  EXPECT_EQ(Allowed(mask, 6), (std::vector<int>{1, 3}));
  ASSERT_TRUE(m2.AcceptToken(1, "b"));
  ASSERT_TRUE(only_masker.FillMask(m2, mask).ok());
  EXPECT_EQ(Allowed(mask, 6), (std::vector<int>{3}));
  ASSERT_TRUE(m2.AcceptToken(3, ""));
  ASSERT_TRUE(only_masker.FillMask(m2, mask).ok());
  EXPECT_EQ(Allowed(mask, 6), (std::vector<int>{4})) << "complete: EOS only";
}

TEST(TokenVocabularyTest, TrieSkipsSubtreesAndKeepsDuplicates) {
  auto v = TokenVocabulary::Create({"", "ab", "a", "abc", "b", "a", ""}, {6});
  ASSERT_TRUE(v.ok());
  const auto& nodes = (*v)->nodes();
  ASSERT_EQ(nodes.size(), 4u);  // a, ab, abc, b
  EXPECT_EQ(nodes[0].end, 3u);
  EXPECT_EQ(nodes[0].tokens_end - nodes[0].tokens_begin, 2u);  // ids 2 and 5
  EXPECT_EQ(nodes[3].byte, 'b');
  EXPECT_FALSE(TokenVocabulary::Create({"a"}, {3}).ok());
}

}  // namespace
}  // namespace pagoda
