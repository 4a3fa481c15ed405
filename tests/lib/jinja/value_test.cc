// Python's dict, Markup and falsy-sequence semantics as templates see them (each expected string
// checked with jinja2 3.1 set up as transformers does).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/jinja/jinja_test_util.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;
using testing::RenderOrError;

TEST(ValueDictTest, KeysMayBeAnythingHashable) {
  EXPECT_EQ(RenderOrError(R"({{ {0: "a", 512: "b"}[512] }})"), "b");
  EXPECT_EQ(RenderOrError(R"({{ {None: 1, "a": 2, (1, 2): 3} }})"), "{None: 1, 'a': 2, (1, 2): 3}");
  EXPECT_EQ(RenderOrError(R"({{ {None: 1, (1, "x"): 3}[(1, "x")] }}{{ {None: 1}[none] }})"), "31");
}

TEST(ValueDictTest, OneAndTrueAndOnePointZeroAreOneKey) {
  EXPECT_EQ(RenderOrError(R"({{ {1: "x", 1.0: "y", True: "z"} }})"), "{1: 'z'}");
  EXPECT_EQ(RenderOrError(R"({{ {0: "a", 1: "b"}[True] }}{{ 1.0 in {1: 2} }}{{ "1" in {1: 2} }})"),
            "bTrueFalse");
}

TEST(ValueDictTest, IntKeysSortAndSerializeAsPythonDoes) {
  EXPECT_EQ(
      RenderOrError(R"({% for k, v in {16384: 1, 0: 0, 512: 2} | dictsort %}{{ k }},{% endfor %})"),
      "0,512,16384,");
  EXPECT_EQ(RenderOrError(R"({{ {2: "b", True: "a", none: 3, 1.5: 4} | tojson }})"),
            R"({"2": "b", "true": "a", "null": 3, "1.5": 4})");
  EXPECT_EQ(RenderOrError(R"({{ {3: 1, 1: 2} | tojson(sort_keys=True) }})"), R"({"1": 2, "3": 1})");
  EXPECT_THAT(RenderOrError(R"({{ {2: "b", "a": 1} | tojson(sort_keys=True) }})"),
              HasSubstr("TypeError: '<' not supported"));
}

TEST(ValueDictTest, UnhashableKeysAreTypeErrors) {
  EXPECT_THAT(RenderOrError(R"({{ {[1]: 2} }})"), HasSubstr("TypeError: unhashable type: 'list'"));
  EXPECT_THAT(RenderOrError(R"({{ [1] in {1: 2} }})"), HasSubstr("unhashable type: 'list'"));
}

TEST(ValueDictTest, MethodsSeeTheKeysAsTheyAre) {
  EXPECT_EQ(
      RenderOrError(
          R"({{ {1: 2}.get(1) }} {{ {1: 2}.items() | list }} {{ {1: 2}[5] | default("d") }})"),
      "2 [(1, 2)] d");
}

TEST(FalseSequenceTest, SelectAndMapOverNoneAreEmpty) {
  EXPECT_EQ(RenderOrError(R"({{ none | selectattr("type", "equalto", "x") | list | length }})"),
            "0");
  EXPECT_EQ(RenderOrError(R"({{ none | rejectattr("x") | list }}{{ none | map("upper") | list }})"),
            "[][]");
  EXPECT_THAT(RenderOrError(R"({{ 5 | select | list }})"), HasSubstr("not iterable"));
  EXPECT_THAT(RenderOrError(R"({% for x in none %}{% endfor %})"), HasSubstr("not iterable"));
}

TEST(GeneratorTest, SelectAndMapReturnGeneratorsAsJinja2Does) {
  // llama.cpp's deepseek-r1 template: `tools | map(attribute='function') | tojson` fails there.
  EXPECT_THAT(RenderOrError(R"({{ [{"a": 1}] | map(attribute="a") | tojson }})"),
              HasSubstr("TypeError: Object of type generator is not JSON serializable"));
  EXPECT_THAT(RenderOrError(R"({{ [1] | select | length }})"), HasSubstr("has no len()"));
  EXPECT_EQ(RenderOrError(R"({{ "yes" if [] | select else "no" }})"), "yes");
  EXPECT_EQ(RenderOrError(
                R"({{ [1, 0, 2] | select | list | tojson }} {{ [1, 2] | map("string") | join }})"),
            "[1, 2] 12");
}

TEST(MarkupTest, AddingAPlainStringToMarkupEscapesIt) {
  EXPECT_EQ(RenderOrError(R"({{ "a"|safe + "<b>" }}|{{ "<b>" + "a"|safe }})"),
            "a&lt;b&gt;|&lt;b&gt;a");
  // functionary v3.1: "...'"|safe + name + ... + tool | tojson
  EXPECT_EQ(RenderOrError(R"({{ "f '"|safe + t.name + "'\n"|safe + t | tojson }})",
                          R"({"t": {"name": "a\"b"}})"),
            "f 'a&#34;b'\n{&#34;name&#34;: &#34;a\\&#34;b&#34;}");
}

TEST(MarkupTest, TildeAndPlainStringsDoNotEscape) {
  EXPECT_EQ(RenderOrError(R"({{ ("<x>"|safe) ~ "<b>" }}|{{ "<" + ">" }})"), "<x><b>|<>");
}

TEST(MarkupTest, EscapeOnceForceEscapeTwice) {
  EXPECT_EQ(RenderOrError(R"({{ ("<b>"|e)|e }}|{{ ("<b>"|e)|forceescape }})"),
            "&lt;b&gt;|&amp;lt;b&amp;gt;");
}

TEST(MarkupTest, MarkupSurvivesTrimPercentAndRepeat) {
  EXPECT_EQ(
      RenderOrError(
          R"({{ (" a"|safe)|trim + "<" }}|{{ ("%s<"|safe) % "<b>" }}|{{ ("a"|safe) * 2 + "<" }})"),
      "a&lt;|&lt;b&gt;<|aa&lt;");
}

}  // namespace
}  // namespace pagoda::jinja
