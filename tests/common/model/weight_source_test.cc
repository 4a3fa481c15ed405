// WeightSource over each format: the views hold what LoadModelWeights widens (so packing from
// them is packing the checkpoint), a view keeps the file's own type, and a file whose tensors
// do not make the model is an error naming the tensor, before anything is packed.
#include "common/model/weight_source.h"

#include <string>

#include "common/model/hf_model.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/model_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

ModelWeights Stories260K() { return LoadModelWeights(testing::Stories260KModel()).value(); }

TEST(WeightSourceTest, EachFormatsViewsKeepTheFilesTypeAndHoldTheLoadedValues) {
  const std::string dir = testing::TempDir();
  WriteHfModel(Stories260K(), dir + "/hf16", TensorDtype::kF16).IgnoreError();
  testing::WriteGgufModel(Stories260K(), "llama", GgmlType::kBF16, dir + "/bf16.gguf");
  const std::pair<std::string, GgmlType> files[] = {
      {testing::Stories260KModel(), GgmlType::kF32},
      {testing::SharedPath("models/stories260K-gguf/stories260K.gguf"), GgmlType::kF32},
      {dir + "/hf16", GgmlType::kF16},
      {dir + "/bf16.gguf", GgmlType::kBF16}};
  for (const auto& [path, type] : files) {
    absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(path);
    ASSERT_TRUE(source.ok()) << path << ": " << source.status();
    const WeightSource& s = **source;
    EXPECT_EQ(s.View(LlamaTensor::kWq, 0).type, type) << path;
    EXPECT_EQ(s.StoredType(LlamaTensor::kDown, 4), type) << path;
    EXPECT_EQ(s.View(LlamaTensor::kAttnNorm, 0).rows, 1) << path;
    const TensorView& up = s.View(LlamaTensor::kUp, 2);
    EXPECT_EQ(up.rows, s.config().hidden_dim) << path;
    EXPECT_EQ(up.cols, s.config().dim) << path;
    const ModelWeights loaded = LoadModelWeights(path).value();
    EXPECT_EQ(s.Floats(LlamaTensor::kUp, 2), loaded.layers[2].w_up) << path;
    EXPECT_EQ(s.Floats(LlamaTensor::kFinalNorm), loaded.final_norm) << path;
    // Dropping the pages of a tensor loses nothing: they are read again from the file.
    s.Release(LlamaTensor::kUp, 2);
    EXPECT_EQ(s.Floats(LlamaTensor::kUp, 2), loaded.layers[2].w_up) << path;
  }
}

TEST(WeightSourceTest, ATruncatedLlama2cFileNamesTheTensorThatDoesNotFit) {
  const std::string bytes = testing::ReadFile(testing::Stories260KModel());
  const std::string path = testing::TempDir() + "/short.bin";
  testing::WriteFile(path, bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(path);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(source.status().message()),
              HasSubstr("truncated checkpoint: layer 3.w1 needs bytes"));
}

TEST(WeightSourceTest, AShortGgufTensorIsRefusedNamingIt) {
  const std::string good = testing::TinyGgufModelBytes();
  const testing::BadGguf bad = testing::MutatedGguf(
      good, "shape",
      [](std::string& b) {
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.attn_q.weight") + 12, 32);
      },
      "tensor blk.0.attn_q.weight has shape [32, 64], expected [64, 64]");
  const std::string path = testing::TempDir() + "/short_q.gguf";
  testing::WriteFile(path, bad.bytes);
  absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(path);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(source.status().message(), HasSubstr(bad.message));
}

TEST(WeightSourceTest, WeightsWhoseSizesDisagreeWithTheirConfigAreRefused) {
  ModelWeights w = Stories260K();
  w.layers[3].wv.pop_back();
  absl::StatusOr<std::unique_ptr<WeightSource>> source = WeightSource::FromWeights(std::move(w));
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(source.status().message(), HasSubstr("model.layers.3.self_attn.v_proj.weight"));
}

}  // namespace
}  // namespace pagoda
