// Hugging Face directories: the real stories260K-hf gives run.c's golden tokens, and random
// models written here in every supported variant (Llama, Llama 3 scaling, Mistral, Qwen2 biases,
// Qwen3 q/k norms with an explicit head_dim; F32/F16/BF16) load back and compute what an
// independent float64 reference computes from the same tensors, alone and batched. Malformed files
// give errors naming what is wrong.
#include "common/model/hf_model.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/model_loader.h"
#include "common/model/random_weights.h"
#include "common/numeric.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/engine.h"
#include "tests/common/model/model_runs.h"
#include "tests/common/model/reference_model.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/llama_model.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::string HfDir() { return testing::SharedPath("models/stories260K-hf"); }

// Pagoda's float32 logits against the float64 reference of the same weights.
void ExpectNearReference(const std::vector<float>& got, const std::vector<double>& want,
                         double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tolerance) << what;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_LE(worst, tolerance);
}

TEST(HfModelTest, Stories260KHfGivesTheGoldenTokensAloneAndBatched) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(HfDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dim, 64);
  EXPECT_EQ(config->num_kv_heads, 4);
  EXPECT_EQ(config->rope_style, RopeStyle::kHalf);
  EXPECT_TRUE(config->tied_embeddings);
  EXPECT_EQ(config->eos_ids, std::vector<int>({1, 2}))  // config.json's, and
      << "generation_config.json's";
  const auto golden = testing::LoadGoldenCases();
  for (bool batched : {false, true}) {
    absl::StatusOr<ModelWeights> w = LoadModelWeights(HfDir());
    ASSERT_TRUE(w.ok()) << w.status();
    const std::vector<std::vector<int>> out = testing::GreedyGoldenRuns(*std::move(w), batched);
    ASSERT_EQ(out.size(), golden.size());
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ(out[i], golden[i].greedy_ids) << golden[i].prompt << " batched=" << batched;
    }
  }
}

