#include "common/model/llama2c_checkpoint.h"

#include <cstdint>
#include <cstring>

#include "common/model/random_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

TEST(Llama2cCheckpointTest, LoadsStories260KHeaderAsDocumented) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig& c = w->config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(w->classifier.empty());
  ASSERT_EQ(w->layers.size(), 5u);
  EXPECT_EQ(w->layers[0].wk.size(), 32u * 64u);
  EXPECT_EQ(w->layers[4].w_down.size(), 64u * 172u);
}

TEST(Llama2cCheckpointTest, ConfigAloneMatchesTheFullLoadAndChecksTheSize) {
  auto full = LoadLlama2cCheckpoint(testing::Stories260KModel());
  auto config = LoadLlama2cConfig(testing::Stories260KModel());
  ASSERT_TRUE(full.ok() && config.ok());
  EXPECT_EQ(config->Fingerprint(), full->config.Fingerprint());
  const std::string path = TempDir() + "/long.bin";
  WriteFile(path, ReadFile(testing::Stories260KModel()) + "xx");
  EXPECT_THAT(LoadLlama2cConfig(path).status().message(), HasSubstr("oversized"));
}

TEST(Llama2cCheckpointTest, WriteThenLoadRoundTripsAnUntiedModel) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.tied_embeddings = false;
  const ModelWeights w = RandomModelWeights(c, 7);
  const std::string path = TempDir() + "/untied.bin";
  ASSERT_TRUE(WriteLlama2cCheckpoint(w, path).ok());
  absl::StatusOr<ModelWeights> back = LoadLlama2cCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->config.tied_embeddings);
  EXPECT_EQ(back->classifier, w.classifier);
  EXPECT_EQ(back->layers[3].w_up, w.layers[3].w_up);
  EXPECT_EQ(back->final_norm, w.final_norm);
}

class MalformedCheckpointTest : public ::testing::Test {
 protected:
  std::string original_ = ReadFile(testing::Stories260KModel());
  std::string Write(const std::string& data) {
    const std::string path = TempDir() + "/bad.bin";
    WriteFile(path, data);
    return path;
  }
  std::string WithHeaderInt(int index, int32_t value) {
    std::string data = original_;
    std::memcpy(&data[4 * index], &value, 4);
    return data;
  }
};

TEST_F(MalformedCheckpointTest, MissingFileIsNotFound) {
  auto w = LoadLlama2cCheckpoint(TempDir() + "/nope.bin");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MalformedCheckpointTest, TruncatedHeader) {
  auto w = LoadLlama2cCheckpoint(Write(original_.substr(0, 10)));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("truncated"));
}

TEST_F(MalformedCheckpointTest, TruncatedWeightsNameTheTensor) {
  auto w = LoadLlama2cCheckpoint(Write(original_.substr(0, 28 + 512 * 64 * 4 + 100)));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("truncated"));
  EXPECT_THAT(w.status().message(), HasSubstr("rms_att_weight"));
}

TEST_F(MalformedCheckpointTest, OversizedFile) {
  auto w = LoadLlama2cCheckpoint(Write(original_ + std::string(64, '\0')));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("oversized"));
}

TEST_F(MalformedCheckpointTest, BadHeaderValues) {
  for (auto [index, value, field] : {std::tuple{0, 0, "dim"},
                                     {0, -5, "dim"},
                                     {2, 0, "n_layers"},
                                     {3, 6, "n_heads"},
                                     {4, 3, "n_kv_heads"},
                                     {4, 9, "n_kv_heads"},
                                     {4, 3, "n_kv_heads"},
                                     {5, 0, "vocab"},
                                     {6, -1, "seq_len"},
                                     {0, 1 << 30, "dim"}}) {
    auto w = LoadLlama2cCheckpoint(Write(WithHeaderInt(index, value)));
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << field << "=" << value;
    EXPECT_THAT(w.status().message(), HasSubstr(field)) << field << "=" << value;
  }
}

TEST_F(MalformedCheckpointTest, HugeHeaderDoesNotAllocateBeforeChecking) {
  // A plausible header that would need gigabytes: rejected as truncated, not read.
  std::string data = WithHeaderInt(0, 8192);
  std::memcpy(&data[4], "\x00\x80\x00\x00", 4);  // hidden 32768
  auto w = LoadLlama2cCheckpoint(Write(data));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagoda
