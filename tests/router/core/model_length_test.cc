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
  EXPECT_THAT(CheckMaxModelLen(-1, config).message(), HasSubstr("--max-model-len=-1"));
}

}  // namespace
}  // namespace pagoda
