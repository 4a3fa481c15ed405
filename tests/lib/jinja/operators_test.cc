// ApplyBinary and ApplyComparison against Python's semantics (each expected value as Python 3
// and jinja2 3.1 give it), and what the operators spend of a RenderBudget.
#include "lib/jinja/operators.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/jinja/render_budget.h"
#include "lib/jinja/value.h"
#include "lib/jinja/value_format.h"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// repr(a op b) with a default budget, or "ERROR: <message>".
std::string Binary(const std::string& op, const Value& a, const Value& b) {
  RenderBudget budget{RenderLimits{}};
  absl::StatusOr<Value> v = ApplyBinary(budget, op, a, b);
  if (!v.ok()) return "ERROR: " + std::string(v.status().message());
  absl::StatusOr<std::string> repr = ToPythonRepr(*v);
  return repr.ok() ? *repr : "ERROR: " + std::string(repr.status().message());
}

// a op b as "True" / "False", or "ERROR: <message>".
std::string Compare(const std::string& op, const Value& a, const Value& b) {
  absl::StatusOr<bool> holds = ApplyComparison(op, a, b);
  if (!holds.ok()) return "ERROR: " + std::string(holds.status().message());
  return *holds ? "True" : "False";
}

Value Ints(std::initializer_list<int64_t> xs, bool is_tuple = false) {
  ValueList items;
  for (const int64_t x : xs) items.push_back(Value::Int(x));
  return Value::List(std::move(items), is_tuple);
}

TEST(OperatorsTest, IntegerDivisionAndModuloFloorAsPythonDoes) {
  EXPECT_EQ(Binary("//", Value::Int(-7), Value::Int(2)), "-4");
  EXPECT_EQ(Binary("%", Value::Int(-7), Value::Int(2)), "1");
  EXPECT_EQ(Binary("%", Value::Int(7), Value::Int(-2)), "-1");
  EXPECT_EQ(Binary("/", Value::Int(7), Value::Int(2)), "3.5");
  EXPECT_EQ(Binary("%", Value::Float(-7.5), Value::Int(2)), "0.5");
  EXPECT_EQ(Binary("**", Value::Int(2), Value::Int(-1)), "0.5");
  EXPECT_EQ(Binary("**", Value::Int(-3), Value::Int(3)), "-27");
  EXPECT_EQ(Binary("+", Value::Bool(true), Value::Int(1)), "2");
}

TEST(OperatorsTest, IntegerOverflowIsResourceExhaustedNeverWrapped) {
  RenderBudget budget{RenderLimits{}};
  for (const auto& [op, a, b] :
       {std::tuple{"+", kMax, int64_t{1}}, std::tuple{"-", kMin, int64_t{1}},
        std::tuple{"*", kMax, int64_t{2}}, std::tuple{"//", kMin, int64_t{-1}},
        std::tuple{"**", int64_t{2}, int64_t{64}}}) {
    const absl::StatusOr<Value> v = ApplyBinary(budget, op, Value::Int(a), Value::Int(b));
    EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted) << op;
    EXPECT_THAT(v.status().message(), HasSubstr("OverflowError")) << op;
  }
  EXPECT_EQ(Binary("%", Value::Int(kMin), Value::Int(-1)), "0");
  EXPECT_EQ(Binary("**", Value::Int(1), Value::Int(kMax)), "1");
}

