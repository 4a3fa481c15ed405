// Reading untrusted JSON without exceptions (errors name the document and the problem), exact
// 64-bit integers, and the one-line writer's UTF-8 handling.
#include "common/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(JsonTest, ShapeBoundsDepthKeysPerObjectAndKeysInAll) {
  const JsonShapeLimits limits = {.max_depth = 2, .max_object_keys = 2, .max_keys = 3};
  EXPECT_TRUE(CheckJsonShape(R"({"a": {"b": 1, "c": 2}})", limits, "body").ok());
  // Brackets and colons inside strings are text.
  EXPECT_TRUE(CheckJsonShape(R"({"[[[": "a:b:c:{", "\"": ":"})", limits, "body").ok());
  EXPECT_THAT(CheckJsonShape("[[[1]]]", limits, "body").message(),
              HasSubstr("body: JSON nested deeper than 2"));
  EXPECT_THAT(CheckJsonShape(R"({"a": 1, "b": 2, "c": 3})", limits, "body").message(),
              HasSubstr("body: a JSON object with more than 2 keys"));
  EXPECT_THAT(CheckJsonShape(R"([{"a": 1, "b": 2}, {"c": 3, "d": 4}])", limits, "body").message(),
              HasSubstr("more than 3 JSON object keys"));
  // Keys of arrays' objects count, array elements do not.
  EXPECT_TRUE(CheckJsonShape("[1, 2, 3, 4, 5]", limits, "body").ok());
}

TEST(JsonTest, ParseErrorsNameTheDocumentAndWhereItBreaks) {
  for (const std::string bad : {"{\"a\": 1,}", "[1, 2", "{} trailing", "", "\"\xFF\""}) {
    const absl::StatusOr<Json> j = ParseJson(bad, "config.json");
    ASSERT_FALSE(j.ok()) << bad;
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(j.status().message(), HasSubstr("config.json: not valid JSON: ")) << bad;
  }
  EXPECT_THAT(ParseJson("{\n  \"a\": tru\n}", "f").status().message(),
              HasSubstr("f: not valid JSON: parse error at line 3, column 0"));
}

TEST(JsonTest, DeepNestingIsRefusedBeforeItCanExhaustTheStack) {
  auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_TRUE(ParseJson(nested(kMaxJsonDepth), "f").ok());
  EXPECT_THAT(ParseJson(nested(kMaxJsonDepth + 1), "f").status().message(),
              HasSubstr("f: JSON nested deeper than 256 levels"));
  EXPECT_FALSE(ParseJson(nested(1000000), "f").ok());
  // Brackets inside strings are text, escaped quotes included.
  EXPECT_TRUE(ParseJson("[\"" + std::string(1000, '[') + "\\\"" + "\"]", "f").ok());
}

TEST(JsonTest, IntegersAreExactToSixtyFourBits) {
  const absl::StatusOr<Json> j = ParseJson(
      R"({"big": 9007199254740993, "max": 9223372036854775807, "neg": -9223372036854775808,
          "over": 18446744073709551615, "whole": 4.0, "half": 4.5, "huge": 1e300})",
      "f");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(*JsonInt(*j, "big", "f"), 9007199254740993);  // 2^53 + 1: a double loses it
  EXPECT_EQ(*JsonInt(*j, "max", "f"), INT64_MAX);
  EXPECT_EQ(*JsonInt(*j, "neg", "f"), INT64_MIN);
  EXPECT_EQ(*JsonInt(*j, "whole", "f"), 4);
  EXPECT_THAT(JsonInt(*j, "over", "f").status().message(),
              HasSubstr("f: over: 18446744073709551615 is out of range"));
  EXPECT_THAT(JsonInt(*j, "half", "f").status().message(), HasSubstr("4.5 is not a whole number"));
  EXPECT_FALSE(JsonInt(*j, "huge", "f").ok());
}

TEST(JsonTest, TypedReadsNameTheFieldInsteadOfThrowing) {
  const absl::StatusOr<Json> j =
      ParseJson(R"({"n": "7", "s": 7, "b": "yes", "x": 1.5, "nul": null, "list": [1]})", "c.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(JsonMember(*j, "nul"), nullptr) << "null counts as absent";
  EXPECT_EQ(JsonMember(*j, "absent"), nullptr);
  EXPECT_EQ(JsonMember((*j)["list"], "n"), nullptr) << "not an object";
  EXPECT_THAT(JsonInt(*j, "n", "c.json").status().message(), HasSubstr("c.json: n: not a number"));
  EXPECT_THAT(JsonInt(*j, "absent", "c.json").status().message(),
              HasSubstr("c.json: missing absent"));
  EXPECT_EQ(*JsonIntOr(*j, "absent", 3, "c.json"), 3);
  EXPECT_EQ(*JsonIntOr(*j, "nul", 3, "c.json"), 3);
  EXPECT_THAT(JsonString(*j, "s", "c.json").status().message(),
              HasSubstr("c.json: s must be a string"));
  EXPECT_THAT(JsonStringOr(*j, "s", "d", "c.json").status().message(), HasSubstr("s must be"));
  EXPECT_EQ(*JsonStringOr(*j, "absent", "d", "c.json"), "d");
  EXPECT_THAT(JsonBoolOr(*j, "b", false, "c.json").status().message(),
              HasSubstr("c.json: b is not true or false"));
  EXPECT_EQ(*JsonNumberOr(*j, "s", 0, "c.json"), 7);
  EXPECT_THAT(JsonNumberOr(*j, "n", 0, "c.json").status().message(),
              HasSubstr("n is not a number"));
  EXPECT_EQ(*JsonNumberOr(*j, "x", 0, "c.json"), 1.5);
  EXPECT_THAT(JsonAsString((*j)["list"], "c.json: list").status().message(),
              HasSubstr("c.json: list: not a string"));
}

// What every OpenAI endpoint reads its request's fields with.
TEST(JsonTest, AnAbsentOrNullMemberOfAnOrderedDocumentIsNotGiven) {
  const OrderedJson body = OrderedJson::parse(R"({"a": 1, "b": null, "c": false, "d": 0})");
  ASSERT_NE(JsonMember(body, "a"), nullptr);
  EXPECT_EQ(*JsonMember(body, "a"), 1);
  EXPECT_EQ(JsonMember(body, "a"), &body["a"]);  // the body's own value, not a copy
  EXPECT_EQ(JsonMember(body, "b"), nullptr);
  EXPECT_EQ(JsonMember(body, "z"), nullptr);
  // False and zero are values, not absence.
  ASSERT_NE(JsonMember(body, "c"), nullptr);
  EXPECT_EQ(*JsonMember(body, "c"), false);
  ASSERT_NE(JsonMember(body, "d"), nullptr);
  // Not an object: nothing is given.
  EXPECT_EQ(JsonMember(OrderedJson::array({1, 2}), "a"), nullptr);
  EXPECT_EQ(JsonMember(OrderedJson("a"), "a"), nullptr);
  EXPECT_EQ(JsonMember(OrderedJson(nullptr), "a"), nullptr);
}

TEST(JsonTest, DumpKeepsUtf8EscapesControlsAndRepairsInvalidBytes) {
  EXPECT_EQ(JsonDump(Json("a\"b\\c\n\t\x01")), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  EXPECT_EQ(JsonDump(Json("日本 🦙")), "\"日本 🦙\"") << "UTF-8 as is, not \\u escapes";
  // A token stream may stop inside a character: U+FFFD, never an exception.
  EXPECT_EQ(JsonDump(Json("bad \xF0\x9F end")), "\"bad \xEF\xBF\xBD end\"");
  EXPECT_EQ(JsonDump(Json("\xFF")), "\"\xEF\xBF\xBD\"");
  OrderedJson o = {{"z", 1}, {"a", {1, 2}}, {"m", nullptr}};
  EXPECT_EQ(JsonDump(o), R"({"z":1,"a":[1,2],"m":null})") << "members in insertion order";
}

}  // namespace
}  // namespace pagoda
