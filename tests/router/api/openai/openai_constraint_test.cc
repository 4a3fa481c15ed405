// Structured output fields (response_format, grammar, guided_*) read into the request's
// Constraint: each constrains the output as it says, at most one per request, and a bad one is
// refused by name.
#include "router/api/openai/openai_constraint.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/api/openai/openai_context_fixture.h"

namespace pagoda {
namespace {

class OpenAiConstraintTest : public testing::OpenAiContextTest {
 protected:
  // The constraint `body` asks for; null when it asks for none.
  absl::StatusOr<std::shared_ptr<const Constraint>> Read(const OrderedJson& body) {
    GenerationRequest request;
    RETURN_IF_ERROR(ReadConstraint(body, constraints_.get(), &request));
    return request.constraint;
  }
};

TEST_F(OpenAiConstraintTest, NoFieldOrTextFormatIsNoConstraint) {
  for (const OrderedJson& body :
       {OrderedJson::object(), OrderedJson{{"response_format", {{"type", "text"}}}},
        OrderedJson{{"response_format", nullptr},
                    {"grammar", nullptr},
                    {"guided_json", nullptr},
                    {"guided_regex", nullptr},
                    {"guided_choice", nullptr},
                    {"guided_grammar", nullptr},
                    {"structural_tag", nullptr},
                    {"guided_decoding_backend", nullptr},
                    {"json_schema", nullptr}}}) {
    const auto constraint = Read(body);
    ASSERT_TRUE(constraint.ok()) << body << ": " << constraint.status();
    EXPECT_EQ(*constraint, nullptr) << body;
  }
}

TEST_F(OpenAiConstraintTest, AJsonSchemaFormatTakesOnlyWhatTheSchemaAllows) {
  const auto constraint = Read(Body(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "answer", "description": "d", "strict": true, "schema": {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
        "additionalProperties": false}}}})"));
  ASSERT_TRUE(constraint.ok()) << constraint.status();
  ASSERT_NE(*constraint, nullptr);
  EXPECT_TRUE(Accepts(**constraint, R"({"n": 42})"));
  EXPECT_TRUE(Accepts(**constraint, R"({"n":-1})"));
  EXPECT_FALSE(Accepts(**constraint, R"({"n": "42"})"));
  EXPECT_FALSE(Accepts(**constraint, R"({})"));
  EXPECT_FALSE(Accepts(**constraint, R"([1])"));
  // strict false and a null strict are served alike: the output follows the schema anyway.
  for (const char* strict : {"false", "null"}) {
    EXPECT_TRUE(Read(Body(absl::StrCat(R"({"response_format": {"type": "json_schema",
        "json_schema": {"name": "a", "strict": )",
                                       strict, R"(, "schema": {"type": "integer"}}}})")))
                    .ok())
        << strict;
  }
}