struct Variant {
  std::string name;
  int num_kv_heads;
  bool tied;
  bool bias;
  float rope_scaling;
  TensorDtype dtype;
  bool qk_norm = false;      // Qwen3 (with head_dim 16: heads x head_dim != hidden size)
  std::string architecture;  // replaces the written one in config.json when set
  RopeScalingType scaling = RopeScalingType::kLlama3;  // when rope_scaling > 0
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

class HfRoundTripTest : public ::testing::TestWithParam<Variant> {};

// Values as the dtype holds them.
void RoundTo(TensorDtype dtype, std::vector<float>* v) {
  for (float& x : *v) {
    if (dtype == TensorDtype::kF16) x = HalfToFloat(FloatToHalf(x));
    if (dtype == TensorDtype::kBF16) x = Bf16ToFloat(FloatToBf16(x));
  }
}

TEST_P(HfRoundTripTest, LoadsAndComputesWhatTheFloat64ReferenceComputes) {
  const Variant& v = GetParam();
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.num_kv_heads = v.num_kv_heads;
  c.tied_embeddings = v.tied;
  if (v.rope_scaling > 0) {
    c.rope_scaling.type = v.scaling;
    c.rope_scaling.factor = v.rope_scaling;
    c.rope_scaling.original_max_position = 64;  // so it bends frequencies in this short context
    if (v.scaling != RopeScalingType::kLlama3) c.max_seq_len = c.rope_scaling.ScaledContext();
  }
  c.eos_ids = {2};
  if (v.qk_norm) {
    c.qk_norm = true;
    c.head_dim = 16;
  }
  ModelWeights w = RandomModelWeights(c, 7);
  if (v.bias) {
    w.config.qkv_bias = true;
    for (LayerWeights& l : w.layers) {
      l.bq.assign(c.q_dim(), 0.25f);
      l.bk.assign(c.kv_dim(), -0.5f);
      l.bv.assign(c.kv_dim(), 0.125f);
      for (size_t i = 0; i < l.bq.size(); ++i) l.bq[i] += 0.01f * i;
      for (size_t i = 0; i < l.bk.size(); ++i) l.bk[i] -= 0.02f * i;
    }
  }
  const std::string dir = testing::TempDir() + "/" + v.name;
  ASSERT_TRUE(WriteHfModel(w, dir, v.dtype).ok());
  if (!v.architecture.empty()) {
    std::string config = testing::ReadFile(dir + "/config.json");
    const std::string written = "LlamaForCausalLM";
    config.replace(config.find(written), written.size(), v.architecture);
    testing::WriteFile(dir + "/config.json", config);
  }
  absl::StatusOr<ModelWeights> loaded = LoadModelWeights(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->config.rope_style, RopeStyle::kHalf);
  EXPECT_EQ(loaded->config.qkv_bias, v.bias);
  EXPECT_EQ(loaded->config.qk_norm, v.qk_norm);
  EXPECT_EQ(loaded->config.head_dim, c.head_dim);
  EXPECT_EQ(loaded->config.rope_scaling.Describe(), c.rope_scaling.Describe());
  EXPECT_EQ(loaded->config.max_seq_len, c.max_seq_len);

  // The in-memory weights (interleaved RoPE) at the file's precision.
  ModelWeights reference = w;
  for (std::vector<float>* t :
       {&reference.token_embedding, &reference.final_norm, &reference.classifier}) {
    RoundTo(v.dtype, t);
  }
  for (LayerWeights& l : reference.layers) {
    for (std::vector<float>* t :
         {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
          &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down}) {
      RoundTo(v.dtype, t);
    }
  }
  const std::vector<int> tokens = {1,   7,  99, 250, 31, 4,  400, 12,  77, 5,
                                   300, 61, 2,  90,  18, 44, 8,   501, 3,  260,
                                   70,  11, 9,  128, 33, 6,  211, 17,  19, 23};
  // The float64 reference, on the tensors as loaded (HF's rotate-half layout) and on the
  // in-memory ones (interleaved: checks the writer's q/k permutation), agrees with Pagoda's
  // logits for the prompt alone and batched with another.
  const std::vector<int> other = {1, 3, 5, 7, 300, 2, 4};
  const std::vector<double> want = testing::ReferenceLogits(*loaded, tokens);
  const std::vector<double> want_other = testing::ReferenceLogits(*loaded, other);
  ExpectNearReference(testing::PromptLogits(reference, tokens),
                      testing::ReferenceLogits(reference, tokens), 1e-3, "in memory");
  ExpectNearReference(testing::PromptLogits(*loaded, tokens), want, 1e-3, "alone");
  const auto batched = testing::BatchLogits(*loaded, {other, tokens});
  ExpectNearReference(batched[0], want_other, 1e-3, "batched, first");
  ExpectNearReference(batched[1], want, 1e-3, "batched, second");
  const std::vector<float> expected = testing::PromptLogits(std::move(reference), tokens);
  ExpectNear(testing::PromptLogits(*std::move(loaded), tokens), expected, 2e-4f);

  // The llama2.c format can hold the same model when it has no bias and no RoPE scaling.
  if (!v.bias && !v.qk_norm && v.rope_scaling == 0 && v.dtype == TensorDtype::kF32) {
    const std::string bin = dir + ".bin";
    ASSERT_TRUE(WriteLlama2cCheckpoint(w, bin).ok());
    absl::StatusOr<ModelWeights> via_bin = LoadModelWeights(bin);
    ASSERT_TRUE(via_bin.ok()) << via_bin.status();
    ExpectNear(testing::PromptLogits(*std::move(via_bin), tokens), expected, 2e-4f);
  }
}

TEST(HfRoundTripTest, Llama3RopeScalingChangesTheModel) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  ModelWeights plain = RandomModelWeights(c, 3);
  ModelWeights scaled = plain;
  scaled.config.rope_scaling = {
      .type = RopeScalingType::kLlama3, .factor = 8, .original_max_position = 64};
  const std::vector<int> tokens(40, 5);
  const auto a = testing::PromptLogits(std::move(plain), tokens);
  const auto b = testing::PromptLogits(std::move(scaled), tokens);
  EXPECT_NE(a, b);
  EXPECT_NEAR(ModelConfig(c).RopeFrequency(0), 1.0f, 1e-6) << "pair 0 turns at 1 rad per token";
}

