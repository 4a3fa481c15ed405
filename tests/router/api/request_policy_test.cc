#include "router/api/request_policy.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/llama2c_tokenizer.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

class RequestPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Llama2cTokenizer::Load(testing::Stories260KTokenizer());
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
  }
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
};

TEST_F(RequestPolicyTest, APromptGetsTheTokenizersSpecialTokensUnlessTheyAreWrittenAlready) {
  const absl::StatusOr<std::vector<int>> prompt = EncodePrompt(*tokenizer_, "Once upon", 256);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt, tokenizer_->Encode("Once upon", /*add_special_tokens=*/true));
  EXPECT_EQ(prompt->front(), tokenizer_->bos_id());
  const absl::StatusOr<std::vector<int>> rendered =
      EncodePrompt(*tokenizer_, "Once upon", 256, "messages", /*add_special_tokens=*/false);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, tokenizer_->Encode("Once upon"));
}

TEST_F(RequestPolicyTest, ATextLongerThanTheModelLengthCouldCoverIsRefusedNamingItsField) {
  EXPECT_TRUE(EncodePrompt(*tokenizer_, std::string(64, 'a'), 1).ok());
  const absl::Status too_long =
      EncodePrompt(*tokenizer_, std::string(65, 'a'), 1, "messages").status();
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("messages: 65 bytes"));
}

TEST(ResolveSamplingTest, UnsetFieldsComeFromTheModelAndSetOnesWin) {
  ModelConfig model;
  model.default_temperature = 0.6f;
  model.default_top_p = 0.9f;
  model.default_top_k = 40;
  SamplingParams given;
  given.min_p = 0.05f;
  given.logprobs = 3;
  const SamplingParams defaults = ResolveSampling(SamplingOverrides(), model, given);
  EXPECT_EQ(defaults.temperature, 0.6f);
  EXPECT_EQ(defaults.top_p, 0.9f);
  EXPECT_EQ(defaults.top_k, 40);
  EXPECT_EQ(defaults.repetition_penalty, 1.0f);
  EXPECT_EQ(defaults.min_p, 0.05f) << "fields without a model default are kept";
  EXPECT_EQ(defaults.logprobs, 3);

  SamplingOverrides set;
  set.temperature = 0;
  set.top_p = 0.5f;
  set.top_k = 0;
  set.repetition_penalty = 1.2f;
  set.seed = 7;
  const SamplingParams chosen = ResolveSampling(set, model);
  EXPECT_EQ(chosen.temperature, 0);
  EXPECT_EQ(chosen.top_p, 0.5f);
  EXPECT_EQ(chosen.top_k, 0);
  EXPECT_EQ(chosen.repetition_penalty, 1.2f);
  EXPECT_EQ(chosen.seed, 7u);
}

TEST(ResolveSamplingTest, ARequestWithoutASeedGetsAFreshOne) {
  const SamplingParams a = ResolveSampling(SamplingOverrides(), ModelConfig());
  const SamplingParams b = ResolveSampling(SamplingOverrides(), ModelConfig());
  EXPECT_NE(a.seed, b.seed);
}

TEST(WorkerWaitEndTest, ARequestWaitsUntilJustBeforeItsDeadlineOrAFixedTimeWithoutOne) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const absl::Time deadline = now + absl::Seconds(5);
  EXPECT_LT(WorkerWaitEnd(deadline, now), deadline);
  EXPECT_GT(WorkerWaitEnd(deadline, now), deadline - absl::Seconds(1));
  EXPECT_EQ(WorkerWaitEnd(std::nullopt, now), now + kWorkerWait);
}

}  // namespace
}  // namespace pagoda
