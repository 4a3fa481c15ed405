#include "router/core/model_length.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(ModelLengthTest, UpToTheModelsContextAndNoFurther) {
  ModelConfig config;
  config.max_seq_len = 4096;
  EXPECT_TRUE(CheckMaxModelLen(0, config).ok());  // the model's own
  EXPECT_TRUE(CheckMaxModelLen(1, config).ok());
  EXPECT_TRUE(CheckMaxModelLen(4096, config).ok());
  const absl::Status above = CheckMaxModelLen(4097, config);
  EXPECT_EQ(above.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(above.message(),
              HasSubstr("--max-model-len=4097 is above the model's context of 4096 tokens"));
  EXPECT_THAT(above.message(), HasSubstr("--rope-scaling="));
  EXPECT_THAT(CheckMaxModelLen(-1, config).message(), HasSubstr("--max-model-len=-1"));
}

TEST(ModelLengthTest, ScalingConfiguredAllowsUpToOriginalTimesFactor) {
  ModelConfig config;
  config.max_seq_len = 4096;
  ASSERT_TRUE(ApplyRopeScalingFlag(R"({"rope_type":"yarn","factor":4})", &config).ok());
  EXPECT_TRUE(CheckMaxModelLen(16384, config).ok());
  const absl::Status above = CheckMaxModelLen(16385, config);
  EXPECT_EQ(above.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(above.message(),
              HasSubstr("--max-model-len=16385 is above the model's context of 16384 tokens, "
                        "RoPE scaling (yarn:4:4096"));
}

TEST(ModelLengthTest, APoolShorterThanOneSequenceIsNamedWithBothSizes) {
  EXPECT_EQ(KvPoolShortfall(4096, 256, 16, "f32"), "");  // exactly one sequence
  const std::string w = KvPoolShortfall(16384, 256, 16, "bf16");
  EXPECT_THAT(w, HasSubstr("its KV pool holds 4096 tokens (256 blocks of 16, bf16), less than "
                           "one sequence of the model length, 16384"));
  EXPECT_THAT(w, HasSubstr("--max-model-len"));
}

}  // namespace
}  // namespace pagoda