INSTANTIATE_TEST_SUITE_P(
    Variants, HfRoundTripTest,
    ::testing::Values(
        Variant{"gqa_tied_f32", 4, true, false, 0, TensorDtype::kF32, false, ""},
        Variant{"mha_untied_f32", 8, false, false, 0, TensorDtype::kF32, false, ""},
        Variant{"gqa_untied_f16", 2, false, false, 0, TensorDtype::kF16, false, ""},
        Variant{"gqa_tied_bf16", 4, true, false, 0, TensorDtype::kBF16, false, ""},
        Variant{"qwen2_bias_f32", 4, false, true, 0, TensorDtype::kF32, false, ""},
        Variant{"llama3_scaling_bf16", 4, true, false, 8, TensorDtype::kBF16, false, ""},
        Variant{"mistral_f16", 4, false, false, 0, TensorDtype::kF16, false, "MistralForCausalLM"},
        Variant{"qwen3_tied_f32", 4, true, false, 0, TensorDtype::kF32, true, ""},
        Variant{"qwen3_untied_bf16", 2, false, false, 0, TensorDtype::kBF16, true, ""},
        Variant{"qwen3_mha_f16", 8, true, false, 0, TensorDtype::kF16, true, ""},
        Variant{"qwen2_yarn_f32", 4, false, true, 8, TensorDtype::kF32, false, "",
                RopeScalingType::kYarn},
        Variant{"linear_scaling_f32", 4, true, false, 4, TensorDtype::kF32, false, "",
                RopeScalingType::kLinear}),
    [](const auto& info) { return info.param.name; });

// --- Malformed files --------------------------------------------------------------------

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A copy of stories260K-hf's config with `from` replaced by `to`, in a directory of its own.
std::string ConfigWith(const std::string& from, const std::string& to) {
  std::string text = testing::ReadFile(HfDir() + "/config.json");
  const size_t at = text.find(from);
  CHECK_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  static int n = 0;
  const std::string dir = absl::StrCat(testing::TempDir(), "/config", ++n);
  std::filesystem::create_directories(dir);
  WriteText(dir + "/config.json", text);
  std::filesystem::copy_file(HfDir() + "/model.safetensors", dir + "/model.safetensors");
  return dir;
}

TEST(HfModelTest, MalformedConfigsAreRefusedNamingTheProblem) {
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"LlamaForCausalLM", "GPT2LMHeadModel", "architecture \"GPT2LMHeadModel\" is not supported"},
      {"\"hidden_size\": 64,", "", "missing hidden_size"},
      {"\"hidden_size\": 64", "\"hidden_size\": \"64\"", "hidden_size"},
      {"\"num_key_value_heads\": 4", "\"num_key_value_heads\": 3", "multiple of"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 4}",
       "rope_scaling: type \"dynamic\" is not supported (linear, llama3, yarn)"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 4}",
       "rope_scaling: type \"longrope\" is not supported"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 0.5}",
       "rope_scaling: factor = 0.5 must be >= 1"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act"},
      {"\"eos_token_id\": 2", "\"eos_token_id\": 9999", "eos_token_id 9999"},
      {"{", "{{", "config.json: not valid JSON: parse error at line 1"},
      // A wrong type is an error naming the field, not an exception.
      {"\"LlamaForCausalLM\"", "7", "architectures: not a string"},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\": [1]", "hidden_act must be a string"},
      {"\"rope_scaling\": null", "\"rope_scaling\": {\"type\": 3}", "rope_scaling: type must be"},
      {"\"rms_norm_eps\"", "\"rms_norm_eps\": true, \"x\"", "rms_norm_eps is not a number"},
      {"\"tie_word_embeddings\": true", "\"tie_word_embeddings\": 1",
       "tie_word_embeddings is not true or false"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<ModelConfig> config = LoadModelConfig(ConfigWith(c.from, c.to));
    ASSERT_FALSE(config.ok()) << c.to;
    EXPECT_THAT(config.status().message(), HasSubstr(c.message)) << c.to;
  }
}

