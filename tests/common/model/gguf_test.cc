// GGUF files: the real stories260K.gguf (made by llama.cpp's converter) holds the llama2.c
// checkpoint's weights and gives run.c's golden tokens; llama.cpp's vocab-only GGUF passes its
// 47 tokenizer vectors; byte-level vocabularies written here encode like their tokenizer.json;
// models written here (llama, qwen2, qwen3; F32, F16, BF16, Q8_0) compute what the float64
// reference computes; quantized blocks decode as llama.cpp lays them out; malformed files are
// refused naming the field, never a crash.
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "common/model/gguf_file.h"
#include "common/model/gguf_model.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/model_loader.h"
#include "common/model/random_weights.h"
#include "common/model/safetensors.h"
#include "common/text/unicode.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/engine.h"
#include "tests/common/model/reference_model.h"
#include "tests/test_util.h"
#include "worker/in_process_executor.h"
#include "worker/llama_model.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

std::string Stories260KGguf() {
  return testing::SharedPath("models/stories260K-gguf/stories260K.gguf");
}

// Logits of every position of one prompt, prefilled in one step.
std::vector<float> PromptLogits(ModelWeights w, const std::vector<int>& tokens) {
  const int t = static_cast<int>(tokens.size());
  const int vocab = w.config.vocab_size;
  auto model = LlamaModel::Create(std::move(w), t, t);
  CHECK(model.ok()) << model.status();
  const int blocks = (t + 15) / 16;
  KvPool kv((*model)->config(), blocks, 16);
  std::vector<int> positions(t), table(blocks), rows(t);
  std::vector<int64_t> slots(t);
  for (int i = 0; i < t; ++i) positions[i] = rows[i] = i, slots[i] = i;
  for (int b = 0; b < blocks; ++b) table[b] = b;
  const AttentionSequence seqs[] = {{0, t, 0, table.data()}};
  const float* logits = (*model)->Forward({tokens, positions, slots, seqs, rows}, kv);
  return std::vector<float>(logits, logits + static_cast<size_t>(t) * vocab);
}

void Step(Engine& engine, std::map<int64_t, std::vector<int>>* out) {
  absl::StatusOr<std::vector<SequenceUpdate>> updates = engine.Step();
  ASSERT_TRUE(updates.ok()) << updates.status();
  for (const SequenceUpdate& u : *updates) {
    (*out)[u.request_id].insert((*out)[u.request_id].end(), u.new_token_ids.begin(),
                                u.new_token_ids.end());
  }
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
    ModelConfig c = w->config;
    WorkerOptions wo;
    wo.num_blocks = 256;
    auto worker = WorkerEngine::Create(*std::move(w), wo);
    ASSERT_TRUE(worker.ok()) << worker.status();
    InProcessExecutor executor(*std::move(worker));
    EngineOptions eo;
    eo.max_model_len = 257;
    Engine engine(c, &executor, eo);
    std::map<int64_t, std::vector<int>> out;
    std::vector<int64_t> ids;
    for (const auto& g : golden) {
      GenerationRequest r;
      r.prompt_ids = g.prompt_ids;
      r.sampling.temperature = 0;
      r.stop_token_ids = {1};  // run.c stops at BOS
      ids.push_back(static_cast<int64_t>(ids.size()));
      ASSERT_TRUE(engine.AddRequest(ids.back(), r).ok());
      while (!batched && engine.has_unfinished()) Step(engine, &out);
    }
    while (engine.has_unfinished()) Step(engine, &out);
    for (size_t i = 0; i < golden.size(); ++i) {
      EXPECT_EQ(out[ids[i]], golden[i].greedy_ids) << golden[i].prompt << " batched=" << batched;
    }
  }
}

// --- Tokenizers -----------------------------------------------------------------------------

