#include "common/model/gguf_writer.h"

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Floats(std::vector<float> v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(GgufStreamWriterTest, StreamsTensorsInPiecesThatCrossTheirEnds) {
  GgufStreamWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 7);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b c"});
  w.AddTensorInfo("first", {2, 3}, GgmlType::kF32);
  w.AddTensorInfo("second", {5}, GgmlType::kF32);
  const std::string path = testing::TempDir() + "/streamed.gguf";
  ASSERT_TRUE(w.Open(path).ok());
  // 11 floats in three appends, the second spanning the end of the first tensor.
  const std::vector<uint8_t> all = Floats({0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14});
  ASSERT_TRUE(w.Append(std::span(all).first(8)).ok());
  ASSERT_TRUE(w.Append(std::span(all).subspan(8, 24)).ok());
  ASSERT_TRUE(w.Append(std::span(all).subspan(32)).ok());
  ASSERT_TRUE(w.Close().ok());

  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->IntOr("llama.block_count", 0).value(), 7);
  EXPECT_THAT((*f)->StringArray("tokenizer.ggml.tokens").value(),
              ::testing::ElementsAre("a", "b c"));
  EXPECT_THAT((*f)->Read("first", std::vector<int64_t>{2, 3}).value(),
              ::testing::ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT((*f)->Read("second", std::vector<int64_t>{5}).value(),
              ::testing::ElementsAre(10, 11, 12, 13, 14));
}

TEST(GgufStreamWriterTest, RefusesTooFewTooManyOrPartialBlocks) {
  const std::string path = testing::TempDir() + "/refused.gguf";
  {
    GgufStreamWriter w;
    w.AddTensorInfo("t", {4}, GgmlType::kF32);
    ASSERT_TRUE(w.Open(path).ok());
    ASSERT_TRUE(w.Append(Floats({1, 2, 3})).ok());
    const absl::Status s = w.Close();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("tensor t has 12 of its 16 bytes"));
  }
  {
    GgufStreamWriter w;
    w.AddTensorInfo("t", {2}, GgmlType::kF32);
    ASSERT_TRUE(w.Open(path).ok());
    const absl::Status s = w.Append(Floats({1, 2, 3}));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("4 bytes past the last tensor"));
  }
  {
    GgufStreamWriter w;
    w.AddTensorInfo("q", {33}, GgmlType::kQ8_0);  // Q8_0 rows are whole blocks of 32
    const absl::Status s = w.Open(path);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("q: not whole blocks"));
  }
  GgufStreamWriter w;
  EXPECT_EQ(w.Open("/nonexistent-dir/x.gguf").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(w.Append(Floats({1})).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pagoda
