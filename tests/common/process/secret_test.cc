// The bearer check of API keys and worker tokens.
#include "common/process/secret.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(SecretTest, TheBearerSchemeIsCaseInsensitiveAndTheSecretIsNot) {
  EXPECT_TRUE(BearerMatches("Bearer sesame", "sesame"));
  EXPECT_TRUE(BearerMatches("bearer sesame", "sesame"));
  EXPECT_TRUE(BearerMatches("BEARER sesame", "sesame"));
  EXPECT_FALSE(BearerMatches("Bearer SESAME", "sesame"));
  EXPECT_FALSE(BearerMatches("Basic  sesame", "sesame"));
  EXPECT_FALSE(BearerMatches("Bearer sesame2", "sesame"));
  EXPECT_FALSE(BearerMatches("sesame", "sesame"));
}

}  // namespace
}  // namespace pagoda
