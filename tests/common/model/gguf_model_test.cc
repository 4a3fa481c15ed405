// GGUF models: the real stories260K.gguf (made by llama.cpp's converter) holds the llama2.c
// checkpoint's weights and gives run.c's golden tokens; models written here (llama, qwen2, qwen3;
// F32, F16, BF16, Q8_0) compute what the float64 reference computes; a file whose metadata or
// tensors do not make a model is refused naming what is wrong.
#include "common/model/gguf_model.h"

#include <cstring>
#include <functional>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/model/model_loader.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/tokenizer_loader.h"
#include "router/core/engine.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/common/model/model_runs.h"
#include "tests/common/model/reference_model.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/llama_model.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using testing::WriteGgufModel;

std::string Stories260KGguf() {
  return testing::SharedPath("models/stories260K-gguf/stories260K.gguf");
}

TEST(GgufModelTest, Stories260KGgufHoldsTheCheckpointsWeightsInItsRopeLayout) {
  absl::StatusOr<ModelConfig> c = LoadModelConfig(Stories260KGguf());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->dim, 64);
  EXPECT_EQ(c->hidden_dim, 172);
  EXPECT_EQ(c->num_layers, 5);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->max_seq_len, 128) << "the converter's default n_ctx, as the file says";
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved) << "llama.cpp's normal RoPE";
  EXPECT_FALSE(c->tied_embeddings) << "the converter writes output.weight out";
  EXPECT_EQ(c->bos_id, 1);
  EXPECT_EQ(c->eos_ids, std::vector<int>({2}));
  absl::StatusOr<ModelWeights> gguf = LoadModelWeights(Stories260KGguf());
  absl::StatusOr<ModelWeights> bin = LoadModelWeights(testing::Stories260KModel());
  ASSERT_TRUE(gguf.ok() && bin.ok()) << gguf.status() << bin.status();
  EXPECT_EQ(gguf->token_embedding, bin->token_embedding);
  EXPECT_EQ(gguf->classifier, bin->token_embedding);
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(gguf->layers[l].wq, bin->layers[l].wq) << "q rows in the same (interleaved) order";
    EXPECT_EQ(gguf->layers[l].wk, bin->layers[l].wk);
    EXPECT_EQ(gguf->layers[l].w_down, bin->layers[l].w_down);
  }
}

TEST(GgufModelTest, Stories260KGgufGivesTheGoldenTokensAloneAndBatched) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(Stories260KGguf());
  ASSERT_TRUE(config.ok()) << config.status();
  auto tokenizer = LoadModelTokenizer(Stories260KGguf(), "", *config);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto golden = testing::LoadGoldenCases();
  for (const auto& g : golden) {
    EXPECT_EQ((*tokenizer)->Encode(g.prompt, /*add_special_tokens=*/true), g.prompt_ids)
        << "the GGUF's own vocabulary, BOS added as its add_bos_token default says";
  }
  for (bool batched : {false, true}) {
    absl::StatusOr<ModelWeights> w = LoadModelWeights(Stories260KGguf());
    ASSERT_TRUE(w.ok()) << w.status();
    // The file's context_length (128) is the converter's default; the checkpoint was trained
    // on 512 and run.c's golden runs go to 256 positions, as llama.cpp does with -c 256.
    w->config.max_seq_len = 512;
    const std::vector<std::vector<int>> out = testing::GreedyGoldenRuns(*std::move(w), batched);
    ASSERT_EQ(out.size(), golden.size());
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ(out[i], golden[i].greedy_ids) << golden[i].prompt << " batched=" << batched;
    }
  }
}

// --- Models written here ----------------------------------------------------------------------

struct GgufVariant {
  std::string name, arch;
  GgmlType type;
  bool tied;
  float rope_scaling = 0;  // the factor; Llama 3.1's is written as rope_freqs.weight
  RopeScalingType scaling = RopeScalingType::kLlama3;  // when rope_scaling > 0
};

void PrintTo(const GgufVariant& v, std::ostream* os) { *os << v.name; }

class GgufRoundTripTest : public ::testing::TestWithParam<GgufVariant> {};

