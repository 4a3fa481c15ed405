// `pagoda render-template` as a user runs it, on every case of the chat-template golden sets:
// shared/golden/chat_templates.json and the repo's tests/golden/chat_templates_extra.json
// (tool-calling templates, made by tools/make_chat_golden_extra.py), jinja2 renders of real
// models' templates.
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using testing::BinaryPath;
using testing::CommandResult;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunCommand;
using testing::SharedPath;
using testing::TempDir;
using testing::WriteFile;

constexpr char kFixedNow[] = "--now=2026-11-22T00:00:00";

std::string ExtraGoldenPath() {
  return std::string(PAGODA_SOURCE_DIR) + "/tests/golden/chat_templates_extra.json";
}

// Set 0: the shared golden set; set 1: the repo's tool-calling set.
const nlohmann::ordered_json& Golden(int set = 0) {
  static const auto* shared = new nlohmann::ordered_json(nlohmann::ordered_json::parse(
      ReadFile(SharedPath("golden/chat_templates.json")), nullptr, /*allow_exceptions=*/false));
  static const auto* extra = new nlohmann::ordered_json(nlohmann::ordered_json::parse(
      ReadFile(ExtraGoldenPath()), nullptr, /*allow_exceptions=*/false));
  return set == 0 ? *shared : *extra;
}

// (set, case index) of every case.
using CaseId = std::pair<int, int>;

std::vector<CaseId> CaseIds() {
  std::vector<CaseId> ids;
  for (int set = 0; set < 2; ++set) {
    if (!Golden(set).is_object()) continue;
    for (size_t i = 0; i < Golden(set)["cases"].size(); ++i) {
      ids.emplace_back(set, static_cast<int>(i));
    }
  }
  return ids;
}

const nlohmann::ordered_json& Case(const CaseId& id) {
  return Golden(id.first)["cases"][id.second];
}

std::string CaseName(const ::testing::TestParamInfo<CaseId>& info) {
  const auto& c = Case(info.param);
  std::string name = std::string(info.param.first == 0 ? "" : "Extra_") +
                     c["template"].get<std::string>() + "_" + c["name"].get<std::string>();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

CommandResult Render(const std::string& template_text, const nlohmann::ordered_json& context) {
  const std::string dir = TempDir();
  WriteFile(dir + "/template.jinja", template_text);
  WriteFile(dir + "/context.json", context.dump());
  return RunCommand({BinaryPath("pagoda"), "render-template",
                     "--template-file=" + dir + "/template.jinja",
                     "--context-file=" + dir + "/context.json", kFixedNow});
}

class RenderTemplateGoldenTest : public ::testing::TestWithParam<CaseId> {};

TEST_P(RenderTemplateGoldenTest, MatchesJinja2) {
  const auto& c = Case(GetParam());
  const std::string template_text =
      Golden(GetParam().first)["templates"][c["template"].get<std::string>()];
  const CommandResult r = Render(template_text, c["context"]);
  if (c.contains("expected")) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, c["expected"].get<std::string>());
    EXPECT_EQ(r.err, "");
  } else {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, ::testing::StartsWith("error: "));
    if (c["error_source"] == "raise_exception") {
      EXPECT_THAT(r.err, HasSubstr(c["error"].get<std::string>()));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, RenderTemplateGoldenTest, ::testing::ValuesIn(CaseIds()),
                         CaseName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RenderTemplateGoldenTest);

TEST(RenderTemplateCommandTest, TheGoldenSetIsThere) {
  ASSERT_TRUE(Golden().is_object()) << SharedPath("golden/chat_templates.json");
  EXPECT_EQ(Golden()["cases"].size(), 186u);
}

TEST(RenderTemplateCommandTest, TheToolCallingGoldenSetIsThere) {
  ASSERT_TRUE(Golden(1).is_object()) << ExtraGoldenPath();
  EXPECT_GE(Golden(1)["cases"].size(), 150u);
  // Every stored template names where it came from.
  for (const auto& [name, text] : Golden(1)["templates"].items()) {
    EXPECT_TRUE(Golden(1)["sources"].contains(name)) << name;
  }
}

// A golden case of the llama3 tokenizer's template, rendered from a model directory.
class RenderTemplateModelDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Golden().is_object());
    for (const auto& c : Golden()["cases"]) {
      if (c["template"] == "Qwen-Qwen3-0.6B" && c["name"] == "tool_call") golden_case_ = c;
    }
    ASSERT_FALSE(golden_case_.is_null());
    template_ = Golden()["templates"]["Qwen-Qwen3-0.6B"].get<std::string>();
    dir_ = TempDir();
    WriteFile(dir_ + "/context.json", golden_case_["context"].dump());
  }

  CommandResult RenderModel() {
    return RunCommand({BinaryPath("pagoda"), "render-template", "--model=" + dir_,
                       "--context-file=" + dir_ + "/context.json", kFixedNow});
  }

  nlohmann::ordered_json golden_case_;
  std::string template_;
  std::string dir_;
};

TEST_F(RenderTemplateModelDirTest, RendersTheStringFormOfTokenizerConfig) {
  WriteFile(dir_ + "/tokenizer_config.json",
            nlohmann::ordered_json{{"bos_token", nullptr}, {"chat_template", template_}}.dump());
  const CommandResult r = RenderModel();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden_case_["expected"].get<std::string>());
}

TEST_F(RenderTemplateModelDirTest, RendersTheDefaultOfTheListForm) {
  nlohmann::ordered_json config;
  config["chat_template"] = nlohmann::ordered_json::array(
      {{{"name", "rag"}, {"template", "wrong"}}, {{"name", "default"}, {"template", template_}}});
  WriteFile(dir_ + "/tokenizer_config.json", config.dump());
  const CommandResult r = RenderModel();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden_case_["expected"].get<std::string>());
}

TEST_F(RenderTemplateModelDirTest, RendersChatTemplateJinja) {
  WriteFile(dir_ + "/chat_template.jinja", template_);
  const CommandResult r = RenderModel();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden_case_["expected"].get<std::string>());
}

TEST_F(RenderTemplateModelDirTest, AModelWithoutATemplateIsAnError) {
  WriteFile(dir_ + "/tokenizer_config.json", "{}");
  const CommandResult r = RenderModel();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no chat_template"));
}

TEST(RenderTemplateCommandTest, TemplateErrorsExitOneWithTheMessage) {
  const CommandResult r = Render("line one\n{{ x.y.z }}", nlohmann::ordered_json::object());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: line 2: UndefinedError: 'x' is undefined\n");
}

TEST(RenderTemplateCommandTest, NowComesFromTheEnvironmentWhenNoFlagIsGiven) {
  const std::string dir = TempDir();
  WriteFile(dir + "/t.jinja", "{{ strftime_now('%Y-%m-%d') }}");
  WriteFile(dir + "/c.json", "{}");
  const CommandResult r =
      RunCommand({"/usr/bin/env", "PAGODA_TEMPLATE_NOW=2001-02-03T04:05:06", BinaryPath("pagoda"),
                  "render-template", "--template-file=" + dir + "/t.jinja",
                  "--context-file=" + dir + "/c.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2001-02-03");
}

TEST(RenderTemplateCommandTest, BadUsageExitsTwo) {
  EXPECT_EQ(
      RunCommand({BinaryPath("pagoda"), "render-template", "--context-file=x.json"}).exit_code, 2);
}

}  // namespace
}  // namespace pagoda