TEST_F(OpenAiConstraintTest, JsonObjectAndTheEmptySchemaTakeAnyJson) {
  const auto object = Read(Body(R"({"response_format": {"type": "json_object"}})"));
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_NE(*object, nullptr);
  EXPECT_TRUE(Accepts(**object, R"({"a": [1, "b"]})"));
  EXPECT_FALSE(Accepts(**object, "hello"));
  // llama.cpp's json_object with a schema is json_schema.
  const auto with_schema =
      Read(Body(R"({"response_format": {"type": "json_object", "schema": {"type": "boolean"}}})"));
  ASSERT_TRUE(with_schema.ok()) << with_schema.status();
  EXPECT_TRUE(Accepts(**with_schema, "true"));
  EXPECT_FALSE(Accepts(**with_schema, "1"));
  // json_schema without a schema: OpenAI's default, the empty schema, which any value meets.
  const auto empty =
      Read(Body(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  ASSERT_NE(*empty, nullptr);
  EXPECT_TRUE(Accepts(**empty, "[1, 2]"));
  EXPECT_FALSE(Accepts(**empty, "not json"));
}

TEST_F(OpenAiConstraintTest, AMalformedResponseFormatIsRefusedByName) {
  struct Case {
    const char* format;
    const char* code;
  };
  for (const Case& c : std::vector<Case>{
           {R"("json")", kInvalidType},
           {R"({})", kInvalidValue},
           {R"({"type": 1})", kInvalidValue},
           {R"({"type": "xml"})", kInvalidValue},
           {R"({"type": "text", "extra": 1})", kUnsupportedParameter},
           {R"({"type": "json_schema"})", kMissingRequired},
           {R"({"type": "json_schema", "json_schema": "{}"})", kMissingRequired},
           {R"({"type": "json_schema", "json_schema": {"name": 5}})", kInvalidValue},
           {R"({"type": "json_schema", "json_schema": {"description": []}})", kInvalidValue},
           {R"({"type": "json_schema", "json_schema": {"strict": "yes"}})", kInvalidValue},
           {R"({"type": "json_schema", "json_schema": {"schemas": {}}})", kUnsupportedParameter},
           {R"({"type": "json_schema", "json_schema": {"schema": 5}})", kInvalidType},
           {R"({"type": "json_schema", "json_schema": {"schema": {"type": "frob"}}})",
            kInvalidValue},
           {R"({"type": "json_object", "schema": []})", kInvalidType},
       }) {
    const OrderedJson body = {{"response_format", OrderedJson::parse(c.format)}};
    EXPECT_TRUE(Refused(Read(body).status(), "response_format", c.code)) << c.format;
  }
}

TEST_F(OpenAiConstraintTest, GrammarRegexAndChoiceEachConstrain) {
  const auto grammar = Read({{"grammar", R"(root ::= "yes" | "no")"}});
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  EXPECT_TRUE(Accepts(**grammar, "yes"));
  EXPECT_FALSE(Accepts(**grammar, "maybe"));
  const auto guided_grammar = Read({{"guided_grammar", R"(root ::= [0-9]+)"}});
  ASSERT_TRUE(guided_grammar.ok()) << guided_grammar.status();
  EXPECT_TRUE(Accepts(**guided_grammar, "2026"));
  EXPECT_FALSE(Accepts(**guided_grammar, "x"));
  const auto regex = Read({{"guided_regex", "[a-c]{2}x"}});
  ASSERT_TRUE(regex.ok()) << regex.status();
  EXPECT_TRUE(Accepts(**regex, "abx"));
  EXPECT_FALSE(Accepts(**regex, "adx"));
  const auto choice = Read({{"guided_choice", {"red", "green \"light\""}}});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_TRUE(Accepts(**choice, "red"));
  EXPECT_TRUE(Accepts(**choice, "green \"light\""));
  EXPECT_FALSE(Accepts(**choice, "blue"));
  // guided_json: a schema object, or its JSON text.
  for (const OrderedJson& schema :
       {OrderedJson{{"type", "integer"}}, OrderedJson(R"({"type": "integer"})")}) {
    const auto json = Read({{"guided_json", schema}});
    ASSERT_TRUE(json.ok()) << schema << ": " << json.status();
    EXPECT_TRUE(Accepts(**json, "17")) << schema;
    EXPECT_FALSE(Accepts(**json, "\"17\"")) << schema;
  }
}

TEST_F(OpenAiConstraintTest, ABadConstraintFieldIsRefusedByName) {
  struct Case {
    const char* field;
    OrderedJson value;
    const char* code;
  };
  const std::vector<Case> cases = {
      {"grammar", 5, kInvalidType},
      {"grammar", "root ::= (", kInvalidValue},
      {"grammar", "start ::= \"x\"", kInvalidValue},  // no root
      {"guided_grammar", OrderedJson::array(), kInvalidType},
      {"guided_regex", 1, kInvalidType},
      {"guided_regex", "(unclosed", kInvalidValue},
      {"guided_json", 5, kInvalidType},
      {"guided_json", "{not json", kInvalidValue},
      {"guided_choice", "red", kInvalidValue},
      {"guided_choice", OrderedJson::array(), kInvalidValue},
      {"guided_choice", {"red", ""}, kInvalidValue},
      {"guided_choice", {"red", 5}, kInvalidValue},
      {"guided_choice", {std::string(kMaxChoiceBytes + 1, 'x')}, kInvalidValue},
      {"guided_choice", std::vector<std::string>(kMaxChoices + 1, "x"), kInvalidValue},
      // vLLM's fields this server does not serve.
      {"guided_decoding_backend", "xgrammar", kUnsupportedParameter},
      {"guided_whitespace_pattern", " ", kUnsupportedParameter},
      {"structural_tag", "{}", kUnsupportedParameter},
      {"json_schema", OrderedJson::object(), kUnsupportedParameter},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(Refused(Read({{c.field, c.value}}).status(), c.field, c.code))
        << c.field << " = " << c.value.dump().substr(0, 80);
  }
}

TEST_F(OpenAiConstraintTest, AtMostOneConstraintPerRequest) {
  const absl::Status status =
      Read({{"response_format", {{"type", "json_object"}}}, {"guided_choice", {"a"}}}).status();
  EXPECT_TRUE(Refused(status, "response_format", kInvalidValue));
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("response_format, guided_choice"));
  EXPECT_TRUE(Refused(Read({{"grammar", "root ::= \"a\""}, {"guided_regex", "a"}}).status(),
                      "grammar", kInvalidValue));
  // A text format is no constraint: another field may constrain.
  EXPECT_TRUE(Read({{"response_format", {{"type", "text"}}}, {"guided_regex", "a"}}).ok());
}

TEST_F(OpenAiConstraintTest, WithoutACompilerEveryConstraintIsUnsupported) {
  for (const auto& [field, value] : std::vector<std::pair<const char*, OrderedJson>>{
           {"response_format", {{"type", "json_object"}}},
           {"grammar", "root ::= \"a\""},
           {"guided_choice", {"a"}}}) {
    GenerationRequest request;
    EXPECT_TRUE(
        Refused(ReadConstraint({{field, value}}, nullptr, &request), field, kUnsupportedParameter))
        << field;
  }
  GenerationRequest request;
  EXPECT_TRUE(ReadConstraint({{"response_format", {{"type", "text"}}}}, nullptr, &request).ok());
}

TEST_F(OpenAiConstraintTest, CompletionsAndChatReadTheirConstraint) {
  const OrderedJson format = {{"type", "json_object"}};
  absl::StatusOr<OpenAiCall> call =
      ParseCompletionRequest({{"prompt", "Once"}, {"response_format", format}}, context_);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_NE(call->requests[0].constraint, nullptr);
  call = ParseChatRequest(
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"guided_choice", {"a", "b"}}},
      context_);
  ASSERT_TRUE(call.ok()) << call.status();
  ASSERT_NE(call->requests[0].constraint, nullptr);
  EXPECT_TRUE(Accepts(*call->requests[0].constraint, "b"));
  context_.constraints = nullptr;
  EXPECT_TRUE(Refused(
      ParseCompletionRequest({{"prompt", "Once"}, {"response_format", format}}, context_).status(),
      "response_format", kUnsupportedParameter));
}

}  // namespace
}  // namespace pagoda
