#include "common/model/weights_digest.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

TEST(WeightsDigestTest, OneChangedByteChangesTheDigestAndEqualBytesGiveEqualDigests) {
  const std::string dir = testing::TempDir();
  std::string bytes(10 << 20, 'w');  // more than one read chunk
  testing::WriteFile(dir + "/a.bin", bytes);
  testing::WriteFile(dir + "/b.bin", bytes);
  bytes[7 << 20] ^= 1;
  testing::WriteFile(dir + "/c.bin", bytes);
  const std::string a = WeightsDigest(dir + "/a.bin").value();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, WeightsDigest(dir + "/b.bin").value());
  EXPECT_NE(a, WeightsDigest(dir + "/c.bin").value());
}

TEST(WeightsDigestTest, ADirectoryHashesItsSafetensorsFilesInNameOrder) {
  const std::string dir = testing::TempDir();
  testing::WriteFile(dir + "/model-00001-of-00002.safetensors", "first");
  testing::WriteFile(dir + "/model-00002-of-00002.safetensors", "second");
  testing::WriteFile(dir + "/config.json", "{}");
  const std::string before = WeightsDigest(dir).value();
  testing::WriteFile(dir + "/config.json", "{\"changed\": 1}");  // not a weight file
  EXPECT_EQ(WeightsDigest(dir).value(), before);
  testing::WriteFile(dir + "/model-00002-of-00002.safetensors", "Second");
  EXPECT_NE(WeightsDigest(dir).value(), before);
}

TEST(WeightsDigestTest, AMissingFileOrAnEmptyDirectoryIsAnErrorNamingIt) {
  const std::string dir = testing::TempDir();
  EXPECT_THAT(WeightsDigest(dir + "/nope.bin").status().message(),
              ::testing::HasSubstr("nope.bin"));
  EXPECT_THAT(WeightsDigest(dir).status().message(), ::testing::HasSubstr(".safetensors"));
}

}  // namespace
}  // namespace pagoda
