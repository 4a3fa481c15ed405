// The Grafana dashboard (deploy/grafana/pagoda-dashboard.json) against a real router: every
// metric its PromQL reads is one the router exports, under the $model_name the dashboard
// selects, and every metric family the router exports is on the dashboard. The ConfigMap is
// generated from the same file by kustomize (deploy/grafana/kustomization.yaml), and
// deploy/k8s/validate checks the rendered one, so the two cannot drift.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using Json = nlohmann::json;

// A metric a PromQL expression reads: its name and its label matchers ("" without braces).
struct Selector {
  std::string name;
  std::string matchers;
};

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == ':'; }

// Words of PromQL that stand where a metric name could: aggregations (`sum by (le) (…)`),
// modifiers, binary operators and number literals.
bool IsKeyword(std::string_view word) {
  static const std::set<std::string_view> kKeywords = {
      "sum",    "min",          "max",        "avg",         "group",    "stddev", "stdvar",
      "count",  "count_values", "bottomk",    "topk",        "quantile", "by",     "without",
      "on",     "ignoring",     "group_left", "group_right", "bool",     "and",    "or",
      "unless", "offset",       "atan2",      "inf",         "nan",      "Inf",    "NaN"};
  return kKeywords.contains(word);
}

// The index just past the quoted string that starts at `at`.
size_t SkipString(std::string_view expr, size_t at) {
  const char quote = expr[at];
  for (size_t i = at + 1; i < expr.size(); ++i) {
    if (expr[i] == '\\' && quote != '`') {
      ++i;
    } else if (expr[i] == quote) {
      return i + 1;
    }
  }
  return expr.size();
}

// The index just past the bracket that closes the one at `at` (strings inside skipped).
size_t SkipGroup(std::string_view expr, size_t at) {
  const char open = expr[at];
  const char close = open == '{' ? '}' : open == '[' ? ']' : ')';
  int depth = 0;
  for (size_t i = at; i < expr.size();) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(expr, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return expr.size();
}

size_t SkipSpaces(std::string_view expr, size_t at) {
  while (at < expr.size() && absl::ascii_isspace(expr[at])) ++at;
  return at;
}

// The metrics a PromQL expression reads: names outside strings, label matchers, ranges and
// grouping lists that are neither calls, keywords nor Grafana variables ($__rate_interval).
std::vector<Selector> MetricSelectors(std::string_view expr) {
  std::vector<Selector> out;
  for (size_t i = 0; i < expr.size();) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(expr, i);
    } else if (c == '{' || c == '[') {
      i = SkipGroup(expr, i);
    } else if (c == '$') {
      i = i + 1 < expr.size() && expr[i + 1] == '{' ? SkipGroup(expr, i + 1) : i + 1;
      while (i < expr.size() && IsNameChar(expr[i])) ++i;
    } else if (absl::ascii_isdigit(c) || c == '.') {
      while (i < expr.size() && (IsNameChar(expr[i]) || expr[i] == '.')) ++i;  // 0.99, 1e3, 5m
    } else if (IsNameStart(c)) {
      const size_t start = i;
      while (i < expr.size() && IsNameChar(expr[i])) ++i;
      const std::string_view word = expr.substr(start, i - start);
      const size_t next = SkipSpaces(expr, i);
      const bool grouping = word == "by" || word == "without" || word == "on" ||
                            word == "ignoring" || word == "group_left" || word == "group_right";
      if (grouping && next < expr.size() && expr[next] == '(') {
        i = SkipGroup(expr, next);  // a list of labels
      } else if (next < expr.size() && expr[next] == '(') {
        i = next;  // a function call: its arguments are read next
      } else if (!IsKeyword(word)) {
        Selector s{std::string(word), ""};
        if (next < expr.size() && expr[next] == '{') {
          i = SkipGroup(expr, next);
          s.matchers = std::string(expr.substr(next + 1, i - next - 2));
        }
        out.push_back(std::move(s));
      }
    } else {
      ++i;
    }
  }
  return out;
}

// The family a series name belongs to: a histogram's _bucket, _sum and _count are its own.
std::string Family(absl::string_view name) {
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::ConsumeSuffix(&name, suffix)) break;
  }
  return std::string(name);
}

// Every string under the key `key`, anywhere in `json`.
void CollectStrings(const Json& json, const std::string& key, std::vector<std::string>* out) {
  if (json.is_object()) {
    for (const auto& [k, v] : json.items()) {
      if (k == key && v.is_string()) out->push_back(v.get<std::string>());
      CollectStrings(v, key, out);
    }
  } else if (json.is_array()) {
    for (const Json& v : json) CollectStrings(v, key, out);
  }
}

Json LoadDashboard() {
  return Json::parse(testing::ReadFile(PAGODA_SOURCE_DIR "/deploy/grafana/pagoda-dashboard.json"));
}

// Metric name -> type, from the "# TYPE" lines of a /metrics page.
std::map<std::string, std::string> ExportedFamilies(const std::string& metrics) {
  std::map<std::string, std::string> families;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
    const std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 2) families[parts[0]] = parts[1];
  }
  return families;
}