TEST(GgufTokenizerTest, LlamaCppVocabVectorsPassFromTheGgufsOwnVocabulary) {
  const std::string dir = testing::SharedPath("models/ggml-vocab-llama-spm/");
  auto tok = LoadTokenizer(dir + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 32000);
  EXPECT_EQ((*tok)->prefix_ids(), std::vector<int>({1})) << "add_bos_token = true";
  EXPECT_TRUE((*tok)->suffix_ids().empty());
  const std::string inp = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.inp");
  const std::string out = testing::ReadFile(dir + "ggml-vocab-llama-spm.gguf.out");
  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  std::vector<std::string> expected = absl::StrSplit(out, '\n');
  // 47 pairs; the last is the empty text after the final separator, which encodes to nothing.
  ASSERT_EQ(texts.size(), 47u);
  ASSERT_GE(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int> want;
    for (absl::string_view id : absl::StrSplit(expected[i], ' ', absl::SkipEmpty())) {
      want.push_back(std::stoi(std::string(id)));
    }
    EXPECT_EQ((*tok)->Encode(texts[i]), want) << "vector " << i << ": \"" << texts[i] << "\"";
    EXPECT_EQ((*tok)->Decode((*tok)->Encode(texts[i])), texts[i]) << "vector " << i;
  }
}

// A "gpt2" GGUF vocabulary made from a tokenizer.json, as llama.cpp's converter makes it.
std::string ByteLevelGguf(const std::string& tokenizer_json, const std::string& pre, bool add_bos) {
  auto j = ParseJson(testing::ReadFile(tokenizer_json), tokenizer_json);
  CHECK(j.ok()) << j.status();
  const Json& model = (*j)["model"];
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](const std::string& piece, int id, int type) {
    if (static_cast<size_t>(id) >= tokens.size()) {
      tokens.resize(id + 1, "[PAD" + std::to_string(id) + "]");
      types.resize(id + 1, 5);
    }
    tokens[id] = piece;
    types[id] = type;
  };
  for (const auto& [piece, id] : model["vocab"].items()) put(piece, id.get<int>(), 1);
  for (const Json& a : (*j)["added_tokens"]) {
    put(a["content"].get<std::string>(), a["id"].get<int>(), 3);
  }
  std::vector<std::string> merges;
  for (const Json& m : model["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", pre);
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddI32Array("tokenizer.ggml.token_type", types);
  w.AddStringArray("tokenizer.ggml.merges", merges);
  w.AddU32("tokenizer.ggml.bos_token_id", 0);
  w.AddU32("tokenizer.ggml.eos_token_id", 1);
  w.AddBool("tokenizer.ggml.add_bos_token", add_bos);
  w.AddString("tokenizer.chat_template", "{{ messages }}");
  const std::string path = testing::TempDir() + "/" + pre + ".gguf";
  CHECK(w.Write(path).ok());
  return path;
}

void ExpectGoldenThroughGguf(const std::string& model, const std::string& pre,
                             const std::string& golden, bool nfc_sensitive_ok) {
  const std::string path =
      ByteLevelGguf(testing::SharedPath("models/" + model + "/tokenizer.json"), pre, true);
  auto tok = LoadTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->prefix_ids(), std::vector<int>({0}));
  EXPECT_EQ((*tok)->chat_template(), "{{ messages }}");
  auto cases = ParseJson(testing::ReadFile(testing::SharedPath("golden/" + golden)), golden);
  ASSERT_TRUE(cases.ok()) << cases.status();
  int checked = 0;
  for (const Json& c : (*cases)["cases"]) {
    const std::string text = c["text"].get<std::string>();
    // llama.cpp does not NFC-normalize (Qwen's tokenizer.json does): skip texts it changes.
    if (!nfc_sensitive_ok && NormalizeNfc(text) != text) continue;
    const std::vector<int> ids = c["ids"].get<std::vector<int>>();
    EXPECT_EQ((*tok)->Encode(text), ids) << model << ": \"" << text << "\"";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(GgufTokenizerTest, ByteLevelVocabulariesEncodeLikeTheirTokenizerJson) {
  ExpectGoldenThroughGguf("llama3-tokenizer", "llama-bpe", "llama3_tokenizer.json", true);
  ExpectGoldenThroughGguf("qwen3-tokenizer", "qwen2", "qwen3_tokenizer.json", false);
}

TEST(GgufTokenizerTest, AddBosFollowsTheFileAndLlamaCppsDefaults) {
  const std::string json = testing::SharedPath("models/qwen3-tokenizer/tokenizer.json");
  auto no_bos = LoadTokenizer(ByteLevelGguf(json, "qwen2", false));
  ASSERT_TRUE(no_bos.ok()) << no_bos.status();
  EXPECT_TRUE((*no_bos)->prefix_ids().empty());
  EXPECT_EQ((*no_bos)->Encode("Hello", true), (*no_bos)->Encode("Hello"));
  auto refused = LoadTokenizer(ByteLevelGguf(json, "falcon", false));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("tokenizer.ggml.pre \"falcon\""));
}

