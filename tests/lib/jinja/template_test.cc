// The renderer against jinja2's behaviour (each expected string checked with Python jinja2
// 3.1 set up as transformers does), then against hostile templates and contexts.
#include "lib/jinja/template.h"

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/jinja/value_format.h"
#include "nlohmann/json.hpp"

namespace pagoda::jinja {
namespace {

using ::testing::HasSubstr;

RenderOptions FixedNow() {
  RenderOptions options;
  options.now = *ParseDateTime("2026-11-22T00:00:00");
  return options;
}

absl::StatusOr<std::string> Try(const std::string& source, const std::string& context_json = "{}",
                                const RenderOptions& options = FixedNow()) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  ValueDict context;
  const nlohmann::ordered_json json = nlohmann::ordered_json::parse(context_json);
  for (const auto& [key, value] : json.items()) {
    absl::StatusOr<Value> v = FromJson(value);
    if (!v.ok()) return v.status();
    context.Set(key, *v);
  }
  return t->Render(context, options);
}

// The render, or "ERROR: <message>".
std::string Render(const std::string& source, const std::string& context_json = "{}") {
  absl::StatusOr<std::string> out = Try(source, context_json);
  return out.ok() ? *out : "ERROR: " + std::string(out.status().message());
}

absl::Status Error(const std::string& source, const std::string& context_json = "{}",
                   const RenderOptions& options = FixedNow()) {
  return Try(source, context_json, options).status();
}

// ---- whitespace ----

TEST(JinjaTest, TrimBlocksEatsTheNewlineAfterABlockTag) {
  EXPECT_EQ(Render("{% if true %}\nyes\n{% endif %}\n"), "yes\n");
}

TEST(JinjaTest, LstripBlocksEatsTheIndentBeforeABlockTag) {
  EXPECT_EQ(Render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(Render("{% if true %}\n  {% if true %}\n    x\n  {% endif %}\n{% endif %}\n"),
            "    x\n");
}

TEST(JinjaTest, LstripBlocksKeepsTextBeforeATagOnTheSameLine) {
  EXPECT_EQ(Render("a {% if true %}x{% endif %}"), "a x");
}

TEST(JinjaTest, PlusSignKeepsTheIndent) {
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(JinjaTest, PrintTagsAreNotLstripped) { EXPECT_EQ(Render("  {{ 'x' }}"), "  x"); }

TEST(JinjaTest, MinusSignStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(Render("a  \n {%- if true -%} \n b {{- ' c ' -}}  d{% endif %}"), "ab c d");
  EXPECT_EQ(Render("{%- for m in ms -%}\n  {{ m }}\n{%- endfor %}", R"({"ms": ["a", "b"]})"), "ab");
}

TEST(JinjaTest, CommentsVanishWithTheirLine) {
  EXPECT_EQ(Render("a\n{# c #}\nb"), "a\nb");
  EXPECT_EQ(Render("a\n  {# c #}\nb"), "a\nb");
}

TEST(JinjaTest, OneTrailingNewlineOfTheTemplateIsDropped) {
  EXPECT_EQ(Render("x\n\n"), "x\n");
  EXPECT_EQ(Render("{{ 'x' }}\n"), "x");
}

TEST(JinjaTest, RawBlocksPrintTagsVerbatim) {
  EXPECT_EQ(Render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

// ---- loops ----

TEST(JinjaTest, LoopVariablesCountLikeJinja) {
  EXPECT_EQ(Render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.revindex }},{% endfor %}"),
            "10TrueFalse33,21FalseFalse32,32FalseTrue31,");
}

TEST(JinjaTest, PrevitemAndNextitemAreUndefinedAtTheEnds) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}"),
            "[|2][1|3][2|]");
}

