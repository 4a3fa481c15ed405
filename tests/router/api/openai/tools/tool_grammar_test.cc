#include "router/api/openai/tools/tool_grammar.h"

#include <string>
#include <vector>

#include "common/json.h"
#include "common/model/model_config.h"
#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/text/tokenizer_loader.h"
#include "router/api/constraint_compiler.h"
#include "router/api/openai/tools/tool_call_parser.h"
#include "router/core/constraint.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

std::vector<ToolSpec> WeatherAndTime() {
  return {
      {"get_weather", OrderedJson::parse(R"({"type": "object", "properties": {
          "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]})")},
      {"get_time", nullptr},
  };
}

// Whether the grammar accepts `text` whole.
bool Accepts(const std::string& gbnf, const std::string& text) {
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnf(gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status() << "\n" << gbnf;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(*grammar);
  return matcher.Accept(text) && matcher.IsComplete();
}

TEST(ToolGrammarTest, HermesCallsOfTheToolsAndNothingElse) {
  absl::StatusOr<std::string> one =
      ToolCallGbnf(ToolCallFormat::kHermes, WeatherAndTime(), /*parallel=*/false);
  ASSERT_TRUE(one.ok()) << one.status();
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": "
      "\"c\"}}\n</tool_call>";
  EXPECT_TRUE(Accepts(*one, call));
  EXPECT_TRUE(Accepts(*one,
                      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": "
                      "\"UTC\"}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(*one, call + "\n" + call)) << "one call only";
  EXPECT_FALSE(Accepts(*one,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"unit\": \"c\"}}\n</tool_call>"))
      << "city is required";
  EXPECT_FALSE(Accepts(*one, "<tool_call>\n{\"name\": \"rm\", \"arguments\": {}}\n</tool_call>"));
  absl::StatusOr<std::string> many =
      ToolCallGbnf(ToolCallFormat::kHermes, WeatherAndTime(), /*parallel=*/true);
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_TRUE(Accepts(*many, call + "\n" + call));
  // What the grammar makes, the parser reads.
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kHermes, call + "\n" + call).calls.size(), 2u);
}

TEST(ToolGrammarTest, Llama3AndMistralFrames) {
  absl::StatusOr<std::string> llama =
      ToolCallGbnf(ToolCallFormat::kLlama3Json, WeatherAndTime(), /*parallel=*/true);
  ASSERT_TRUE(llama.ok()) << llama.status();
  const std::string call = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  EXPECT_TRUE(Accepts(*llama, call + "; " + call));
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kLlama3Json, call + "; " + call).calls.size(), 2u);
  absl::StatusOr<std::string> mistral =
      ToolCallGbnf(ToolCallFormat::kMistral, WeatherAndTime(), /*parallel=*/false);
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  const std::string m =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]";
  EXPECT_TRUE(Accepts(*mistral, m));
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kMistral, m).calls.size(), 1u);
}