// --- Models written here ----------------------------------------------------------------------

std::vector<uint8_t> Encode(const std::vector<float>& v, GgmlType type) {
  std::vector<uint8_t> out;
  if (type == GgmlType::kQ8_0) return QuantizeQ8_0(v);
  if (type == GgmlType::kF32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  for (float x : v) {
    const uint16_t h = type == GgmlType::kF16 ? FloatToHalf(x) : FloatToBf16(x);
    out.push_back(static_cast<uint8_t>(h));
    out.push_back(static_cast<uint8_t>(h >> 8));
  }
  return out;
}

// Writes `w` as llama.cpp names it, matrices in `type`, vectors in F32 (as llama.cpp does).
void WriteGgufModel(const ModelWeights& w, const std::string& arch, GgmlType type,
                    const std::string& path) {
  const ModelConfig& c = w.config;
  GgufWriter g;
  g.AddString("general.architecture", arch);
  g.AddString("general.name", "random-" + arch);
  g.AddU32(arch + ".context_length", c.max_seq_len);
  g.AddU32(arch + ".embedding_length", c.dim);
  g.AddU32(arch + ".feed_forward_length", c.hidden_dim);
  g.AddU32(arch + ".block_count", c.num_layers);
  g.AddU32(arch + ".attention.head_count", c.num_heads);
  g.AddU32(arch + ".attention.head_count_kv", c.num_kv_heads);
  g.AddU32(arch + ".attention.key_length", c.head_dim);
  g.AddU32(arch + ".attention.value_length", c.head_dim);
  g.AddF32(arch + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  g.AddF32(arch + ".rope.freq_base", c.rope_theta);
  g.AddU32("tokenizer.ggml.bos_token_id", 1);
  g.AddU32("tokenizer.ggml.eos_token_id", 2);
  auto matrix = [&](const std::string& name, std::vector<int64_t> shape,
                    const std::vector<float>& v) {
    g.AddTensor(name, std::move(shape), type, Encode(v, type));
  };
  auto vec = [&](const std::string& name, const std::vector<float>& v) {
    g.AddF32Tensor(name, {static_cast<int64_t>(v.size())}, v);
  };
  if (c.rope_scaling_factor > 0) {
    // Llama 3.1's scaling as llama.cpp's converter stores it: a factor per frequency.
    ModelConfig plain = c;
    plain.rope_scaling_factor = 0;
    std::vector<float> factors;
    for (int i = 0; i < c.head_dim / 2; ++i) {
      factors.push_back(plain.RopeFrequency(i) / c.RopeFrequency(i));
    }
    vec("rope_freqs.weight", factors);
  }
  matrix("token_embd.weight", {c.vocab_size, c.dim}, w.token_embedding);
  vec("output_norm.weight", w.final_norm);
  if (!c.tied_embeddings) matrix("output.weight", {c.vocab_size, c.dim}, w.classifier);
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = absl::StrCat("blk.", l, ".");
    vec(p + "attn_norm.weight", L.attn_norm);
    matrix(p + "attn_q.weight", {c.q_dim(), c.dim}, L.wq);
    matrix(p + "attn_k.weight", {c.kv_dim(), c.dim}, L.wk);
    matrix(p + "attn_v.weight", {c.kv_dim(), c.dim}, L.wv);
    matrix(p + "attn_output.weight", {c.dim, c.q_dim()}, L.wo);
    if (!L.bq.empty()) {
      vec(p + "attn_q.bias", L.bq);
      vec(p + "attn_k.bias", L.bk);
      vec(p + "attn_v.bias", L.bv);
    }
    if (!L.q_norm.empty()) {
      vec(p + "attn_q_norm.weight", L.q_norm);
      vec(p + "attn_k_norm.weight", L.k_norm);
    }
    vec(p + "ffn_norm.weight", L.ffn_norm);
    matrix(p + "ffn_gate.weight", {c.hidden_dim, c.dim}, L.w_gate);
    matrix(p + "ffn_up.weight", {c.hidden_dim, c.dim}, L.w_up);
    matrix(p + "ffn_down.weight", {c.dim, c.hidden_dim}, L.w_down);
  }
  CHECK(g.Write(path).ok());
}

struct GgufVariant {
  std::string name, arch;
  GgmlType type;
  bool tied;
  float rope_scaling = 0;  // Llama 3.1 scaling, written as rope_freqs.weight
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
  c.rope_scaling_factor = v.rope_scaling;
  c.rope_original_max_position = 64;  // so the scaling bends frequencies in this short context
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
  EXPECT_EQ(loaded->config.rope_freq_factors.empty(), v.rope_scaling == 0);
  if (v.rope_scaling > 0 && v.type == GgmlType::kF32) {
    // The factors compute what the scaling does (the reference of the original config).
    const std::vector<double> scaled = testing::ReferenceLogits(w, tokens);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(want[i] - scaled[i]));
    EXPECT_LE(worst, 1e-4);
  }
  const std::vector<float> got = PromptLogits(*std::move(loaded), tokens);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-3) << v.name;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GgufRoundTripTest,
    ::testing::Values(GgufVariant{"llama_f32", "llama", GgmlType::kF32, false, 0},
                      GgufVariant{"llama31_rope_freqs_f32", "llama", GgmlType::kF32, true, 8},
                      GgufVariant{"llama_q8_0", "llama", GgmlType::kQ8_0, true, 0},
                      GgufVariant{"qwen2_f16", "qwen2", GgmlType::kF16, false, 0},
                      GgufVariant{"qwen2_q8_0", "qwen2", GgmlType::kQ8_0, true, 0},
                      GgufVariant{"qwen3_bf16", "qwen3", GgmlType::kBF16, true, 0},
                      GgufVariant{"qwen3_q8_0", "qwen3", GgmlType::kQ8_0, false, 0}),
    [](const auto& info) { return info.param.name; });