TEST(JinjaTest, BreakAndContinueControlTheInnermostLoop) {
  EXPECT_EQ(Render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0134");
}

TEST(JinjaTest, LoopFilterCountsOnlyTheKeptItems) {
  EXPECT_EQ(Render("{% for i in range(6) if i is odd %}{{ loop.index }}/{{ loop.length }}:{{ i }} "
                   "{% endfor %}"),
            "1/3:1 2/3:3 3/3:5 ");
}

TEST(JinjaTest, ForElseRunsWhenNothingIsVisited) {
  EXPECT_EQ(Render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
}

TEST(JinjaTest, NestedLoopsEachSeeTheirOwnLoopVariable) {
  EXPECT_EQ(Render("{% for x in ['a'] %}{% for y in ['b', 'c'] %}{{ loop.first }}{% endfor %}"
                   "{{ loop.last }}{% endfor %}"),
            "TrueFalseTrue");
}

TEST(JinjaTest, SetInsideALoopDoesNotLeakButANamespaceCarriesState) {
  EXPECT_EQ(Render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(Render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "4");
}

TEST(JinjaTest, LoopsUnpackPairsAndVisitDictKeysInOrder) {
  EXPECT_EQ(Render("{% for k, v in {'b': 1, 'a': 2}|items %}{{ k }}={{ v }};{% endfor %}"
                   "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"),
            "b=1;a=2;ba");
}

TEST(JinjaTest, LoopCycleAlternates) {
  EXPECT_EQ(Render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
}

// ---- expressions ----

TEST(JinjaTest, SlicesAndIndexesLikePythonByCodePoint) {
  EXPECT_EQ(Render("{{ 'hello'[::-1] }}|{{ [1,2,3,4][1:3] }}|{{ 'abc'[-1] }}|{{ [1,2,3][::-2] }}|"
                   "{{ 'héllo'[1:3] }}|{{ 'héllo'|length }}"),
            "olleh|[2, 3]|c|[3, 1]|él|5");
}

TEST(JinjaTest, InlineIfWithoutElseIsUndefined) { EXPECT_EQ(Render("[{{ 'a' if false }}]"), "[]"); }

TEST(JinjaTest, TruthinessFollowsPython) {
  EXPECT_EQ(Render("{{ 1 if [] else 2 }}{{ 1 if {} else 2 }}{{ 1 if '' else 2 }}"
                   "{{ 1 if 0.0 else 2 }}{{ 1 if 'a' else 2 }}{{ 1 if none else 2 }}"),
            "222212");
}

TEST(JinjaTest, ArithmeticFollowsPython) {
  EXPECT_EQ(Render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 3 / 2 }} {{ 2 ** 10 }} {{ 1.0 }} "
                   "{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1.5e-7 }} {{ 123456789012345678.0 }}"),
            "3 -4 2 1.5 1024 1.0 1e+20 0.30000000000000004 1.5e-07 1.2345678901234568e+17");
  EXPECT_EQ(Render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ '%s+%d' % ('a', 2) }}"), "ababab [1, 1] a+2");
}

TEST(JinjaTest, PrintsValuesAsPythonStr) {
  EXPECT_EQ(Render(R"({{ [1, 'a', none, true, {'k': "it's"}] }} {{ (1, 2) }})"),
            R"([1, 'a', None, True, {'k': "it's"}] (1, 2))");
  EXPECT_EQ(Render("{{ 1 ~ 'a' ~ none ~ true ~ undefined_name }}"), "1aNoneTrue");
}

TEST(JinjaTest, MembershipAndChainedComparisons) {
  EXPECT_EQ(Render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} "
                   "{{ 'z' not in 'abc' }} {{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }}"),
            "True True True True True False");
}

TEST(JinjaTest, StringMethods) {
  EXPECT_EQ(Render("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'abc'.startswith('ab') }}|"
                   "{{ 'x'.upper() }}|{{ 'aXa'.replace('a', 'b') }}|{{ ' a  b '.split() }}|"
                   "{{ 'xxhixx'.lstrip('x') }}|{{ 'a.b'.endswith(('.a', '.b')) }}|"
                   "{{ 'hello world'.title() }}"),
            "a b|['a', 'b', '', 'c']|True|X|bXb|['a', 'b']|hixx|True|Hello World");
}

