#include "router/api/openai/request_json.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RequestJsonLimits Limits(std::vector<std::string> id_fields = {}) {
  RequestJsonLimits limits;
  limits.id_fields = std::move(id_fields);
  return limits;
}

std::vector<int> Ids(const OrderedJson& v) {
  std::vector<int> ids;
  AppendIdList(v, &ids);
  return ids;
}

TEST(RequestJsonTest, ParsesWhatNlohmannParsesWhenNoFieldIsCompact) {
  const std::string text =
      R"({"a": [1, -2, 3.5, "x", null, true, {"b": [4]}], "c": {"d": {}}, "e": 18446744073709551615})";
  absl::StatusOr<OrderedJson> parsed = ParseRequestJson(text, Limits());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, OrderedJson::parse(text));
  EXPECT_EQ(parsed->dump(), OrderedJson::parse(text).dump());  // key order kept too
}

TEST(RequestJsonTest, ALaterDuplicateKeyWinsAsInNlohmann) {
  absl::StatusOr<OrderedJson> parsed = ParseRequestJson(R"({"n": 1, "n": 2})", Limits());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, OrderedJson::parse(R"({"n": 1, "n": 2})"));
}

TEST(RequestJsonTest, IdListsUnderTheNamedFieldsAreCompact) {
  absl::StatusOr<OrderedJson> parsed = ParseRequestJson(
      R"({"prompt": [[1, 2, 3], [2147483647], []], "tokens": [5, 6], "other": [7, 8]})",
      Limits({"prompt", "tokens"}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const OrderedJson& prompt = (*parsed)["prompt"];
  ASSERT_TRUE(prompt.is_array());
  ASSERT_EQ(prompt.size(), 3u);
  ASSERT_TRUE(IsIdList(prompt[0]));
  EXPECT_EQ(IdListSize(prompt[0]), 3);
  EXPECT_THAT(Ids(prompt[0]), ElementsAre(1, 2, 3));
  EXPECT_THAT(Ids(prompt[1]), ElementsAre(2147483647));
  EXPECT_TRUE(prompt[2].is_array() && prompt[2].empty());  // nothing to compact
  ASSERT_TRUE(IsIdList((*parsed)["tokens"]));
  EXPECT_THAT(Ids((*parsed)["tokens"]), ElementsAre(5, 6));
  EXPECT_EQ((*parsed)["other"], OrderedJson::parse("[7, 8]"));  // not a named field
}

TEST(RequestJsonTest, AListWithAnythingButIdsStaysAnOrdinaryArray) {
  for (const std::string list : {"[1, 2, -3]", "[1, 2, 2147483648]", "[1, 2.5]", "[1, \"a\"]",
                                 "[1, [2]]", "[1, {}]", "[1, null]", "[[1, 2], 3]"}) {
    const std::string text = absl::StrCat(R"({"prompt": )", list, "}");
    absl::StatusOr<OrderedJson> parsed = ParseRequestJson(text, Limits({"prompt"}));
    ASSERT_TRUE(parsed.ok()) << list << ": " << parsed.status();
    EXPECT_FALSE(IsIdList((*parsed)["prompt"])) << list;
    if (list == "[1, [2]]") {
      // The inner list is still a list of ids.
      EXPECT_EQ((*parsed)["prompt"][0], 1);
      EXPECT_THAT(Ids((*parsed)["prompt"][1]), ElementsAre(2));
    } else if (list == "[[1, 2], 3]") {
      EXPECT_THAT(Ids((*parsed)["prompt"][0]), ElementsAre(1, 2));
      EXPECT_EQ((*parsed)["prompt"][1], 3);
    } else {
      EXPECT_EQ((*parsed)["prompt"], OrderedJson::parse(list)) << list;
    }
  }
}

TEST(RequestJsonTest, OnlyTopLevelFieldsAndTheirListsAreCompact) {
  absl::StatusOr<OrderedJson> parsed =
      ParseRequestJson(R"({"x": {"prompt": [1, 2]}, "prompt": [[[1, 2]]]})", Limits({"prompt"}));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ((*parsed)["x"]["prompt"], OrderedJson::parse("[1, 2]"));
  EXPECT_EQ((*parsed)["prompt"], OrderedJson::parse("[[[1, 2]]]"));
}

TEST(RequestJsonTest, DepthAndKeysAreBoundedWhileParsing) {
  RequestJsonLimits limits = Limits();
  limits.max_depth = 3;
  limits.max_object_keys = 2;
  limits.max_keys = 3;
  EXPECT_TRUE(ParseRequestJson("[[[1]]]", limits).ok());
  EXPECT_THAT(std::string(ParseRequestJson("[[[[1]]]]", limits).status().message()),
              HasSubstr("nested deeper than 3"));
  EXPECT_THAT(
      std::string(ParseRequestJson(R"({"a": 1, "b": 2, "c": 3})", limits).status().message()),
      HasSubstr("more than 2 keys"));
  EXPECT_THAT(
      std::string(
          ParseRequestJson(R"({"a": {"x": 1, "y": 2}, "b": {"z": 3}})", limits).status().message()),
      HasSubstr("more than 3 JSON object keys"));
}

TEST(RequestJsonTest, ATreeCostingMoreThanItsBudgetIsRefused) {
  // 4 MiB of empty lists: each costs ~64 bytes of tree for its 3 bytes of text.
  std::string text = "[";
  for (int i = 0; i < (4 << 20) / 3; ++i) text += "[],";
  text += "[]]";
  absl::StatusOr<OrderedJson> parsed = ParseRequestJson(text, Limits());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("too many values for its size"));
}

TEST(RequestJsonTest, MillionsOfIdsFitTheBudget) {
  // 2 bytes of text an id, the densest a list of ids can be.
  std::string text = R"({"prompt": [)";
  constexpr int kIds = 4 << 20;
  for (int i = 0; i < kIds; ++i) text += "7,";
  text.back() = ']';
  text += "}";
  absl::StatusOr<OrderedJson> parsed = ParseRequestJson(text, Limits({"prompt"}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(IsIdList((*parsed)["prompt"]));
  EXPECT_EQ(IdListSize((*parsed)["prompt"]), kIds);
  // The same text without the compact form is over its budget.
  EXPECT_FALSE(ParseRequestJson(text, Limits()).ok());
}

TEST(RequestJsonTest, TextThatIsNotJsonSaysSo) {
  for (const std::string text : {"", "{", "{\"a\": 1} x", "[1,]", "nul"}) {
    absl::StatusOr<OrderedJson> parsed = ParseRequestJson(text, Limits({"prompt"}));
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(parsed.status().message()), ::testing::EndsWith(std::string(kNotJson)))
        << text;
  }
}

}  // namespace
}  // namespace pagoda