// --- Quantized blocks -------------------------------------------------------------------------

// A one-tensor GGUF of `type` holding `data`, read back as `n` floats.
std::vector<float> DecodeBlocks(GgmlType type, std::vector<uint8_t> data, int64_t n) {
  GgufWriter g;
  g.AddTensor("t", {n}, type, std::move(data));
  const std::string path = testing::TempDir() + "/blocks.gguf";
  CHECK(g.Write(path).ok());
  auto f = GgufFile::Open(path);
  CHECK(f.ok()) << f.status();
  const int64_t shape[] = {n};
  auto v = (*f)->Read("t", shape);
  CHECK(v.ok()) << v.status();
  return *v;
}

TEST(GgufFileTest, Q8_0DecodesToTheValuesItWasMadeFrom) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> values(32 * 40);
  for (float& x : values) x = d(rng);
  values[5] = 0;
  std::fill(values.begin() + 64, values.begin() + 96, 0.0f);  // an all-zero block
  const std::vector<uint8_t> q = QuantizeQ8_0(values);
  ASSERT_EQ(q.size(), 40u * 34);
  const std::vector<float> back = DecodeBlocks(GgmlType::kQ8_0, q, values.size());
  for (size_t b = 0; b < 40; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[b * 32 + j]));
    const float step = HalfToFloat(FloatToHalf(amax / 127));
    for (int j = 0; j < 32; ++j) {
      const size_t i = b * 32 + j;
      // Half a step of rounding, plus the scale's own f16 rounding over up to 127 steps.
      EXPECT_NEAR(back[i], values[i], step * 0.5f + amax * 1e-3f) << i;
    }
  }
  EXPECT_EQ(back[5], 0.0f);
  EXPECT_EQ(back[70], 0.0f);
}

