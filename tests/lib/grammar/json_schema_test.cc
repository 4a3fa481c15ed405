// JSON Schema -> grammar: documents written by random walks over real vocabularies (random
// allowed tokens from the mask until EOS) parse as JSON and validate against their schema;
// integer ranges hold exactly; unsupported keywords are refused by name.
#include "lib/grammar/json_schema.h"

#include <cmath>
#include <random>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/grammar_matcher.h"
#include "lib/grammar/integer_range.h"
#include "lib/grammar/token_masker.h"
#include "tests/lib/grammar/test_vocabulary.h"

namespace pagoda {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A validator for the subset the converter supports; "" when `v` is valid.
std::string Validate(const json& v, const json& s, const json& root) {
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const std::string name = ref.substr(ref.rfind('/') + 1);
    return Validate(
        v, ref.find("$defs") != std::string::npos ? root["$defs"][name] : root["definitions"][name],
        root);
  }
  if (s.contains("const") && v != s["const"]) return "const";
  if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) {
    return "enum";
  }
  if (s.contains("anyOf")) {
    for (const json& alt : s["anyOf"]) {
      if (Validate(v, alt, root).empty()) return "";
    }
    return "anyOf";
  }
  if (!s.contains("type")) return "";
  std::vector<std::string> types;
  if (s["type"].is_array()) {
    for (const json& t : s["type"]) types.push_back(t);
  } else {
    types.push_back(s["type"]);
  }
  std::string why = "type";
  for (const std::string& t : types) {
    if (t == "null" && v.is_null()) return "";
    if (t == "boolean" && v.is_boolean()) return "";
    if (t == "number" && v.is_number()) return "";
    if (t == "integer" && v.is_number_integer()) {
      const int64_t n = v;
      if (s.contains("minimum") && n < s["minimum"].get<int64_t>()) return "minimum";
      if (s.contains("maximum") && n > s["maximum"].get<int64_t>()) return "maximum";
      if (s.contains("exclusiveMinimum") && n <= s["exclusiveMinimum"].get<int64_t>()) {
        return "exclusiveMinimum";
      }
      return "";
    }
    if (t == "string" && v.is_string()) {
      const std::string str = v;
      // Code points, not bytes.
      const int64_t len =
          std::count_if(str.begin(), str.end(), [](char c) { return (c & 0xC0) != 0x80; });
      if (s.contains("minLength") && len < s["minLength"].get<int64_t>()) return "minLength";
      if (s.contains("maxLength") && len > s["maxLength"].get<int64_t>()) return "maxLength";
      if (s.contains("pattern") &&
          !std::regex_match(str, std::regex(s["pattern"].get<std::string>()))) {
        return "pattern";
      }
      if (s.value("format", "") == "date" &&
          !std::regex_match(str, std::regex("[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"))) {
        return "format";
      }
      if (s.value("format", "") == "uuid" &&
          !std::regex_match(str,
                            std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"))) {
        return "format";
      }
      return "";
    }
    if (t == "array" && v.is_array()) {
      if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return "minItems";
      if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return "maxItems";
      for (const json& item : v) {
        if (s.contains("items")) {
          std::string e = Validate(item, s["items"], root);
          if (!e.empty()) return "items: " + e;
        }
      }
      return "";
    }
    if (t == "object" && v.is_object()) {
      for (const json& r : s.value("required", json::array())) {
        if (!v.contains(r.get<std::string>())) return "required " + r.get<std::string>();
      }
      for (const auto& [key, item] : v.items()) {
        if (s.contains("properties") && s["properties"].contains(key)) {
          std::string e = Validate(item, s["properties"][key], root);
          if (!e.empty()) return key + ": " + e;
        } else if (s.value("additionalProperties", json(false)) == false) {
          return "additional property " + key;
        }
      }
      return "";
    }
  }
  return why;
}

bool Bit(const std::vector<uint64_t>& mask, int id) { return (mask[id >> 6] >> (id & 63)) & 1; }

