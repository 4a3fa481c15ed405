// Structured output through the router core and a real stories260K worker: what a constrained
// request samples (greedy and seeded) parses and satisfies its schema, regex or choice; the
// grammar's state survives forks, preemption and a resume elsewhere; sequences without a
// constraint in the same steps sample what they sample alone.
#include "router/core/constraint.h"

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/grammar/json_schema.h"
#include "lib/grammar/regex_to_gbnf.h"
#include "lib/text/tokenizer_loader.h"
#include "nlohmann/json.hpp"
#include "router/api/constraint_compiler.h"
#include "tests/router/core/engine_fixture.h"

namespace pagoda {
namespace {

using testing::Result;

// Nested objects, bounded arrays, enums, bounded integers, required and optional keys.
constexpr char kSchema[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "mood": {"enum": ["happy", "sad"]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6},
             "minItems": 1, "maxItems": 3},
    "pet": {"$ref": "#/$defs/pet"}
  },
  "required": ["name", "age", "mood", "tags"],
  "additionalProperties": false,
  "$defs": {"pet": {"type": "object", "properties": {"legs": {"type": "integer",
      "minimum": 0, "maximum": 8}}, "required": ["legs"], "additionalProperties": false}}
})";

// kSchema's rules, checked by hand on a parsed document.
::testing::AssertionResult Validates(const std::string& text) {
  auto fail = [&](const char* why) { return ::testing::AssertionFailure() << why << ": " << text; };
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return fail("not a JSON object");
  for (const char* key : {"name", "age", "mood", "tags"}) {
    if (!doc.contains(key)) return fail("a required key is missing");
  }
  for (const auto& [key, value] : doc.items()) {
    if (key != "name" && key != "age" && key != "mood" && key != "tags" && key != "pet")
      return fail("an extra key");
  }
  if (!doc["name"].is_string() || doc["name"].get<std::string>().size() > 12) return fail("name");
  if (!doc["age"].is_number_integer() || doc["age"] < 0 || doc["age"] > 120) return fail("age");
  if (doc["mood"] != "happy" && doc["mood"] != "sad") return fail("mood");
  if (!doc["tags"].is_array() || doc["tags"].empty() || doc["tags"].size() > 3) return fail("tags");
  for (const auto& tag : doc["tags"]) {
    if (!tag.is_string() || tag.get<std::string>().size() > 6) return fail("a tag");
  }
  if (doc.contains("pet")) {
    const auto& pet = doc["pet"];
    if (!pet.is_object() || pet.size() != 1 || !pet.contains("legs") ||
        !pet["legs"].is_number_integer() || pet["legs"] < 0 || pet["legs"] > 8)
      return fail("pet");
  }
  return ::testing::AssertionSuccess();
}

class ConstraintTest : public testing::EngineFixture {
 protected:
  void StartWith(int num_blocks, int max_model_len = 257) {
    Start(num_blocks, max_model_len);
    auto tokenizer = LoadTokenizer(testing::Stories260KTokenizer());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    compiler_ = std::make_unique<ConstraintCompiler>(tokenizer_.get(), config_);
  }

  std::shared_ptr<const Constraint> Compile(const std::string& gbnf) {
    auto c = compiler_->Compile(gbnf, "grammar");
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }
  std::shared_ptr<const Constraint> Schema(const char* schema) {
    auto gbnf = JsonSchemaToGbnf(schema);
    EXPECT_TRUE(gbnf.ok()) << gbnf.status();
    return Compile(*gbnf);
  }

  int64_t AddConstrained(const std::vector<int>& prompt, std::shared_ptr<const Constraint> c,
                         SamplingParams sampling, int max_tokens, int n = 1) {
    GenerationRequest r;
    r.prompt_ids = prompt;
    r.sampling = sampling;
    r.max_tokens = max_tokens;
    r.n = n;
    r.constraint = std::move(c);
    return Add(r);
  }

  // The output's text: each token's bytes, EOS left out.
  std::string Text(const std::vector<int>& ids) const {
    std::string text;
    for (int id : ids) {
      if (std::find(config_.eos_ids.begin(), config_.eos_ids.end(), id) != config_.eos_ids.end())
        continue;
      text += tokenizer_->TokenBytes(tokenizer_->eos_id(), id);
    }
    return text;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ConstraintCompiler> compiler_;
};

TEST_F(ConstraintTest, JsonSchemaOutputsParseAndValidateGreedyAndSampled) {
  StartWith(/*num_blocks=*/1024);
  auto schema = Schema(kSchema);
  std::vector<int64_t> ids;
  for (const auto& c : golden()) ids.push_back(AddConstrained(c.prompt_ids, schema, Greedy(), 200));
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    ids.push_back(
        AddConstrained(golden()[seed % golden().size()].prompt_ids, schema, Sampled(seed), 200));
  }
  auto results = RunAll();
  for (int64_t id : ids) {
    const Result& r = results[id];
    ASSERT_EQ(r.reasons[0], FinishReason::kStop) << Text(r.outputs[0]);
    EXPECT_TRUE(Validates(Text(r.outputs[0])));
  }
}

TEST_F(ConstraintTest, SampledForksEachFollowTheSchema) {
  StartWith(/*num_blocks=*/512);
  const int64_t id =
      AddConstrained(golden()[0].prompt_ids, Schema(kSchema), Sampled(7), 200, /*n=*/4);
  const Result r = RunAll()[id];
  ASSERT_EQ(r.outputs.size(), 4u);
  for (const auto& out : r.outputs) EXPECT_TRUE(Validates(Text(out)));
}