TEST(GgufFileTest, KQuantAndQ4_0BlocksDecodeAsLlamaCppLaysThemOut) {
  // Q6_K: ql[128] qh[64] scales[16] d. With d = 1 and every scale 1, value = q - 32, where
  // q's low 4 bits come from ql and its high 2 bits from qh (see dequantize_row_q6_K).
  std::vector<uint8_t> q6(210, 0);
  for (int i = 192; i < 208; ++i) q6[i] = 1;
  q6[192 + 2] = 3;  // scale of values 32..47 of the first half
  q6[208] = 0x00;   // d = 1.0 (f16 0x3C00)
  q6[209] = 0x3C;
  q6[0] = 0x5A;          // value 0: low nibble 0xA; value 64: high nibble 0x5
  q6[128] = 0b11100100;  // value 0: +0<<4, value 32: +1<<4, value 64: +2<<4, value 96: +3<<4
  q6[32] = 0x07;         // value 32: low nibble 7
  const std::vector<float> y6 = DecodeBlocks(GgmlType::kQ6_K, q6, 256);
  EXPECT_EQ(y6[0], 0xA - 32);
  EXPECT_EQ(y6[32], 3 * ((0x7 | (1 << 4)) - 32)) << "scale 3";
  EXPECT_EQ(y6[64], (0x5 | (2 << 4)) - 32);
  EXPECT_EQ(y6[96], (0 | (3 << 4)) - 32);
  EXPECT_EQ(y6[1], -32);
  EXPECT_EQ(y6[128], -32) << "second half: its own ql/qh/scales";
  // Q4_K: d dmin scales[12] qs[128]. Sub-block j < 4: scale = scales[j] & 63, min =
  // scales[j + 4] & 63; value = d * scale * nibble - dmin * min.
  std::vector<uint8_t> q4(144, 0);
  q4[1] = 0x3C;   // d = 1
  q4[3] = 0x38;   // dmin = 0.5
  q4[4 + 0] = 2;  // sub-block 0: scale 2
  q4[4 + 4] = 3;  // sub-block 0: min 3
  q4[4 + 1] = 5;  // sub-block 1 (the high nibbles of the first 32 bytes): scale 5, min 0
  q4[16] = 0x9C;  // value 0: nibble 0xC; value 32: nibble 0x9
  const std::vector<float> y4 = DecodeBlocks(GgmlType::kQ4_K, q4, 256);
  EXPECT_EQ(y4[0], 2 * 12 - 0.5f * 3);
  EXPECT_EQ(y4[1], -1.5f);
  EXPECT_EQ(y4[32], 5 * 9);
  // Sub-blocks 4..7 take their high bits from the top of scales[0..7].
  q4 = std::vector<uint8_t>(144, 0);
  q4[1] = 0x3C;
  q4[4 + 0] = 0x40;    // scale of sub-block 4 gains 1 << 4
  q4[4 + 8] = 0x21;    // sub-block 4: scale low 1, min low 2
  q4[16 + 64] = 0x03;  // value 128 (sub-block 4, low nibbles of bytes 64..95): nibble 3
  const std::vector<float> y4b = DecodeBlocks(GgmlType::kQ4_K, q4, 256);
  EXPECT_EQ(y4b[128], (1 | (1 << 4)) * 3);
  // Q4_0: d | 16 bytes, value j = low nibble - 8, value j + 16 = high nibble - 8.
  std::vector<uint8_t> q40(18, 0x88);
  q40[0] = 0x00;
  q40[1] = 0x40;  // d = 2
  q40[2] = 0xF0;
  const std::vector<float> y40 = DecodeBlocks(GgmlType::kQ4_0, q40, 32);
  EXPECT_EQ(y40[0], -16.0f);
  EXPECT_EQ(y40[16], 14.0f);
  EXPECT_EQ(y40[1], 0.0f);
}

// --- Malformed files ------------------------------------------------------------------------

// A tiny valid llama model file's bytes.
std::string TinyModelBytes() {
  ModelConfig c;
  CHECK(NamedModelConfig("stories260K", &c));
  c.num_layers = 1;
  c.vocab_size = 64;
  c.hidden_dim = 64;
  ModelWeights w = RandomModelWeights(c, 1);
  const std::string path = testing::TempDir() + "/tiny.gguf";
  WriteGgufModel(w, "llama", GgmlType::kF32, path);
  return testing::ReadFile(path);
}

template <typename T>
void PutAt(std::string* s, size_t at, T v) {
  std::memcpy(s->data() + at, &v, sizeof(T));
}

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Str(const std::string& s) { return U64(s.size()) + s; }

// A header with `kv` metadata entries (raw bytes) and no tensors.
std::string RawGguf(uint64_t kv_count, const std::string& kvs, uint64_t tensor_count = 0,
                    const std::string& tensors = "") {
  return "GGUF" + U32(3) + U64(tensor_count) + U64(kv_count) + kvs + tensors +
         std::string(64, '\0');
}