// Random allowed tokens until EOS; past half the budget, tokens that close something first.
std::string RandomDocument(TokenMasker& masker, std::shared_ptr<const Grammar> g, std::mt19937& rng,
                           int max_steps) {
  const TokenVocabulary& v = masker.vocabulary();
  GrammarMatcher m(g);
  std::vector<uint64_t> mask(v.mask_words());
  std::string text;
  for (int step = 0; step < max_steps; ++step) {
    EXPECT_TRUE(masker.FillMask(m, mask).ok());
    std::vector<int> ids, closing;
    for (int id = 0; id < v.size(); ++id) {
      if (!Bit(mask, id)) continue;
      ids.push_back(id);
      if (v.bytes(id).find_first_of("\"]}") != std::string::npos) closing.push_back(id);
    }
    if (ids.empty()) {
      ADD_FAILURE() << "no token allowed after " << text;
      break;
    }
    const int eos = v.eos_ids()[0];
    if (step > max_steps / 3 && Bit(mask, eos)) return text;
    const auto& pool = step > max_steps / 3 && !closing.empty() ? closing : ids;
    const int id = pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
    if (id == eos) return text;
    EXPECT_TRUE(m.Accept(v.bytes(id)));
    text += v.bytes(id);
  }
  ADD_FAILURE() << "no EOS after " << max_steps << " tokens: " << text;
  return text;
}

const char* kSchemas[] = {
    R"({"type": "object", "properties": {
        "id": {"type": "integer", "minimum": -20, "maximum": 1234},
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "color": {"enum": ["red", "green", 3, null]},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,5}(-[0-9])?$"},
                 "minItems": 1, "maxItems": 3},
        "owner": {"$ref": "#/$defs/person"},
        "extra": {"anyOf": [{"type": "boolean"}, {"type": "number"}, {"type": "null"}]}},
      "required": ["id", "name", "tags"], "additionalProperties": false,
      "$defs": {"person": {"type": "object", "properties": {
          "first": {"type": "string", "maxLength": 8},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "friend": {"$ref": "#/$defs/person"}},
        "required": ["first"], "additionalProperties": false}}})",
    R"({"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
        "d": {"type": "string", "format": "date"},
        "u": {"type": "string", "format": "uuid"},
        "n": {"type": ["integer", "null"], "exclusiveMinimum": 0},
        "k": {"const": {"a": [1, "x"]}}},
      "required": ["d", "u"], "additionalProperties": false}})",
    R"({"type": "object", "properties": {"fixed": {"type": "boolean"}},
        "required": ["fixed"], "additionalProperties": {"type": "integer", "maximum": -5}})",
    R"({"type": "object"})",
};

class JsonSchemaWalkTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JsonSchemaWalkTest, RandomDocumentsParseAndValidate) {
  auto v = testing::LoadVocabulary(GetParam());
  ASSERT_NE(v, nullptr);
  std::mt19937 rng(11);
  for (const char* schema_text : kSchemas) {
    const json schema = json::parse(schema_text);
    auto gbnf = JsonSchemaToGbnf(schema_text);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    auto g = ParseGbnf(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status() << "\n" << *gbnf;
    TokenMasker masker(*g, v);
    for (int walk = 0; walk < 4; ++walk) {
      const std::string doc = RandomDocument(masker, *g, rng, 300);
      if (std::getenv("SHOW_DOCS")) std::cerr << doc << "\n";
      const json parsed = json::parse(doc, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << doc;
      EXPECT_EQ(Validate(parsed, schema, schema), "") << doc << "\nschema " << schema_text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, JsonSchemaWalkTest,
                         ::testing::Values("models/llama2-tokenizer/tokenizer.json",
                                           "models/llama3-tokenizer/tokenizer.json"),
                         [](const auto& info) {
                           return info.param.find("llama2") != std::string::npos ? "Llama2"
                                                                                 : "Llama3";
                         });

bool MatchesGbnf(const std::string& gbnf, const std::string& text) {
  auto g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  if (!g.ok()) return false;
  GrammarMatcher m(*g);
  return m.Accept(text) && m.IsComplete();
}

TEST(IntegerRangeTest, AcceptsExactlyTheRange) {
  const std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> ranges = {
      {0, 0},
      {1, 9},
      {0, 150},
      {-20, 1234},
      {17, 503},
      {-999, -37},
      {100, 199},
      {5, std::nullopt},
      {std::nullopt, -5},
      {std::nullopt, 42},
      {-3, std::nullopt},
      {990, 1010}};
  for (auto [lo, hi] : ranges) {
    const std::string gbnf = "root ::= " + IntegerRangeGbnf(lo, hi);
    for (int n = -1100; n <= 1100; ++n) {
      const bool want = (!lo || n >= *lo) && (!hi || n <= *hi);
      EXPECT_EQ(MatchesGbnf(gbnf, std::to_string(n)), want) << n << " in " << gbnf;
    }
    EXPECT_FALSE(MatchesGbnf(gbnf, "007"));
    EXPECT_FALSE(MatchesGbnf(gbnf, "-0"));
  }
}

std::string ErrorOf(const std::string& schema) {
  auto g = JsonSchemaToGbnf(schema);
  return g.ok() ? "ok" : std::string(g.status().message());
}

TEST(JsonSchemaTest, RefusesWhatItCannotExpressByName) {
  EXPECT_THAT(ErrorOf(R"({"type": "string", "format": "email"})"), HasSubstr("format 'email'"));
  EXPECT_THAT(ErrorOf(R"({"type": "object", "patternProperties": {}})"),
              HasSubstr("keyword 'patternProperties' is not supported"));
  EXPECT_THAT(ErrorOf(R"({"not": {}})"), HasSubstr("keyword 'not'"));
  EXPECT_THAT(ErrorOf(R"({"type": "number", "minimum": 1})"), HasSubstr("'minimum' on a number"));
  EXPECT_THAT(ErrorOf(R"({"type": "string", "pattern": "(?=a)b"})"), HasSubstr("lookahead"));
  EXPECT_THAT(ErrorOf(R"({"type": "string", "pattern": "(a)\\1"})"), HasSubstr("backreference"));
  EXPECT_THAT(ErrorOf(R"({"type": "string", "pattern": "(?<!a)b"})"), HasSubstr("lookbehind"));
  EXPECT_THAT(ErrorOf(R"({"$ref": "http://x/y"})"), HasSubstr("$ref 'http://x/y'"));
  EXPECT_THAT(ErrorOf(R"({"$ref": "#/$defs/missing"})"), HasSubstr("points at nothing"));
  EXPECT_THAT(ErrorOf(R"({"type": "array", "maxItems": 100000})"), HasSubstr("'maxItems' over"));
  EXPECT_THAT(ErrorOf(R"({"type": "date"})"), HasSubstr("type 'date'"));
  EXPECT_THAT(ErrorOf(R"({"allOf": [{}, {}]})"), HasSubstr("'allOf' with more than one"));
  EXPECT_THAT(ErrorOf(R"({"type": "object", "required": ["a"]})"),
              HasSubstr("required property 'a' not in 'properties'"));
  EXPECT_THAT(ErrorOf("{"), HasSubstr("not valid JSON"));
}

TEST(JsonSchemaTest, PatternsAndRecursion) {
  auto gbnf = JsonSchemaToGbnf(
      R"({"type": "object", "properties": {"p": {"type": "string", "pattern": "^a\"[^b]+\\d{2}|x.$"},
          "t": {"$ref": "#/definitions/tree"}}, "required": ["p"],
          "definitions": {"tree": {"type": "array", "items": {"$ref": "#/definitions/tree"}}}})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  EXPECT_TRUE(MatchesGbnf(*gbnf, R"({"p": "a\"\u00e9\"q12"})") == false);  // \u escapes: no
  EXPECT_TRUE(MatchesGbnf(*gbnf, R"({"p": "a\"é\"q12"})"));
  EXPECT_TRUE(MatchesGbnf(*gbnf, R"({"p": "x\n", "t": [[], [[]]]})") == false);
  EXPECT_TRUE(MatchesGbnf(*gbnf, R"({"p": "xy", "t": [[], [[]]]})"));
  EXPECT_FALSE(MatchesGbnf(*gbnf, R"({"p": "ab12"})"));
  EXPECT_FALSE(MatchesGbnf(*gbnf, R"({"t": []})"));
}

}  // namespace
}  // namespace pagoda
