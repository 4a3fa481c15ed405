// str.format as Python does it (each expected string checked with Python 3.11 and jinja2 3.1).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/lib/jinja/jinja_test_util.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;
using testing::RenderOrError;
using ::testing::StartsWith;

TEST(StrFormatTest, FieldsByPositionNameAndAutoNumber) {
  EXPECT_EQ(RenderOrError(R"({{ "{} and {}".format(1, "x") }})"), "1 and x");
  EXPECT_EQ(RenderOrError(R"({{ "{0}{1}{0}".format("a", "b") }})"), "aba");
  EXPECT_EQ(RenderOrError(R"({{ "{name}: {n}".format(name="k", n=4) }})"), "k: 4");
  EXPECT_EQ(RenderOrError(R"({{ "{{literal}} {}".format(1) }})"), "{literal} 1");
}

TEST(StrFormatTest, FieldsLookUpAttributesAndItems) {
  EXPECT_EQ(RenderOrError(R"({{ "{0[k]} {0[n][x]} {0.k} {1[1]}".format(d, l) }})",
                          R"({"d": {"k": "v", "n": {"x": 1}}, "l": [1, "a"]})"),
            "v 1 v a");
}

TEST(StrFormatTest, ConversionsAndPlainValues) {
  EXPECT_EQ(RenderOrError(R"({{ "{!r} {!s} {} {} {}".format("s", [1], none, true, 3.5) }})"),
            "'s' [1] None True 3.5");
}

TEST(StrFormatTest, StringSpecs) {
  EXPECT_EQ(
      RenderOrError(R"({{ "{:>7}|{:<7}|{:*^7}|{:.2}".format("héllo", "ab", "ab", "héllo") }})"),
      "  héllo|ab     |**ab***|hé");
}

TEST(StrFormatTest, IntSpecs) {
  EXPECT_EQ(RenderOrError(R"({{ "{:5d}|{:05d}|{:+d}|{:,}|{:_x}|{:#x}|{:#b}|{:c}".format(
                              42, -7, 42, 1234567, 1234567, 255, 5, 65) }})"),
            "   42|-0007|+42|1,234,567|12_d687|0xff|0b101|A");
  EXPECT_EQ(RenderOrError(R"({{ "{:=+8d}|{:-^11,}".format(42, 1234567) }})"),
            "+     42|-1,234,567-");
}

TEST(StrFormatTest, FloatSpecs) {
  EXPECT_EQ(RenderOrError(R"({{ "{:.2f}|{:10.3f}|{:e}|{:g}|{:.3}|{:.1}|{:.1%}|{:,.2f}".format(
                              3.14159, 3.14159, 1234567.891, 0.0001, 1.0, 1000.0, 0.256,
                              1234567.891) }})"),
            "3.14|     3.142|1.234568e+06|0.0001|1.0|1e+03|25.6%|1,234,567.89");
  EXPECT_EQ(
      RenderOrError(R"({{ "{:08.3f}|{:>{w}.{p}f}|{:f}".format(-3.14159, 2.5, 7, w=6, p=1) }})"),
      "-003.142|   2.5|7.000000");
}

TEST(StrFormatTest, MarkupEscapesWhatItInserts) {
  EXPECT_EQ(RenderOrError(R"({{ ("<b>{}</b>"|safe).format("<&>") + "<" }})"),
            "<b>&lt;&amp;&gt;</b>&lt;");
}

TEST(StrFormatTest, BadFormatsAreErrorsNamedAsPythonNamesThem) {
  EXPECT_THAT(RenderOrError(R"({{ "{} {1}".format(1, 2) }})"),
              HasSubstr("ValueError: cannot switch from automatic field numbering"));
  EXPECT_THAT(RenderOrError(R"({{ "{".format(1) }})"), HasSubstr("ValueError"));
  EXPECT_THAT(RenderOrError(R"({{ "}".format(1) }})"), HasSubstr("Single '}'"));
  EXPECT_THAT(RenderOrError(R"({{ "{2}".format(1) }})"), HasSubstr("IndexError"));
  EXPECT_THAT(RenderOrError(R"({{ "{x}".format(1) }})"), HasSubstr("KeyError: 'x'"));
  EXPECT_THAT(RenderOrError(R"({{ "{:d}".format("s") }})"), HasSubstr("Unknown format code 'd'"));
  EXPECT_THAT(RenderOrError(R"({{ "{:>5}".format(none) }})"),
              HasSubstr("unsupported format string passed to NoneType.__format__"));
}

TEST(StrFormatTest, HugeWidthsAreRefusedBeforeTheyAreBuilt) {
  EXPECT_THAT(RenderOrError(R"({{ "{:999999999}".format(1) }})"), StartsWith("ERROR: "));
}

}  // namespace
}  // namespace pagoda::jinja
