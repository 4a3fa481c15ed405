// pagoda-router's --lora-modules: each adapter goes to the model it fits, or is refused naming
// the flag.
#include "router/lora_modules.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/lora_files.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

class LoraModulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    small_ = testing::Stories260KConfig();
    wide_ = small_;  // another shape: twice the hidden size
    wide_.hidden_dim *= 2;
    dir_ = testing::TempDir();
    testing::WritePeftLora(testing::RandomLoraAdapter(small_, 4, 8, 1), small_, 8, dir_ + "/small");
  }
  std::string Refusal(const std::vector<std::string>& values, const std::vector<LoraBase>& models,
                      const std::vector<std::string>& roots = {}) {
    absl::StatusOr<std::vector<std::vector<LoraModule>>> out =
        AssignLoraModules(values, models, roots);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(out.status().message());
  }

  ModelConfig small_, wide_;
  std::string dir_;
};

TEST_F(LoraModulesTest, AnAdapterGoesToTheModelItFits) {
  const std::string value = "sql=" + dir_ + "/small";
  auto one = AssignLoraModules({value}, {{"stories", &small_}}, {});
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_THAT(*one, SizeIs(1));
  ASSERT_THAT((*one)[0], SizeIs(1));
  EXPECT_EQ((*one)[0][0].name, "sql");
  EXPECT_EQ((*one)[0][0].flag(), value);
  auto two = AssignLoraModules({value}, {{"wide", &wide_}, {"stories", &small_}}, {dir_});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT((*two)[0], IsEmpty());
  EXPECT_THAT((*two)[1], SizeIs(1));
  // Names may hold colons: MODEL: only when a served model's name precedes the first one.
  auto named = AssignLoraModules({"stories:sql=" + dir_ + "/small", "x:y=" + dir_ + "/small"},
                                 {{"stories", &small_}, {"other", &small_}}, {});
  ASSERT_TRUE(!named.ok());
  EXPECT_THAT(named.status().message(), HasSubstr("x:y="));
  EXPECT_THAT(named.status().message(), HasSubstr("fits stories and other"));
}

TEST_F(LoraModulesTest, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<LoraBase> models = {{"stories", &small_}};
  const std::string small = dir_ + "/small";
  EXPECT_THAT(Refusal({"sql"}, models), HasSubstr("--lora-modules=sql: expected NAME=PATH"));
  EXPECT_THAT(Refusal({"=" + small}, models), HasSubstr("expected NAME=PATH"));
  EXPECT_THAT(Refusal({"s q=" + small}, models), HasSubstr("1 to 128 bytes"));
  EXPECT_THAT(Refusal({"stories=" + small}, models), HasSubstr("already names a model"));
  EXPECT_THAT(Refusal({"a=" + small, "a=" + small}, models), HasSubstr("another adapter"));
  EXPECT_THAT(Refusal({"a=" + dir_ + "/missing"}, models), HasSubstr("--lora-modules=a="));
  EXPECT_THAT(Refusal({"a=" + small}, {{"wide", &wide_}}), HasSubstr("--lora-modules=a="));
  EXPECT_THAT(Refusal({"a=" + small}, {{"wide", &wide_}, {"wider", &wide_}}),
              HasSubstr("fits none of the models"));
  EXPECT_THAT(Refusal({"a=" + small}, models, {"/usr"}), HasSubstr("--lora-modules=a="))
      << "outside --lora-dir";
  EXPECT_EQ(LoraRoots("", {{{"a", "/x/a"}}, {{"b", "/y/b"}, {"c", "/x/c"}}}),
            (std::vector<std::string>{"/x", "/y"}));
  EXPECT_EQ(LoraRoots("/z", {{{"a", "/x/a"}}}), std::vector<std::string>{"/z"});
}

}  // namespace
}  // namespace pagoda
