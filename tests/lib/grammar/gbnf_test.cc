// GBNF as llama-server reads it: what parses, what is refused (with line and column), and
// which strings the matcher accepts, byte by byte and whole.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Grammar> Parse(std::string_view gbnf) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

// Whether `text` is a whole sentence of `gbnf`.
bool Matches(std::string_view gbnf, std::string_view text) {
  auto g = Parse(gbnf);
  if (g == nullptr) return false;
  GrammarMatcher m(g);
  return m.Accept(text) && m.IsComplete();
}

// Whether `text` can start a sentence of `gbnf`.
bool Prefix(std::string_view gbnf, std::string_view text) {
  GrammarMatcher m(Parse(gbnf));
  return m.Accept(text);
}

std::string ErrorOf(std::string_view gbnf, GrammarLimits limits = {}) {
  auto g = ParseGbnf(gbnf, limits);
  return g.ok() ? "ok" : std::string(g.status().message());
}

TEST(GbnfTest, LiteralsSequencesAndAlternatives) {
  const char* g = R"(root ::= "ab" ("c" | "de") # a comment
)";
  EXPECT_TRUE(Matches(g, "abc"));
  EXPECT_TRUE(Matches(g, "abde"));
  EXPECT_FALSE(Matches(g, "abd"));
  EXPECT_TRUE(Prefix(g, "abd"));
  EXPECT_FALSE(Prefix(g, "abx"));
  EXPECT_FALSE(Matches(g, "abcc"));
}

TEST(GbnfTest, EscapesInLiteralsAndClasses) {
  EXPECT_TRUE(
      Matches(R"(root ::= "\n\t\"\\\x41\u00e9\U0001F600")", "\n\t\"\\A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches(R"(root ::= [\]\-\x30]+)", "]-0]"));
  EXPECT_TRUE(Matches("root ::= \"caf\xC3\xA9\"", "caf\xC3\xA9"));
}

TEST(GbnfTest, ClassesCoverUtf8AndNegation) {
  const char* g = R"(root ::= [^"\\]*)";
  EXPECT_TRUE(Matches(g, "plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(Prefix(g, "a\""));
  EXPECT_FALSE(Prefix(g,
                      "\xC3"
                      "A"));                // a lead byte then no continuation
  EXPECT_FALSE(Prefix(g, "\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(Prefix(g, "\xC0\x80"));      // an overlong NUL
  EXPECT_TRUE(Matches(R"(root ::= [a-zé-ê]+)", "az\xC3\xA9\xC3\xAA"));
  EXPECT_FALSE(Prefix(R"(root ::= [a-zé-ê]+)", "\xC3\xAB"));
  EXPECT_TRUE(Matches("root ::= . . .", "a\xE2\x82\xAC\n"));
}

TEST(GbnfTest, Repetitions) {
  const char* g = R"(root ::= "a"{2} "b"{1,3} "c"{2,} "d"? "e"* "f"+ "g"{,2})";
  EXPECT_TRUE(Matches(g, "aabccf"));
  EXPECT_TRUE(Matches(g, "aabbbcccdeeefffgg"));
  EXPECT_FALSE(Matches(g, "abccf"));
  EXPECT_FALSE(Prefix(g, "aabbbb"));
  EXPECT_FALSE(Matches(g, "aabcf"));
  EXPECT_FALSE(Prefix(g, "aabccfggg"));
  EXPECT_TRUE(Matches(R"(root ::= ("ab" | "c"){2,3})", "abcab"));
  EXPECT_FALSE(Matches(R"(root ::= ("ab" | "c"){2,3})", "ababcc"));
}

TEST(GbnfTest, RulesRecursionAndMultilineAlternatives) {
  const char* g = R"g(
# balanced parentheses
root  ::= item*
item  ::= "(" root ")"
        | [a-z]
array ::= "[" (
    ws item
  )* "]"
ws ::= " "?
)g";
  EXPECT_TRUE(Matches(g, "(a(b)c)(d)"));
  EXPECT_FALSE(Matches(g, "(a(b)"));
  EXPECT_TRUE(Prefix(g, "(a(b)"));
  EXPECT_TRUE(Matches(g, ""));
}

TEST(GbnfTest, AmbiguityDoesNotMultiplyStacks) {
  // Each byte could be either alternative; stacks that are equal are one stack.
  GrammarMatcher m(Parse(R"(root ::= ("a" | "a" | [a-b])*)"));
  EXPECT_TRUE(m.Accept(std::string(5000, 'a')));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.status().ok());
}

TEST(GbnfTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ErrorOf("root ::= \"a\"\nfoo ::= \"b\" )"),
            "GBNF line 2 column 13: expected the end of the line");
  EXPECT_THAT(ErrorOf("root ::= \"abc"), HasSubstr("line 1 column 14: unterminated string"));
  EXPECT_THAT(ErrorOf("root ::= [a-"), HasSubstr("unterminated character class"));
  EXPECT_THAT(ErrorOf("root = \"a\""), HasSubstr("line 1 column 6: expected '::='"));
  EXPECT_THAT(ErrorOf("root ::= (\"a\""), HasSubstr("expected ')'"));
  EXPECT_THAT(ErrorOf("root ::= \"\\q\""), HasSubstr("column 11: unknown escape"));
  EXPECT_THAT(ErrorOf("root ::= [z-a]"), HasSubstr("out of order"));
  EXPECT_THAT(ErrorOf("root ::= \"\\uD800\""), HasSubstr("not a Unicode character"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{2"), HasSubstr("expected '}'"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{3,2}"), HasSubstr("max < min"));
}

TEST(GbnfTest, RefusesBadRules) {
  EXPECT_EQ(ErrorOf("root ::= foo"), "undefined rule 'foo'");
  EXPECT_EQ(ErrorOf("start ::= \"a\""), "grammar has no 'root' rule");
  EXPECT_THAT(ErrorOf("root ::= \"a\"\nroot ::= \"b\""), HasSubstr("rule 'root' defined twice"));
  EXPECT_EQ(ErrorOf("root ::= root \"a\" | \"b\""), "left recursion in rule 'root'");
  EXPECT_EQ(ErrorOf("root ::= x root\nx ::= \"a\"?"), "left recursion in rule 'root'");
  EXPECT_THAT(ErrorOf("root ::= \"a\" loop\nloop ::= \"b\" loop"),
              HasSubstr("derives no finite string"));
  EXPECT_THAT(ErrorOf("root ::= []"), HasSubstr("empty character class"));
}

TEST(GbnfTest, RefusesWhatPassesTheLimits) {
  // A bound is refused, not allocated.
  EXPECT_THAT(ErrorOf("root ::= \"a\"{0,100000}"),
              HasSubstr("repetition bound 100000 in rule 'root' exceeds 10000"));
  EXPECT_THAT(ErrorOf("root ::= \"a\"{99999999999}"), HasSubstr("repetition count too large"));
  GrammarLimits small;
  small.max_elements = 1000;
  EXPECT_THAT(ErrorOf("root ::= (\"ab\"{0,400}){0,400}", small), HasSubstr("grammar too large"));
  small.max_source_bytes = 10;
  EXPECT_THAT(ErrorOf("root ::= \"abcdefgh\"", small), HasSubstr("the limit is 10"));
  EXPECT_THAT(ErrorOf(std::string(200, '(') + "root ::= \"a\""), HasSubstr("expected a rule name"));
  EXPECT_THAT(ErrorOf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')),
              HasSubstr("nested too deep"));
}

// A ten-token vocabulary whose token 7 is "<t>" and 8 "</t>" (special: no bytes).
GbnfTokens TenTokens() {
  return {.vocab_size = 10, .find = [](std::string_view text) {
            return text == "<t>" ? 7 : text == "</t>" ? 8 : -1;
          }};
}

TEST(GbnfTest, TokenTerminalsMatchOneWholeTokenId) {
  const GbnfTokens tokens = TenTokens();
  auto g = ParseGbnf("root ::= <t> \"a\" !<[8]>* </t> | <[3]>", {}, &tokens);
  ASSERT_TRUE(g.ok()) << g.status();
  GrammarMatcher m(*g);
  EXPECT_FALSE(m.Accept("<t>")) << "a token terminal takes no bytes";
  EXPECT_FALSE(m.AcceptToken(8, "")) << "not the token named";
  EXPECT_FALSE(m.AcceptToken(5, "")) << "a special token is not the empty string";
  ASSERT_TRUE(m.AcceptToken(7, ""));
  ASSERT_TRUE(m.AcceptToken(2, "a")) << "bytes as ever";
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.AcceptToken(5, "xyz")) << "!<[8]> takes any other token, whatever its bytes";
  ASSERT_TRUE(m.AcceptToken(7, ""));
  ASSERT_TRUE(m.AcceptToken(8, ""));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.CanContinue());
  GrammarMatcher by_id(*g);
  ASSERT_TRUE(by_id.AcceptToken(3, "c")) << "<[3]> by id, whatever its bytes";
  EXPECT_TRUE(by_id.IsComplete());
  // A token whose bytes the grammar takes and whose id a terminal names: both ways live.
  auto both = ParseGbnf("root ::= \"ab\" \"x\" | <[4]> \"y\"", {}, &tokens);
  ASSERT_TRUE(both.ok()) << both.status();
  GrammarMatcher m2(*both);
  ASSERT_TRUE(m2.AcceptToken(4, "ab"));
  GrammarMatcher x = m2, y = m2;
  EXPECT_TRUE(x.Accept("x") && x.IsComplete());
  EXPECT_TRUE(y.Accept("y") && y.IsComplete());
}

TEST(GbnfTest, TokenTerminalErrorsNameTheToken) {
  const GbnfTokens tokens = TenTokens();
  auto error = [&](std::string_view gbnf, const GbnfTokens* t) {
    auto g = ParseGbnf(gbnf, {}, t);
    return g.ok() ? "ok" : std::string(g.status().message());
  };
  EXPECT_EQ(error("root ::= <[10]>", &tokens),
            "GBNF line 1 column 10: token id 10 is outside the vocabulary (10 tokens)");
  EXPECT_THAT(error("root ::= <[99999999999999999999]>", &tokens), HasSubstr("outside"));
  EXPECT_THAT(error("root ::= <[1x]>", &tokens), HasSubstr("bad token id in <[1x]>"));
  EXPECT_THAT(error("root ::= !<think>", &tokens),
              HasSubstr("token <think> is not one token of the vocabulary"));
  EXPECT_THAT(error("root ::= <t", &tokens), HasSubstr("unterminated token"));
  EXPECT_THAT(error("root ::= <t>", nullptr), HasSubstr("token <t> needs a model's vocabulary"));
  EXPECT_EQ(error("root ::= <t>+ !</t>", &tokens), "ok");
}

TEST(GbnfTest, StateExplosionFailsTheSequenceCleanly) {
  // Every prefix of a's splits into more ways to finish; the limit stops it.
  auto g = Parse(R"(root ::= x{0,200} "b"
x ::= "a" | "a" "a")");
  MatcherLimits limits;
  limits.max_stacks = 64;
  GrammarMatcher m(g, limits);
  bool ok = true;
  for (int i = 0; i < 200 && ok; ++i) ok = m.Accept("a");
  EXPECT_FALSE(ok);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(m.Accept("b"));
}

}  // namespace
}  // namespace pagoda