TEST(JinjaTest, DictMethodsAndAttributeLookup) {
  EXPECT_EQ(Render("{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }} {{ d.keys()|list }} "
                   "{{ d.values()|list }} {{ d.items()|list }}",
                   R"({"d": {"a": 1, "b": [2]}})"),
            "1 dflt None ['a', 'b'] [1, [2]] [('a', 1), ('b', [2])]");
  EXPECT_EQ(
      Render("{{ x.a.b[1] }}{{ x['a']['b'][-1] }}{{ x.a.b.0 }}", R"({"x": {"a": {"b": [1, 2]}}})"),
      "221");
}

TEST(JinjaTest, TojsonIsPythonJsonDumpsWithoutAsciiEscaping) {
  EXPECT_EQ(Render("{{ x|tojson }} {{ x|tojson(indent=2) }} {{ x|tojson(sort_keys=true) }} "
                   "{{ x|tojson(separators=(',', ':')) }}",
                   R"({"x": {"b": "é\"\n", "a": [1, 2.5, null, true], "c": {}}})"),
            "{\"b\": \"é\\\"\\n\", \"a\": [1, 2.5, null, true], \"c\": {}} "
            "{\n  \"b\": \"é\\\"\\n\",\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n"
            "  \"c\": {}\n} "
            "{\"a\": [1, 2.5, null, true], \"b\": \"é\\\"\\n\", \"c\": {}} "
            "{\"b\":\"é\\\"\\n\",\"a\":[1,2.5,null,true],\"c\":{}}");
  EXPECT_EQ(Render("{{ x|tojson(ensure_ascii=true) }}", R"({"x": ["é😀"]})"),
            R"(["\u00e9\ud83d\ude00"])");
}

TEST(JinjaTest, FiltersThatTemplatesUse) {
  EXPECT_EQ(
      Render("{{ ['a','b']|join(', ') }} {{ '  x '|trim }} {{ none|default('d') }} "
             "{{ u|default('d') }} {{ ''|default('d', true) }} {{ [3,1,2]|sort }} "
             "{{ [1,2]|first }} {{ [1,2]|last }} {{ 'ab'|list }} {{ '3'|int + 1 }} "
             "{{ 5|string }} {{ 'ab'|upper }} {{ [1,2,1]|unique|list }} {{ [1,2]|reverse|list }}"),
      "a, b x None d d [1, 2, 3] 1 2 ['a', 'b'] 4 5 AB [1, 2] [2, 1]");
  EXPECT_EQ(
      Render("{{ users|map(attribute='name')|join(',') }} "
             "{{ users|selectattr('admin')|map(attribute='name')|list }} "
             "{{ users|rejectattr('admin')|list|length }} "
             "{{ users|selectattr('name', 'equalto', 'b')|list }} "
             "{{ ['x', 'code']|reject('equalto', 'code')|list }} {{ {'b':1,'A':2}|dictsort }} "
             "{{ ['a', 'b']|map('upper')|list }}",
             R"({"users": [{"name": "a", "admin": true}, {"name": "b", "admin": false}]})"),
      "a,b ['a'] 1 [{'name': 'b', 'admin': False}] ['x'] [('A', 2), ('b', 1)] ['A', 'B']");
  EXPECT_EQ(Render("{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, first=true) }}|"
                   "{{ 'a\n\nb'|indent(2, blank=true) }}"),
            "a\n  b\n\n  c|  a\n  b|a\n  \n  b");
}

TEST(JinjaTest, TestsLikeJinja) {
  EXPECT_EQ(
      Render("{{ u is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} "
             "{{ [] is sequence }} {{ 'a' is iterable }} {{ 1 is number }} {{ 1 is integer }} "
             "{{ 1.0 is integer }} {{ true is boolean }} {{ false is false }} "
             "{{ 3 is divisibleby 3 }} {{ 2 is even }} {{ 'a' is lower }}"),
      "False True True True True True True True False True True True True True");
}

TEST(JinjaTest, MacrosTakeDefaultsKeywordsAndACaller) {
  EXPECT_EQ(Render("{% macro greet(name, greeting='hi') %}{{ greeting }} {{ name }}{% endmacro %}"
                   "{{ greet('bob') }}, {{ greet('amy', greeting='yo') }}"),
            "hi bob, yo amy");
  EXPECT_EQ(
      Render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"),
      "[in]");
  EXPECT_EQ(Render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ f(3) }}"),
            "321");
}