TEST(ToolGrammarTest, SchemasWithDefinitionsKeepTheirRefs) {
  const std::vector<ToolSpec> tools = {
      {"add", OrderedJson::parse(R"({"type": "object", "$defs": {"n": {"type": "integer"}},
          "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#/$defs/n"}},
          "required": ["a", "b"]})")},
      {"tree", OrderedJson::parse(R"({"type": "object", "properties": {
          "kids": {"type": "array", "items": {"$ref": "#"}}}})")},
  };
  absl::StatusOr<std::string> gbnf = ToolCallGbnf(ToolCallFormat::kHermes, tools, false);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  EXPECT_TRUE(Accepts(
      *gbnf,
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
  EXPECT_FALSE(Accepts(
      *gbnf,
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5, \"b\": 2}}\n</tool_call>"));
  EXPECT_TRUE(Accepts(*gbnf,
                      "<tool_call>\n{\"name\": \"tree\", \"arguments\": {\"kids\": [{\"kids\": "
                      "[]}]}}\n</tool_call>"));
}

// Qwen3's tokenizer has <tool_call> and </tool_call> as single added tokens: a forced call
// starts with that token, the one the model was trained to write, and no piece spells it.
TEST(ToolGrammarTest, QwenMarkersAreTheirSpecialTokens) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      LoadTokenizer(testing::SharedPath("models/qwen3-tokenizer/tokenizer.json"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  ModelConfig config;
  config.vocab_size = (*tok)->vocab_size();
  config.eos_ids = {(*tok)->eos_id()};
  ConstraintCompiler compiler(tok->get(), config);
  const int open = compiler.SpecialTokenId("<tool_call>");
  const int close = compiler.SpecialTokenId("</tool_call>");
  EXPECT_EQ(open, 151657);
  EXPECT_EQ(close, 151658);
  EXPECT_EQ(compiler.SpecialTokenId("<tool"), -1);
  EXPECT_EQ(compiler.SpecialTokenId("hello"), -1) << "one token, but not an added one";
  absl::StatusOr<std::string> gbnf =
      ToolCallGbnf(ToolCallFormat::kHermes, WeatherAndTime(), /*parallel=*/false,
                   [&](std::string_view text) { return compiler.SpecialTokenId(text); });
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  absl::StatusOr<std::shared_ptr<const Constraint>> c = compiler.Compile(*gbnf, "tool_choice");
  ASSERT_TRUE(c.ok()) << c.status();
  GrammarMatcher m((*c)->grammar);
  std::vector<uint64_t> mask, words;
  std::vector<int> ids;
  ASSERT_TRUE(FillAllowed(*(*c)->masker, m, &mask, &ids, &words).ok());
  EXPECT_EQ(ids, std::vector<int>{open});
  // Through the call's JSON, then </tool_call> the token, then EOS.
  ASSERT_TRUE(m.AcceptToken(open, ""));
  const std::string json = "\n{\"name\": \"get_time\", \"arguments\": {}}\n";
  for (int id : (*tok)->Encode(json)) {
    ASSERT_TRUE(m.AcceptToken(id, (*tok)->TokenBytes(-1, id))) << id;
  }
  ASSERT_TRUE(FillAllowed(*(*c)->masker, m, &mask, &ids, &words).ok());
  EXPECT_EQ(ids, std::vector<int>{close});
  ASSERT_TRUE(m.AcceptToken(close, ""));
  ASSERT_TRUE(FillAllowed(*(*c)->masker, m, &mask, &ids, &words).ok());
  EXPECT_EQ(ids, std::vector<int>{(*tok)->eos_id()});
  // Byte terminals never take the token's text: a JSON-schema string cannot hold it.
  EXPECT_EQ(compiler.Vocabulary().value()->bytes(open), "");
}

// A tokenizer with [ARGS] (Mistral Small 3.2's) gets its form, [TOOL_CALLS]name[ARGS]{...},
// both markers as tokens; the parser reads what it makes.
TEST(ToolGrammarTest, MistralArgsFormWhenTheTokenizerHasArgs) {
  const SpecialTokenIds mistral32 = [](std::string_view t) {
    return t == "[TOOL_CALLS]" ? 5 : t == "[ARGS]" ? 6 : -1;
  };
  const GbnfTokens tokens{.vocab_size = 10, .find = nullptr};
  for (bool parallel : {false, true}) {
    absl::StatusOr<std::string> gbnf =
        ToolCallGbnf(ToolCallFormat::kMistral, WeatherAndTime(), parallel, mistral32);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnf(*gbnf, {}, &tokens);
    ASSERT_TRUE(grammar.ok()) << grammar.status() << "\n" << *gbnf;
    GrammarMatcher m(*grammar);
    ASSERT_TRUE(m.AcceptToken(5, ""));
    EXPECT_FALSE(GrammarMatcher(m).Accept("get_weather\"")) << "a bare name";
    ASSERT_TRUE(m.Accept("get_weather"));
    ASSERT_TRUE(m.AcceptToken(6, ""));
    EXPECT_FALSE(GrammarMatcher(m).Accept("{}")) << "city is required";
    ASSERT_TRUE(m.Accept("{\"city\": \"Oslo\"}"));
    EXPECT_TRUE(m.IsComplete());
    GrammarMatcher second = m;
    EXPECT_EQ(second.AcceptToken(5, "") && second.Accept("get_time") && second.AcceptToken(6, "") &&
                  second.Accept("{}") && second.IsComplete(),
              parallel);
  }
  const std::string text =
      "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[ARGS]{}";
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kMistral, text).calls.size(), 2u);
  // Without [ARGS], the list form, [TOOL_CALLS] a token.
  absl::StatusOr<std::string> list =
      ToolCallGbnf(ToolCallFormat::kMistral, WeatherAndTime(), false,
                   [](std::string_view t) { return t == "[TOOL_CALLS]" ? 5 : -1; });
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->starts_with("root ::= <[5]> \"[\"")) << *list;
  absl::StatusOr<std::shared_ptr<const Grammar>> list_grammar = ParseGbnf(*list, {}, &tokens);
  ASSERT_TRUE(list_grammar.ok()) << list_grammar.status();
  GrammarMatcher lm(*list_grammar);
  EXPECT_FALSE(GrammarMatcher(lm).Accept("[TOOL_CALLS]")) << "the token, not its text";
  EXPECT_TRUE(lm.AcceptToken(5, "") && lm.Accept("[{\"name\": \"get_time\", \"arguments\": {}}]") &&
              lm.IsComplete());
}

TEST(ToolGrammarTest, RefusesWhatItCannotEnforce) {
  EXPECT_FALSE(ToolCallGbnf(ToolCallFormat::kNone, WeatherAndTime(), false).ok());
  EXPECT_FALSE(ToolCallGbnf(ToolCallFormat::kHermes,
                            {{"f", OrderedJson::parse(R"({"type": "object", "not": {}})")}}, false)
                   .ok());
}

}  // namespace
}  // namespace pagoda
