// pagoda-make-model's GGUF output as users run it: the file llama.cpp's llama-quantize reads to
// make the 8B shape's Q4_K_M, here in the stories260K shape with Llama 3's vocabulary.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/model/gguf_file.h"
#include "common/model/gguf_model.h"
#include "common/model/random_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/tokenizer_loader.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using testing::RunCommand;

const char kText[] =
    "Hello world! The 8B shape's 128,256 tokens, in Llama 3's merges: ümlaut 日本語.";

std::string Llama3Tokenizer() {
  return testing::SharedPath("models/llama3-tokenizer/tokenizer.json");
}

testing::CommandResult MakeModel(std::vector<std::string> flags) {
  flags.insert(flags.begin(), testing::BinaryPath("pagoda-make-model"));
  return RunCommand(flags);
}

TEST(MakeModelTest, WritesAGgufWithATokenizersVocabularyThatLoadsAndEncodesAsTheTokenizer) {
  const std::string path = testing::TempDir() + "/l3-shaped.gguf";
  const testing::CommandResult r =
      MakeModel({"--shape=stories260K", "--format=gguf", "--dtype=f16", "--context=1024",
                 "--tokenizer=" + Llama3Tokenizer(), "--out=" + path});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  absl::StatusOr<ModelConfig> config = LoadGgufConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  ModelConfig shape;
  ASSERT_TRUE(NamedModelConfig("stories260K", &shape));
  EXPECT_EQ(config->dim, shape.dim);
  EXPECT_EQ(config->hidden_dim, shape.hidden_dim);
  EXPECT_EQ(config->num_layers, shape.num_layers);
  EXPECT_EQ(config->num_kv_heads, shape.num_kv_heads);
  EXPECT_EQ(config->vocab_size, 128256);  // the tokenizer's, not the shape's 512
  EXPECT_EQ(config->max_seq_len, 1024);

  // The vocabulary and merges crossed whole: the file encodes as tokenizer.json does.
  absl::StatusOr<std::unique_ptr<Tokenizer>> from_file = LoadTokenizer(path);
  absl::StatusOr<std::unique_ptr<Tokenizer>> from_json = LoadTokenizer(Llama3Tokenizer());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  const std::vector<int> ids = (*from_file)->Encode(kText);
  EXPECT_EQ(ids, (*from_json)->Encode(kText));
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 3),
            (std::vector<int>{9906, 1917, 0}));  // "Hello", " world", "!"
  EXPECT_EQ((*from_file)->bos_id(), 128000);
  EXPECT_EQ((*from_file)->eos_id(), 128001);

  // Matrices in F16, U(-1, 1)/sqrt(fan-in) and not constant; norms 1 in F32.
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().at("blk.0.attn_q.weight").type, GgmlType::kF16);
  const int64_t dim = shape.dim;
  absl::StatusOr<std::vector<float>> q =
      (*file)->Read("blk.0.attn_q.weight", std::vector<int64_t>{dim, dim});
  ASSERT_TRUE(q.ok()) << q.status();
  float lo = 1, hi = -1;
  for (float x : *q) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_LE(hi, 1.0f / std::sqrt(static_cast<float>(dim)) * 1.001f);
  EXPECT_GT(hi - lo, 0.2f / std::sqrt(static_cast<float>(dim)));
  absl::StatusOr<std::vector<float>> norm =
      (*file)->Read("blk.4.ffn_norm.weight", std::vector<int64_t>{dim});
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_THAT(*norm, ::testing::Each(1.0f));
  EXPECT_FALSE((*file)->HasTensor("output.weight"));  // stories260K ties its embeddings
}

TEST(MakeModelTest, TheSeedDecidesTheWeights) {
  const std::string dir = testing::TempDir();
  std::vector<std::string> bytes;
  for (const char* seed : {"1", "1", "2"}) {
    const std::string path = dir + "/seed" + seed + "-" + std::to_string(bytes.size()) + ".gguf";
    ASSERT_EQ(MakeModel({"--shape=stories260K", "--format=gguf", "--tokenizer=" + Llama3Tokenizer(),
                         std::string("--seed=") + seed, "--out=" + path})
                  .exit_code,
              0);
    bytes.push_back(testing::ReadFile(path));
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_NE(bytes[0], bytes[2]);
}

TEST(MakeModelTest, RefusesWhatItCannotWrite) {
  const std::string out = "--out=" + testing::TempDir() + "/refused.gguf";
  testing::CommandResult r = MakeModel({"--shape=8B", "--format=gguf", out});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--format=gguf takes --tokenizer"));
  r = MakeModel({"--shape=1B", "--context=4096", out});
  EXPECT_EQ(r.exit_code, 2);
  // A SentencePiece-style vocabulary is not what this writes (llama.cpp's "llama" model).
  r = MakeModel({"--shape=stories260K", "--format=gguf",
                 "--tokenizer=" + testing::SharedPath("models/llama2-tokenizer/tokenizer.json"),
                 out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("not a byte-level BPE tokenizer"));
  r = MakeModel({"--shape=stories260K", "--format=gguf", "--tokenizer=/nonexistent.json", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent.json"));
}

}  // namespace
}  // namespace pagoda