// A safetensors file with `header` (raw JSON) and `data_bytes` zero bytes of data.
std::string SafetensorsWith(const std::string& header, size_t data_bytes,
                            uint64_t claimed_length = 0) {
  static int n = 0;
  const std::string dir = absl::StrCat(testing::TempDir(), "/st", ++n);
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = claimed_length ? claimed_length : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(len >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
  return dir;
}

TEST(HfModelTest, MalformedSafetensorsAreRefusedNamingTheTensor) {
  struct Case {
    std::string header;
    size_t data;
    uint64_t claimed;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"{}", 0, 1 << 30, "does not fit the file"},
      {"{not json", 0, 0, "not valid JSON"},
      {R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 2, 0, "w: dtype I8"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8, 0, "outside the data"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, 0, "8 bytes for 3 F32"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, 0, "tensors a and b overlap"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0, 0, "bad shape"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,0]}})", 0, 0, "needs a shape"},
      {R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", 8, 0, "w: dtype must be a string"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", 8, 0,
       "w: data_offsets: not a number"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8, 0,
       "18446744073709551615 is out of range"},
      {std::string(10000, '[') + std::string(10000, ']'), 0, 0, "nested deeper than 256"},
  };
  for (const Case& c : cases) {
    auto model = SafetensorsModel::Open(SafetensorsWith(c.header, c.data, c.claimed));
    ASSERT_FALSE(model.ok()) << c.header;
    EXPECT_THAT(model.status().message(), HasSubstr(c.message)) << c.header;
  }
  // A well-formed file: a wrong shape and a missing tensor are named.
  auto ok = SafetensorsModel::Open(
      SafetensorsWith(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  ASSERT_TRUE(ok.ok()) << ok.status();
  const std::vector<int64_t> three = {3};
  EXPECT_THAT(ok->Read("w", three).status().message(), HasSubstr("tensor w has shape [2]"));
  EXPECT_THAT(ok->Read("v", three).status().message(), HasSubstr("missing tensor v"));
  // A model directory whose weights file is empty is refused.
  const std::string dir = testing::TempDir() + "/empty";
  std::filesystem::create_directories(dir);
  WriteText(dir + "/config.json", testing::ReadFile(HfDir() + "/config.json"));
  WriteText(dir + "/model.safetensors", "");
  EXPECT_FALSE(LoadModelWeights(dir).ok());
}

TEST(HfModelTest, ShardedCheckpointsLoadThroughTheirIndex) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.eos_ids = {2};
  ModelWeights w = RandomModelWeights(c, 11);
  const std::string dir = testing::TempDir() + "/sharded";
  ASSERT_TRUE(WriteHfModel(w, dir, TensorDtype::kF32).ok());
  // Split: the embedding and norm in one shard, the layers in another.
  auto whole = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(whole.ok());
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> first, second;
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  values.reserve((*whole)->tensors().size());
  for (const auto& [name, info] : (*whole)->tensors()) {
    values.push_back(*(*whole)->Read(name, info.shape));
    const bool in_first = name.rfind("model.layers.", 0) != 0;
    (in_first ? first : second).push_back({name, info.shape, &values.back()});
    absl::StrAppend(
        &index, index.back() == '{' ? "" : ",", "\"", name, "\": \"",
        in_first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors", "\"");
  }
  index += "}}";
  whole->reset();
  std::filesystem::remove(dir + "/model.safetensors");
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model-00001-of-00002.safetensors", first, TensorDtype::kF32).ok());
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model-00002-of-00002.safetensors", second, TensorDtype::kF32).ok());
  WriteText(dir + "/model.safetensors.index.json", index);
  absl::StatusOr<ModelWeights> loaded = LoadModelWeights(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<int> tokens = {1, 5, 9, 100, 42};
  ExpectNear(testing::PromptLogits(*std::move(loaded), tokens), testing::PromptLogits(w, tokens),
             2e-4f);
}

}  // namespace
}  // namespace pagoda