// Small models of each architecture: what loads computes what the float64 reference computes
// from the loaded tensors; the tensors are the written values (exactly, or within Q8_0's step).
TEST_P(GgufRoundTripTest, LoadsAndComputesWhatTheFloat64ReferenceComputes) {
  const GgufVariant& v = GetParam();
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.hidden_dim = 192;  // whole Q8_0 blocks
  c.tied_embeddings = v.tied;
  c.eos_ids = {2};
  c.rope_style = v.arch == "llama" ? RopeStyle::kInterleaved : RopeStyle::kHalf;
  if (v.rope_scaling > 0) {
    c.rope_scaling.type = v.scaling;
    c.rope_scaling.factor = v.rope_scaling;
    c.rope_scaling.original_max_position = 64;  // so it bends frequencies in this short context
    if (v.scaling != RopeScalingType::kLlama3) c.max_seq_len = c.rope_scaling.ScaledContext();
  }
  if (v.arch == "qwen3") {
    c.qk_norm = true;
    c.head_dim = 16;
  }
  ModelWeights w = RandomModelWeights(c, 5);
  if (v.arch == "qwen2") {
    w.config.qkv_bias = true;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    for (LayerWeights& l : w.layers) {
      for (auto* b : {&l.bq, &l.bk, &l.bv}) b->clear();
      for (int i = 0; i < c.q_dim(); ++i) l.bq.push_back(d(rng));
      for (int i = 0; i < c.kv_dim(); ++i) l.bk.push_back(d(rng)), l.bv.push_back(d(rng));
    }
  }
  const std::string path = testing::TempDir() + "/" + v.name + ".gguf";
  WriteGgufModel(w, v.arch, v.type, path);
  absl::StatusOr<ModelWeights> loaded = LoadModelWeights(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.rope_style, c.rope_style);
  EXPECT_EQ(loaded->config.qkv_bias, v.arch == "qwen2");
  EXPECT_EQ(loaded->config.qk_norm, v.arch == "qwen3");
  EXPECT_EQ(loaded->config.tied_embeddings, v.tied);
  EXPECT_EQ(loaded->config.head_dim, c.head_dim);
  // The values: exact for F32, within the format's rounding otherwise.
  const std::vector<float>& a = w.layers[1].wq;
  const std::vector<float>& b = loaded->layers[1].wq;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    float amax = 0;  // of the Q8_0 block
    for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(a[j]));
    const float tolerance = v.type == GgmlType::kF32   ? 0
                            : v.type == GgmlType::kF16 ? std::fabs(a[i]) / 1024
                            : v.type == GgmlType::kBF16
                                ? std::fabs(a[i]) / 128
                                : amax / 127 * 0.57f;  // half a step + f16 scale
    ASSERT_LE(std::fabs(a[i] - b[i]), tolerance) << v.name << " value " << i;
  }
  EXPECT_EQ(loaded->stored_precision, v.type == GgmlType::kF32    ? StoredPrecision::kF32
                                      : v.type == GgmlType::kF16  ? StoredPrecision::kF16
                                      : v.type == GgmlType::kBF16 ? StoredPrecision::kBf16
                                                                  : StoredPrecision::kQuantized);
  if (v.type == GgmlType::kQ8_0) {
    // --weight-dtype=auto stores Q8_0 as int8, and its layout holds Q8_0's values exactly.
    const Linear wq(b.data(), c.dim, c.q_dim(), {}, false, WeightDtype::kInt8);
    std::vector<float> row(c.dim);
    for (int o = 0; o < c.q_dim(); ++o) {
      wq.Row(o, row.data());
      for (int i = 0; i < c.dim; ++i) ASSERT_EQ(row[i], b[o * c.dim + i]) << o << ", " << i;
    }
  }
  const std::vector<int> tokens = {1, 7, 99, 250, 31, 4, 400, 12, 77, 5, 300, 61, 2, 90, 18};
  const std::vector<double> want = testing::ReferenceLogits(*loaded, tokens);
  const bool llama3 = v.rope_scaling > 0 && v.scaling == RopeScalingType::kLlama3;
  EXPECT_EQ(loaded->config.rope_freq_factors.empty(), !llama3);
  if (!llama3) {  // linear and YaRN as llama.cpp writes them: rope.scaling.* keys
    EXPECT_EQ(loaded->config.rope_scaling.Describe(), c.rope_scaling.Describe());
    EXPECT_EQ(loaded->config.max_seq_len, c.max_seq_len);
  }
  if (llama3 && v.type == GgmlType::kF32) {
    // The factors compute what the scaling does (the reference of the original config).
    const std::vector<double> scaled = testing::ReferenceLogits(w, tokens);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(want[i] - scaled[i]));
    EXPECT_LE(worst, 1e-4);
  }
  const std::vector<float> got = testing::PromptLogits(*std::move(loaded), tokens);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-3) << v.name;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GgufRoundTripTest,
    ::testing::Values(
        GgufVariant{"llama_f32", "llama", GgmlType::kF32, false, 0},
        GgufVariant{"llama31_rope_freqs_f32", "llama", GgmlType::kF32, true, 8},
        GgufVariant{"llama_q8_0", "llama", GgmlType::kQ8_0, true, 0},
        GgufVariant{"llama_linear_f32", "llama", GgmlType::kF32, true, 4, RopeScalingType::kLinear},
        GgufVariant{"qwen2_yarn_f32", "qwen2", GgmlType::kF32, false, 8, RopeScalingType::kYarn},
        GgufVariant{"qwen2_f16", "qwen2", GgmlType::kF16, false, 0},
        GgufVariant{"qwen2_q8_0", "qwen2", GgmlType::kQ8_0, true, 0},
        GgufVariant{"qwen3_bf16", "qwen3", GgmlType::kBF16, true, 0},
        GgufVariant{"qwen3_q8_0", "qwen3", GgmlType::kQ8_0, false, 0}),
    [](const auto& info) { return info.param.name; });