TEST(JinjaTest, BlockSetCapturesItsBodyThroughItsFilter) {
  EXPECT_EQ(Render("{% set x %}a{{ 1 }}{% endset %}{{ x }}{% set y | upper %}b{% endset %}{{ y }}"),
            "a1B");
}

TEST(JinjaTest, GenerationTagRendersItsBodyUnchanged) {
  EXPECT_EQ(Render("{% generation %}kept {{ 1 }}{% endgeneration %}"), "kept 1");
}

TEST(JinjaTest, StrftimeNowFormatsTheGivenTime) {
  EXPECT_EQ(Render("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %A %B %j') }}"),
            "22 Nov 2026 2026-11-22 Sunday November 326");
}

// ---- undefined and errors ----

TEST(JinjaTest, UndefinedPrintsAsEmpty) {
  EXPECT_EQ(Render("[{{ u }}][{{ d.missing }}][{{ none.x }}]", R"({"d": {}})"), "[][][]");
}

TEST(JinjaTest, AttributeOfUndefinedIsAnError) {
  EXPECT_THAT(Error("{{ u.x }}").message(), HasSubstr("'u' is undefined"));
  EXPECT_THAT(Error("{{ d.missing.x }}", R"({"d": {}})").message(),
              HasSubstr("'dict object' has no attribute 'missing'"));
}

TEST(JinjaTest, RaiseExceptionFailsWithExactlyTheTemplatesMessage) {
  const absl::Status status = Error("a{{ raise_exception('Roles must alternate!') }}");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "Roles must alternate!");
}

TEST(JinjaTest, SyntaxErrorsNameTheLine) {
  EXPECT_THAT(Error("a\n\n{% if %}{% endif %}").message(), HasSubstr("line 3"));
  EXPECT_THAT(Error("{% for x in y %}").message(), HasSubstr("endfor"));
  EXPECT_THAT(Error("{% frobnicate %}").message(), HasSubstr("unknown tag 'frobnicate'"));
  EXPECT_THAT(Error("{{ x|nosuchfilter }}").message(), HasSubstr("No filter named 'nosuchfilter'"));
  EXPECT_THAT(Error("{% break %}").message(), HasSubstr("outside of a loop"));
}

TEST(JinjaTest, UnterminatedTagsAreErrors) {
  for (const std::string source :
       {"{{ x", "{% if x", "{# comment", "{{ 'abc }}", "{{ (1 }}", "{% raw %}x", "{{ ) }}"}) {
    EXPECT_EQ(Error(source).code(), absl::StatusCode::kInvalidArgument) << source;
  }
}

TEST(JinjaTest, TypeErrorsAreErrorsNotCrashes) {
  EXPECT_THAT(Error("{{ 1 + 'a' }}").message(), HasSubstr("unsupported operand"));
  EXPECT_THAT(Error("{{ 1 < 'a' }}").message(), HasSubstr("not supported"));
  EXPECT_THAT(Error("{{ 1 // 0 }}").message(), HasSubstr("ZeroDivisionError"));
  EXPECT_THAT(Error("{% for x in 3 %}{% endfor %}").message(), HasSubstr("not iterable"));
  EXPECT_THAT(Error("{{ 9223372036854775807 + 1 }}").message(), HasSubstr("OverflowError"));
  EXPECT_THAT(Error("{{ [9223372036854775807, 1] | sum }}").message(), HasSubstr("OverflowError"));
  EXPECT_FALSE(Error("{{ none() }}").ok());
  EXPECT_FALSE(Error("{% set a, b = [1] %}").ok());
}

// ---- sandbox and bounds ----

TEST(JinjaTest, SandboxRefusesMutatingMethods) {
  EXPECT_THAT(Error("{% set l = [] %}{{ l.append(1) }}").message(),
              HasSubstr("SecurityError: access to attribute 'append' of 'list' object is unsafe."));
  EXPECT_THAT(Error("{% set d = {} %}{{ d.pop('a') }}").message(), HasSubstr("SecurityError"));
  EXPECT_THAT(Error("{% set d = {} %}{{ d.update({}) }}").message(), HasSubstr("SecurityError"));
  EXPECT_THAT(Error("{{ x.clear() }}", R"({"x": [1]})").message(), HasSubstr("SecurityError"));
}