TEST(OperatorsTest, DivisionByZeroIsZeroDivisionError) {
  EXPECT_THAT(Binary("/", Value::Int(1), Value::Int(0)), HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(Binary("//", Value::Int(1), Value::Int(0)), HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(Binary("%", Value::Int(1), Value::Int(0)), HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(Binary("//", Value::Float(1), Value::Float(0)),
              HasSubstr("ZeroDivisionError: float division by zero"));
}

TEST(OperatorsTest, MismatchedOperandsAreTypeErrorsNamingBothTypes) {
  EXPECT_EQ(Binary("+", Value::String("a"), Value::Int(1)),
            "ERROR: TypeError: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_THAT(Binary("+", Ints({1}), Ints({2}, /*is_tuple=*/true)),
              HasSubstr("for +: 'list' and 'tuple'"));
  EXPECT_THAT(Binary("*", Value::String("ab"), Value::Float(2)), HasSubstr("TypeError"));
  EXPECT_THAT(Binary("-", Value::Undefined("UndefinedError: 'x' is undefined"), Value::Int(1)),
              HasSubstr("'x' is undefined"));
}

TEST(OperatorsTest, SequencesConcatenateAndRepeatKeepingTheirKind) {
  EXPECT_EQ(Binary("~", Value::Int(1), Value::String("a")), "'1a'");
  EXPECT_EQ(Binary("+", Ints({1}, true), Ints({2}, true)), "(1, 2)");
  EXPECT_EQ(Binary("*", Value::Int(2), Ints({1, 2})), "[1, 2, 1, 2]");
  EXPECT_EQ(Binary("*", Value::String("ab"), Value::Int(-1)), "''");
  EXPECT_EQ(Binary("%", Value::String("%s-%d"), Ints({7, 8}, true)), "'7-8'");
}

TEST(OperatorsTest, MarkupEscapesTheStrItIsJoinedWith) {
  RenderBudget budget{RenderLimits{}};
  const absl::StatusOr<Value> v =
      ApplyBinary(budget, "+", Value::Markup("<b>"), Value::String("<i>"));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->is_markup());
  EXPECT_EQ(v->as_string(), "<b>&lt;i&gt;");
}

TEST(OperatorsTest, WhatIsBuiltIsChargedToTheBudget) {
  RenderLimits limits;
  limits.max_copied_bytes = 5;
  limits.max_steps = 6;
  RenderBudget budget(limits);
  ASSERT_TRUE(ApplyBinary(budget, "~", Value::String("abc"), Value::String("de")).ok());
  EXPECT_EQ(budget.copied_bytes(), 5);
  EXPECT_EQ(ApplyBinary(budget, "+", Value::String("a"), Value::String("b")).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(ApplyBinary(budget, "*", Ints({1, 2}), Value::Int(3)).ok());
  EXPECT_EQ(budget.steps(), 6);
  EXPECT_EQ(ApplyBinary(budget, "+", Ints({1}), Ints({2})).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(OperatorsTest, RepetitionPastTheOutputBoundFailsBeforeBuildingOrCharging) {
  RenderLimits limits;
  limits.max_output_bytes = 100;
  RenderBudget budget(limits);
  EXPECT_TRUE(ApplyBinary(budget, "*", Value::String("ab"), Value::Int(50)).ok());
  for (const int64_t n : {int64_t{51}, kMax}) {
    const absl::StatusOr<Value> v = ApplyBinary(budget, "*", Value::String("ab"), Value::Int(n));
    EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted) << n;
    EXPECT_THAT(v.status().message(), HasSubstr("over the limit of 100")) << n;
    EXPECT_EQ(ApplyBinary(budget, "*", Ints({1, 2}), Value::Int(n)).status().code(),
              absl::StatusCode::kResourceExhausted)
        << n;
  }
  EXPECT_EQ(budget.copied_bytes(), 100);
  EXPECT_EQ(budget.steps(), 0);
}

TEST(OperatorsTest, EqualityIsPythonsAcrossNumericTypes) {
  EXPECT_EQ(Compare("==", Value::Int(1), Value::Float(1.0)), "True");
  EXPECT_EQ(Compare("==", Value::Int(1), Value::Bool(true)), "True");
  EXPECT_EQ(Compare("!=", Value::String("1"), Value::Int(1)), "True");
  EXPECT_EQ(Compare("==", Ints({1, 2}), Ints({1, 2}, true)), "False");
}

TEST(OperatorsTest, OrderingComparesStringsAndListsElementwise) {
  EXPECT_EQ(Compare("<", Value::String("a"), Value::String("b")), "True");
  EXPECT_EQ(Compare("<", Ints({1, 2}), Ints({1, 3})), "True");
  EXPECT_EQ(Compare("<", Ints({1}), Ints({1, 0})), "True");
  EXPECT_EQ(Compare(">=", Ints({2}), Ints({1, 9})), "True");
  EXPECT_EQ(Compare("<=", Value::Float(0.5), Value::Int(0)), "False");
  EXPECT_EQ(Compare("<", Value::Int(1), Value::String("a")),
            "ERROR: TypeError: '<' not supported between instances of 'int' and 'str'");
  EXPECT_THAT(Compare(">", Value::Undefined("UndefinedError: 'y' is undefined"), Value::Int(1)),
              HasSubstr("'y' is undefined"));
}

TEST(OperatorsTest, MembershipSearchesStringsListsAndDictKeys) {
  auto dict = std::make_shared<ValueDict>();
  dict->Set("k", Value::Int(1));
  const Value d = Value::Dict(dict);
  EXPECT_EQ(Compare("in", Value::String("yz"), Value::String("xyz")), "True");
  EXPECT_EQ(Compare("notin", Value::Float(2.0), Ints({1, 2})), "False");
  EXPECT_EQ(Compare("in", Value::String("k"), d), "True");
  EXPECT_EQ(Compare("in", Value::String("v"), Value::Undefined("nothing")), "False");
  EXPECT_THAT(Compare("in", Value::Int(1), Value::String("abc")),
              HasSubstr("'in <string>' requires string as left operand, not int"));
  EXPECT_THAT(Compare("in", Ints({1}), d), HasSubstr("unhashable type: 'list'"));
  EXPECT_THAT(Compare("in", Value::Int(1), Value::Int(2)),
              HasSubstr("argument of type 'int' is not iterable"));
}

}  // namespace
}  // namespace pagoda::jinja