// --- Malformed models ------------------------------------------------------------------------

TEST(GgufModelTest, MetadataAndTensorsThatMakeNoModelAreRefusedNamingTheProblem) {
  const std::string good = testing::TinyGgufModelBytes();
  std::vector<testing::BadGguf> cases;
  auto mutated = [&](auto&&... args) { cases.push_back(testing::MutatedGguf(good, args...)); };
  mutated(
      "architecture", [](std::string& b) { b.replace(b.find("llama"), 5, "gpt2x"); },
      "general.architecture \"gpt2x\" is not supported");
  mutated(
      "missing_key",
      [](std::string& b) {
        const size_t at = b.find("llama.embedding_length");
        b[at] = 'x';
      },
      "no llama.embedding_length");
  mutated(
      "kv_heads",
      [](std::string& b) {
        const size_t at = b.find("llama.attention.head_count_kv") + 29;
        testing::PutAt<uint32_t>(&b, at + 4, 3);
      },
      "must be a multiple of llama.attention.head_count_kv (3)");
  mutated(
      "shape",
      [](std::string& b) {
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.ffn_up.weight") + 4, 32);
        testing::PutAt<uint64_t>(&b, testing::GgufTensorInfoAt(b, "blk.0.ffn_up.weight") + 12, 128);
      },
      "tensor blk.0.ffn_up.weight has shape [128, 32], expected [64, 64]");
  mutated(
      "missing_tensor", [](std::string& b) { b[b.find("blk.0.ffn_gate.weight")] = 'x'; },
      "no tensor blk.0.ffn_gate.weight");
  mutated(
      "eos",
      [](std::string& b) {
        testing::PutAt<uint32_t>(&b, b.find("tokenizer.ggml.eos_token_id") + 27 + 4, 999);
      },
      "tokenizer.ggml.eos_token_id 999 is outside the vocabulary");
  int n = 0;
  for (const testing::BadGguf& c : cases) {
    const std::string path = absl::StrCat(testing::TempDir(), "/bad", n++, ".gguf");
    testing::WriteFile(path, c.bytes);
    // The config first, then (when it is one) the weights.
    absl::Status s = LoadGgufConfig(path).status();
    if (s.ok()) s = LoadGgufModel(path).status();
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.name;
  }
}

}  // namespace
}  // namespace pagoda
