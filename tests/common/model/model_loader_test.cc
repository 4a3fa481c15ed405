// Opening a model by path: a file or directory of no supported format is refused naming the
// formats there are.
#include "common/model/model_loader.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST(ModelLoaderTest, OtherFilesAreRefusedNamingTheSupportedFormats) {
  const std::string dir = testing::TempDir();
  testing::WriteFile(dir + "/model.safetensors", std::string(100, 'x'));
  for (const std::string& path : {dir + "/model.safetensors", dir}) {
    const absl::Status s = LoadModelConfig(path).status();
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_THAT(s.message(), HasSubstr("--model takes a GGUF file, a Hugging Face directory"));
  }
}

}  // namespace
}  // namespace pagoda