TEST_F(ConstraintTest, RegexAndChoice) {
  StartWith(/*num_blocks=*/512);
  auto regex = RegexToGbnf("[0-9]{3}-[a-z]{2,5}( ok)?", /*json_string=*/false);
  ASSERT_TRUE(regex.ok()) << regex.status();
  auto by_regex = Compile("root ::= " + *regex);
  auto by_choice = Compile(R"(root ::= "yes" | "no" | "once upon a time")");
  std::vector<int64_t> regex_ids, choice_ids;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const SamplingParams sampling = seed == 0 ? Greedy() : Sampled(seed);
    regex_ids.push_back(AddConstrained(golden()[0].prompt_ids, by_regex, sampling, 40));
    choice_ids.push_back(AddConstrained(golden()[1].prompt_ids, by_choice, sampling, 40));
  }
  auto results = RunAll();
  for (int64_t id : regex_ids) {
    const std::string text = Text(results[id].outputs[0]);
    EXPECT_EQ(results[id].reasons[0], FinishReason::kStop) << text;
    EXPECT_TRUE(std::regex_match(text, std::regex("[0-9]{3}-[a-z]{2,5}( ok)?"))) << text;
  }
  for (int64_t id : choice_ids) {
    const std::string text = Text(results[id].outputs[0]);
    EXPECT_EQ(results[id].reasons[0], FinishReason::kStop) << text;
    EXPECT_TRUE(text == "yes" || text == "no" || text == "once upon a time") << text;
  }
}

TEST_F(ConstraintTest, MaxTokensCutsTheOutputWithLength) {
  StartWith(/*num_blocks=*/256);
  const int64_t id = AddConstrained(golden()[0].prompt_ids, Schema(kSchema), Greedy(), 5);
  const Result r = RunAll()[id];
  EXPECT_EQ(r.reasons[0], FinishReason::kLength);
  EXPECT_EQ(r.outputs[0].size(), 5u);
  EXPECT_EQ(Text(r.outputs[0])[0], '{');
}

TEST_F(ConstraintTest, UnconstrainedSequencesInTheSameStepsAreUnchanged) {
  StartWith(/*num_blocks=*/1024);
  auto schema = Schema(kSchema);
  std::vector<int64_t> plain;
  for (const auto& c : golden()) {
    plain.push_back(Add(c.prompt_ids));
    AddConstrained(c.prompt_ids, schema, Sampled(3), 200);
  }
  auto results = RunAll();
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(results[plain[i]].outputs[0], golden()[i].greedy_ids) << golden()[i].prompt;
  }
}

TEST_F(ConstraintTest, AResumedSequenceReplaysItsGrammarFromItsOutput) {
  StartWith(/*num_blocks=*/512);
  auto schema = Schema(kSchema);
  const std::vector<int>& prompt = golden()[2].prompt_ids;
  const int64_t first = AddConstrained(prompt, schema, Sampled(5), 200);
  const std::vector<int> whole = RunAll()[first].outputs[0];
  ASSERT_GT(whole.size(), 8u);
  // As the Cluster resumes a sequence from a dead worker: its output so far comes along.
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling = Sampled(5);
  r.max_tokens = 200;
  r.constraint = schema;
  r.output_ids.assign(whole.begin(), whole.begin() + whole.size() / 2);
  const int64_t resumed = Add(r);
  const std::vector<int> rest = RunAll()[resumed].outputs[0];
  std::vector<int> joined = r.output_ids;
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, whole);
}

TEST_F(ConstraintTest, PreemptedSequencesKeepTheirGrammarState) {
  auto run = [&](int num_blocks) {
    StartWith(num_blocks);
    auto schema = Schema(kSchema);
    std::vector<int64_t> ids;
    for (uint64_t seed = 0; seed < 12; ++seed) {
      ids.push_back(
          AddConstrained(golden()[seed % golden().size()].prompt_ids, schema, Sampled(seed), 200));
    }
    auto results = RunAll();
    std::vector<std::vector<int>> outputs;
    for (int64_t id : ids) outputs.push_back(results[id].outputs[0]);
    return std::make_pair(outputs, engine_->scheduler().num_preemptions());
  };
  const auto [roomy, no_preemptions] = run(1024);
  const auto [tight, preemptions] = run(40);
  EXPECT_EQ(no_preemptions, 0);
  EXPECT_GT(preemptions, 0);
  EXPECT_EQ(tight, roomy);
  for (const auto& out : tight) EXPECT_TRUE(Validates(Text(out)));
}

TEST_F(ConstraintTest, TheAllowedSetTakesItsSmallerWireForm) {
  StartWith(/*num_blocks=*/64);
  auto choice = Compile(R"(root ::= "yes" | "no")");
  GrammarMatcher matcher(choice->grammar);
  std::vector<uint64_t> mask, words;
  std::vector<int> ids;
  ASSERT_TRUE(FillAllowed(*choice->masker, matcher, &mask, &ids, &words).ok());
  EXPECT_TRUE(words.empty());
  ASSERT_FALSE(ids.empty());
  for (int id : ids) {
    const std::string b = tokenizer_->TokenBytes(tokenizer_->eos_id(), id);
    EXPECT_TRUE(std::string("yes").starts_with(b) || std::string("no").starts_with(b)) << b;
  }
  auto any = Compile(JsonObjectGbnf());
  GrammarMatcher in_string(any->grammar);
  ASSERT_TRUE(in_string.Accept("{\"a"));
  ASSERT_TRUE(FillAllowed(*any->masker, in_string, &mask, &ids, &words).ok());
  EXPECT_TRUE(ids.empty());
  EXPECT_EQ(words.size(), static_cast<size_t>((config_.vocab_size + 63) / 64));
}

}  // namespace
}  // namespace pagoda