TEST(GrafanaDashboardParserTest, FindsMetricsAndTheirMatchersButNoLabelsOrFunctions) {
  const std::vector<Selector> found = MetricSelectors(
      "histogram_quantile(0.99, sum by (le, worker) (rate(a_bucket{model_name=\"$model_name\", "
      "x=~\"}b{\"}[$__rate_interval]))) / on (worker) group_left c + sum without (d) (e) * 1e3 "
      "offset 5m");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].name, "a_bucket");
  EXPECT_EQ(found[0].matchers, "model_name=\"$model_name\", x=~\"}b{\"");
  EXPECT_EQ(found[1].name, "c");
  EXPECT_EQ(found[2].name, "e");
  EXPECT_EQ(Family("a_bucket"), "a");
  EXPECT_EQ(Family("a_total"), "a_total");
}

TEST(GrafanaDashboardJsonTest, HasItsVariablesAndEveryPanelReadsTheChosenDataSource) {
  const Json dashboard = LoadDashboard();
  std::map<std::string, Json> variables;
  for (const Json& v : dashboard.at("templating").at("list")) variables[v.at("name")] = v;
  ASSERT_TRUE(variables.contains("datasource"));
  EXPECT_EQ(variables["datasource"].at("type"), "datasource");
  EXPECT_EQ(variables["datasource"].at("query"), "prometheus");
  ASSERT_TRUE(variables.contains("model_name"));
  EXPECT_EQ(variables["model_name"].at("type"), "query");
  EXPECT_EQ(variables["model_name"].at("datasource").at("uid"), "${datasource}");

  std::set<int> ids;
  int num_targets = 0;
  for (const Json& panel : dashboard.at("panels")) {
    const std::string title = panel.at("title");
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "a second panel id: " << title;
    const Json& pos = panel.at("gridPos");
    EXPECT_LE(pos.at("x").get<int>() + pos.at("w").get<int>(), 24) << title;
    if (panel.at("type") == "row") continue;
    EXPECT_EQ(panel.at("datasource").at("uid"), "${datasource}") << title;
    ASSERT_FALSE(panel.at("targets").empty()) << title;
    for (const Json& target : panel.at("targets")) {
      EXPECT_EQ(target.at("datasource").at("uid"), "${datasource}") << title;
      ++num_targets;
    }
  }
  EXPECT_GT(num_targets, 40);
}

class GrafanaDashboardTest : public ServingTest {
 protected:
  // Drafts on: the per-position acceptance family appears with the first draft token kept.
  std::vector<std::string> ExtraRouterFlags() const override { return {"--speculative=suffix"}; }
};

TEST_F(GrafanaDashboardTest, ReadsEveryMetricTheRouterExportsAndNoOther) {
  // The worker as a group of two pipeline stages (its two slices are the router's workers), so
  // the per-stage series exist too. The golden story twice: the second time the suffix index
  // holds it and drafts are kept.
  StartWorker("", {"--layers=0:2", "--kv-transfer-port=-1"});
  StartWorker("", {"--layers=2:5", "--kv-transfer-port=-1"});
  WaitForWorkers(2);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(Generate(Greedy(golden_[0].prompt)).status.ok());
  WaitForNoUsedBlocks();
  const std::string metrics = Metrics();
  const std::map<std::string, std::string> exported = ExportedFamilies(metrics);
  ASSERT_GT(exported.size(), 20u) << metrics;

  const Json dashboard = LoadDashboard();
  std::vector<std::string> queries;
  CollectStrings(dashboard, "expr", &queries);
  CollectStrings(dashboard.at("templating"), "definition", &queries);
  std::set<std::string> used;  // families
  for (const std::string& query : queries) {
    // label_values(METRIC, LABEL): a variable's query, not PromQL.
    absl::string_view promql = query;
    const bool is_promql = !absl::ConsumePrefix(&promql, "label_values(");
    if (!is_promql) promql = promql.substr(0, promql.find(','));
    for (const Selector& s : MetricSelectors(std::string_view(promql.data(), promql.size()))) {
      EXPECT_TRUE(absl::StartsWith(s.name, "pagoda_")) << s.name << " in " << query;
      if (is_promql) {  // the chosen model's series only
        EXPECT_TRUE(absl::StrContains(s.matchers, "model_name=\"$model_name\"")) << query;
      }
      const std::string family = Family(s.name);
      used.insert(family);
      const auto it = exported.find(family);
      if (family != s.name && it != exported.end()) {
        EXPECT_EQ(it->second, "histogram") << s.name << " in " << query;
      }
    }
  }

  for (const std::string& family : used) {
    EXPECT_TRUE(exported.contains(family)) << family << " is on the dashboard, not in /metrics";
  }
  for (const auto& [family, type] : exported) {
    // vLLM's names, kept for the tools that read them (the Gateway API inference extension
    // reads vllm:lora_requests_info): the dashboard shows Pagoda's own.
    if (absl::StartsWith(family, "vllm:")) continue;
    EXPECT_TRUE(used.contains(family))
        << "the router exports " << family << " (" << type << "), the dashboard does not show it";
  }
}

}  // namespace
}  // namespace pagoda