TEST(JinjaTest, DeepExpressionNestingIsRefused) {
  const std::string parens =
      "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_EQ(Error(parens).code(), absl::StatusCode::kInvalidArgument);
  std::string chain = "{{ 'a'";
  for (int i = 0; i < 100000; ++i) chain += "|upper";
  EXPECT_EQ(Error(chain + " }}").code(), absl::StatusCode::kInvalidArgument);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  EXPECT_EQ(Error(sum + " }}").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error("{{ " + std::string(100000, '-') + "1 }}").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(JinjaTest, DeepBlockNestingIsRefused) {
  std::string source;
  for (int i = 0; i < 10000; ++i) source += "{% if true %}";
  for (int i = 0; i < 10000; ++i) source += "{% endif %}";
  EXPECT_EQ(Error(source).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JinjaTest, UnboundedRecursionIsRefused) {
  const absl::Status status = Error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaTest, HugeLoopsStopAtTheWorkLimit) {
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status =
      Error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_THAT(Error("{% for i in range(10**9) %}{% endfor %}").message(),
              HasSubstr("Range too big"));
}

TEST(JinjaTest, StringRepetitionIsBoundedBeforeAllocating) {
  EXPECT_EQ(Error("{{ 'a' * 10**9 }}").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Error("{{ 'a' * 9223372036854775807 }}").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Error("{{ [1, 2] * 10**9 }}").code(), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaTest, StringDoublingIsBounded) {
  EXPECT_EQ(Error("{% set ns = namespace(s='ab') %}{% for i in range(100) %}"
                  "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}")
                .code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(JinjaTest, PrintingALongListOfALongStringIsBounded) {
  EXPECT_EQ(Error("{% set s = 'a' * 10000000 %}{% set l = [s] * 1000 %}{{ l }}").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Error("{% set s = 'a' * 10000000 %}{% set l = [s] * 1000 %}{{ l|tojson }}").code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(JinjaTest, OutputIsBounded) {
  RenderOptions options = FixedNow();
  options.limits.max_output_bytes = 1000;
  EXPECT_EQ(Error("{% for i in range(2000) %}x{% endfor %}", "{}", options).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Error("{% for i in range(1000) %}x{% endfor %}", "{}", options).ok());
}

TEST(JinjaTest, ANamespaceCannotHoldANamespace) {
  EXPECT_THAT(Error("{% set ns = namespace() %}{% set ns.me = ns %}").message(),
              HasSubstr("cannot hold a namespace"));
  EXPECT_FALSE(Error("{% set ns = namespace(x=none) %}{% for i in range(1000) %}"
                     "{% set ns.x = namespace(p=ns.x) %}{% endfor %}")
                   .ok());
}

TEST(JinjaTest, ValuesNestedWithoutBoundAreRefused) {
  // Freeing a value nested a million deep would overflow the stack.
  EXPECT_FALSE(Error("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                     "{% set ns.x = [ns.x] %}{% endfor %}")
                   .ok());
  EXPECT_FALSE(Error("{% set ns = namespace(x={}) %}{% for i in range(100000) %}"
                     "{% set ns.x = {'a': ns.x}|items|list %}{% endfor %}")
                   .ok());
}

TEST(JinjaTest, DeeplyNestedContextIsRefused) {
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_EQ(Error("{{ x }}", "{\"x\": " + deep + "}").code(), absl::StatusCode::kInvalidArgument);
}

TEST(JinjaTest, ParseDateTimeAcceptsIsoAndRejectsJunk) {
  const absl::StatusOr<std::tm> t = ParseDateTime("2026-11-22T13:04:05");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm_wday, 0);  // a Sunday
  EXPECT_EQ(t->tm_hour, 13);
  EXPECT_FALSE(ParseDateTime("yesterday").ok());
  EXPECT_FALSE(ParseDateTime("2026-13-01").ok());
}

}  // namespace
}  // namespace pagoda::jinja