// The position of tensor `name`'s info (after its name) in `bytes`.
size_t TensorInfoAt(const std::string& bytes, const std::string& name) {
  const size_t at = bytes.find(Str(name));
  CHECK_NE(at, std::string::npos) << name;
  return at + 8 + name.size();
}

TEST(GgufFileTest, MalformedFilesAreRefusedNamingTheField) {
  const std::string good = TinyModelBytes();
  {
    const std::string path = testing::TempDir() + "/good.gguf";
    testing::WriteFile(path, good);
    ASSERT_TRUE(LoadModelWeights(path).ok());
  }
  struct Case {
    std::string name, bytes, message;
  };
  std::vector<Case> cases;
  auto mutated = [&](const std::string& name, const std::function<void(std::string&)>& edit,
                     const std::string& message) {
    std::string b = good;
    edit(b);
    cases.push_back({name, b, message});
  };
  mutated(
      "short", [](std::string& b) { b.resize(20); }, "too short for a GGUF header");
  mutated(
      "version1", [](std::string& b) { PutAt<uint32_t>(&b, 4, 1); },
      "GGUF version 1 is not supported");
  mutated(
      "big_endian", [](std::string& b) { PutAt<uint32_t>(&b, 4, 0x03000000); },
      "GGUF version 50331648");
  mutated(
      "tensor_count", [](std::string& b) { PutAt<uint64_t>(&b, 8, uint64_t{1} << 60); },
      "tensor_count 1152921504606846976 does not fit");
  mutated(
      "kv_count", [](std::string& b) { PutAt<uint64_t>(&b, 16, uint64_t{1} << 62); }, "kv_count");
  mutated(
      "key_length", [](std::string& b) { PutAt<uint64_t>(&b, 24, uint64_t{1} << 50); },
      "metadata entry 0: truncated key");
  mutated(
      "value_type", [](std::string& b) { PutAt<uint32_t>(&b, 24 + 8 + 20, 99); },
      "metadata general.architecture: unknown type 99");
  mutated(
      "string_length",
      [](std::string& b) { PutAt<uint64_t>(&b, 24 + 8 + 20 + 4, uint64_t{1} << 40); },
      "general.architecture: string runs past the end of the file");
  mutated(
      "truncated_tensor_data", [](std::string& b) { b.resize(b.size() - 100); },
      "outside the data section");
  mutated(
      "n_dims",
      [](std::string& b) { PutAt<uint32_t>(&b, TensorInfoAt(b, "blk.0.attn_q.weight"), 7); },
      "tensor blk.0.attn_q.weight: n_dims 7");
  mutated(
      "zero_dim",
      [](std::string& b) { PutAt<uint64_t>(&b, TensorInfoAt(b, "blk.0.attn_q.weight") + 4, 0); },
      "tensor blk.0.attn_q.weight: dimension 0 = 0");
  mutated(
      "huge_dims",
      [](std::string& b) {
        const size_t at = TensorInfoAt(b, "blk.0.attn_q.weight");
        PutAt<uint64_t>(&b, at + 4, uint64_t{1} << 30);
        PutAt<uint64_t>(&b, at + 12, uint64_t{1} << 30);
      },
      "dimension 1 = 1073741824 is out of range");
  mutated(
      "ggml_type",
      [](std::string& b) { PutAt<uint32_t>(&b, TensorInfoAt(b, "blk.0.attn_q.weight") + 20, 77); },
      "blk.0.attn_q.weight: ggml type 77 is not supported");
  mutated(
      "partial_block",
      [](std::string& b) { PutAt<uint32_t>(&b, TensorInfoAt(b, "output_norm.weight") + 12, 12); },
      "row of 64 values is not whole Q4_K blocks of 256");
  mutated(
      "unaligned",
      [](std::string& b) { PutAt<uint64_t>(&b, TensorInfoAt(b, "output_norm.weight") + 16, 4); },
      "output_norm.weight: offset 4 is not aligned");
  mutated(
      "offset_past_end",
      [](std::string& b) {
        PutAt<uint64_t>(&b, TensorInfoAt(b, "output_norm.weight") + 16, uint64_t{1} << 40);
      },
      "output_norm.weight: [1099511627776");
  mutated(
      "overlap",
      [](std::string& b) {
        const size_t at = TensorInfoAt(b, "token_embd.weight") + 24;
        uint64_t offset;
        std::memcpy(&offset, b.data() + at, 8);
        PutAt<uint64_t>(&b, TensorInfoAt(b, "output_norm.weight") + 16, offset + 32);
      },
      "overlap");
  mutated(
      "duplicate_tensor",
      [](std::string& b) { b.replace(b.find("blk.0.attn_v.weight"), 19, "blk.0.attn_k.weight"); },
      "tensor blk.0.attn_k.weight: duplicate tensor name");
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
        PutAt<uint32_t>(&b, at + 4, 3);
      },
      "must be a multiple of head_count_kv (3)");
  mutated(
      "shape",
      [](std::string& b) {
        PutAt<uint64_t>(&b, TensorInfoAt(b, "blk.0.ffn_up.weight") + 4, 32);
        PutAt<uint64_t>(&b, TensorInfoAt(b, "blk.0.ffn_up.weight") + 12, 128);
      },
      "tensor blk.0.ffn_up.weight has shape [128, 32], expected [64, 64]");
  mutated(
      "missing_tensor", [](std::string& b) { b[b.find("blk.0.ffn_gate.weight")] = 'x'; },
      "no tensor blk.0.ffn_gate.weight");
  mutated(
      "eos",
      [](std::string& b) {
        PutAt<uint32_t>(&b, b.find("tokenizer.ggml.eos_token_id") + 27 + 4, 999);
      },
      "tokenizer.ggml.eos_token_id 999 is outside the vocabulary");
  cases.push_back(
      {"array_of_arrays", RawGguf(1, Str("a") + U32(9) + U32(9) + U64(1)), "array element type 9"});
  cases.push_back({"string_array_count",
                   RawGguf(1, Str("a") + U32(9) + U32(8) + U64(uint64_t{1} << 58)),
                   "strings do not fit the file"});
  cases.push_back({"number_array_count",
                   RawGguf(1, Str("a") + U32(9) + U32(6) + U64(uint64_t{1} << 61)),
                   "elements do not fit the file"});
  cases.push_back({"string_in_array",
                   RawGguf(1, Str("a") + U32(9) + U32(8) + U64(2) + Str("x") + U64(1 << 20)),
                   "a: string 1 runs past the end"});
  cases.push_back({"duplicate_key",
                   RawGguf(2, Str("a") + U32(4) + U32(1) + Str("a") + U32(4) + U32(2)),
                   "metadata a: duplicate key"});
  cases.push_back({"alignment", RawGguf(1, Str("general.alignment") + U32(4) + U32(3)),
                   "general.alignment 3 is not a power of two"});
  cases.push_back({"alignment_type", RawGguf(1, Str("general.alignment") + U32(8) + Str("x")),
                   "general.alignment is not an integer"});
  cases.push_back({"bad_magic", "GGUX" + std::string(60, '\0'), "not a GGUF file"});
  int n = 0;
  for (const Case& c : cases) {
    const std::string path = absl::StrCat(testing::TempDir(), "/bad", n++, ".gguf");
    testing::WriteFile(path, c.bytes);
    // Open, then (when the file itself parses) the model's config and weights.
    absl::Status s = GgufFile::Open(path).status();
    if (s.ok()) s = LoadModelConfig(path).status();
    if (s.ok()) s = LoadModelWeights(path).status();
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.name;
  }
  EXPECT_GE(cases.size(), 20u);
}

TEST(GgufFileTest, EveryTruncationAndManyByteFlipsAreErrorsNotCrashes) {
  const std::string good = TinyModelBytes();
  const std::string path = testing::TempDir() + "/cut.gguf";
  for (size_t len = 0; len < good.size(); len += len < 2048 ? 1 : 97) {
    testing::WriteFile(path, good.substr(0, len));
    EXPECT_FALSE(LoadModelWeights(path).ok()) << len;
  }
  std::mt19937 rng(9);
  const size_t header_end = good.find("token_embd.weight") + 64;  // flips in the header area
  for (int i = 0; i < 300; ++i) {
    std::string b = good;
    b[rng() % header_end] ^= static_cast<char>(1 + rng() % 255);
    testing::WriteFile(path, b);
    (void)LoadModelWeights(path);  // may load (a flipped value) or fail; must not crash
    (void)LoadModelConfig(path);
  }
}

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
