// LoRA adapter files: PEFT directories (F32, F16, BF16) and GGUF LoRAs read back what was
// written, scaled as PEFT and llama.cpp scale them, with q/k rows in the base's RoPE order; and
// every malformed or mismatched adapter is refused by name before anything is sized by it.
#include "common/model/lora_adapter.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gguf_writer.h"
#include "tests/common/model/lora_files.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

ModelConfig Config(const std::string& name) {
  ModelConfig c;
  CHECK(NamedModelConfig(name, &c)) << name;
  return c;
}

LoraReadOptions Inside(const std::string& root) {
  LoraReadOptions o;
  o.allowed_roots = {root};
  return o;
}

void ExpectSameAdapter(const LoraAdapter& got, const LoraAdapter& want, float tolerance) {
  ASSERT_EQ(got.rank, want.rank);
  ASSERT_EQ(got.layers.size(), want.layers.size());
  for (size_t l = 0; l < want.layers.size(); ++l) {
    for (LoraTarget t : kAllLoraTargets) {
      const LoraPair& g = got.layers[l][static_cast<int>(t)];
      const LoraPair& w = want.layers[l][static_cast<int>(t)];
      ASSERT_EQ(g.a.size(), w.a.size()) << l << " " << LoraTargetName(t);
      ASSERT_EQ(g.b.size(), w.b.size()) << l << " " << LoraTargetName(t);
      for (size_t i = 0; i < w.a.size(); ++i) ASSERT_NEAR(g.a[i], w.a[i], tolerance * 0.2);
      for (size_t i = 0; i < w.b.size(); ++i) {
        ASSERT_NEAR(g.b[i], w.b[i], tolerance * std::max(std::abs(w.b[i]), 1e-2f))
            << l << " " << LoraTargetName(t) << " b[" << i << "]";
      }
    }
  }
}

TEST(LoraAdapterTest, RopeRowsGoFromHalfPairsToInterleavedPairsAndBack) {
  // One head of 4 dims, 1 column: Hugging Face pairs (0, 2) and (1, 3); interleaved (0, 1), (2, 3).
  std::vector<float> rows = {10, 11, 20, 21};  // x0, x1 | y0, y1
  ReorderRopeRows(1, 4, 1, /*to_interleaved=*/true, &rows);
  EXPECT_EQ(rows, (std::vector<float>{10, 20, 11, 21}));
  ReorderRopeRows(1, 4, 1, /*to_interleaved=*/false, &rows);
  EXPECT_EQ(rows, (std::vector<float>{10, 11, 20, 21}));
}

TEST(LoraAdapterTest, PeftDirectoriesReadBackInEachDtype) {
  const ModelConfig base = Config("stories260K");
  const LoraAdapter want = testing::RandomLoraAdapter(base, 8, 16.0, 1);
  for (auto [dtype, tolerance] :
       {std::pair{TensorDtype::kF32, 0.0f}, std::pair{TensorDtype::kF16, 1e-3f},
        std::pair{TensorDtype::kBF16, 8e-3f}}) {
    const std::string dir = absl::StrCat(testing::TempDir(), "/peft", static_cast<int>(dtype));
    testing::WritePeftLora(want, base, 16.0, dir, dtype);
    absl::StatusOr<LoraAdapter> got = ReadLoraAdapter(dir, base, Inside(testing::TempDir()));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->format, "peft");
    EXPECT_EQ(got->base_model, "test/base");
    EXPECT_FLOAT_EQ(got->scale, 2.0f);  // alpha 16 / r 8
    EXPECT_GE(got->digest.size(), 32u);
    ExpectSameAdapter(*got, want, tolerance);
  }
}

TEST(LoraAdapterTest, RsLoraScalesByTheSquareRootOfTheRankAndChangesTheDigest) {
  const ModelConfig base = Config("stories260K");
  const LoraAdapter want = testing::RandomLoraAdapter(base, 16, 8.0, 2);
  const std::string plain = testing::TempDir() + "/plain", rs = testing::TempDir() + "/rs";
  testing::WritePeftLora(want, base, 8.0, plain);
  testing::WritePeftLora(want, base, 8.0, rs, TensorDtype::kF32, "\"use_rslora\": true");
  absl::StatusOr<LoraAdapter> a = ReadLoraAdapter(plain, base, Inside(testing::TempDir()));
  absl::StatusOr<LoraAdapter> b = ReadLoraAdapter(rs, base, Inside(testing::TempDir()));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_FLOAT_EQ(a->scale, 0.5f);  // 8 / 16
  EXPECT_FLOAT_EQ(b->scale, 2.0f);  // 8 / sqrt(16)
  EXPECT_NE(a->digest, b->digest);
}

TEST(LoraAdapterTest, GgufLorasReadBackAsThePeftOneInEitherRopeOrder) {
  for (const char* arch : {"llama", "qwen2"}) {
    ModelConfig base = Config("stories260K");
    // A llama file holds q/k interleaved; a qwen2 one in Hugging Face's order: both come back
    // in the base's order, whichever it is.
    for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf}) {
      base.rope_style = style;
      const LoraAdapter want = testing::RandomLoraAdapter(base, 8, 4.0, 3);
      const std::string path =
          absl::StrCat(testing::TempDir(), "/", arch, static_cast<int>(style), ".gguf");
      testing::WriteGgufLora(want, base, arch, 4.0, path);
      absl::StatusOr<LoraAdapter> got = ReadLoraAdapter(path, base, Inside(testing::TempDir()));
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->format, "gguf");
      EXPECT_FLOAT_EQ(got->scale, 0.5f);
      ExpectSameAdapter(*got, want, 0.0f);
    }
  }
}

TEST(LoraAdapterTest, AGgufAlphaOfZeroScalesByOne) {
  const ModelConfig base = Config("stories260K");
  const std::string path = testing::TempDir() + "/a.gguf";
  testing::WriteGgufLora(testing::RandomLoraAdapter(base, 4, 1.0, 4), base, "llama", 0.0, path);
  absl::StatusOr<LoraAdapter> got = ReadLoraAdapter(path, base, Inside(testing::TempDir()));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FLOAT_EQ(got->scale, 1.0f);
}

// The error of reading `path` for `base` inside the test's directory.
absl::Status ReadError(const std::string& path, const ModelConfig& base,
                       LoraReadOptions options = Inside(testing::TempDir())) {
  absl::StatusOr<LoraAdapter> got = ReadLoraAdapter(path, base, options);
  return got.ok() ? absl::OkStatus() : got.status();
}

TEST(LoraAdapterTest, PeftOptionsPagodaCannotApplyAreRefusedByName) {
  const ModelConfig base = Config("stories260K");
  const LoraAdapter adapter = testing::RandomLoraAdapter(base, 4, 4.0, 5);
  const std::pair<const char*, const char*> cases[] = {
      {"\"use_dora\": true", "use_dora"},
      {"\"modules_to_save\": [\"lm_head\"]", "modules_to_save"},
      {"\"layers_to_transform\": [0, 1]", "layers_to_transform"},
      {"\"layers_pattern\": \"layers\"", "layers_pattern"},
      {"\"rank_pattern\": {\"q_proj\": 2}", "rank_pattern"},
      {"\"fan_in_fan_out\": true", "fan_in_fan_out"},
      {"\"peft_type\": \"IA3\"", "peft_type"},
  };
  int i = 0;
  for (const auto& [extra, name] : cases) {
    const std::string dir = absl::StrCat(testing::TempDir(), "/bad", i++);
    testing::WritePeftLora(adapter, base, 4.0, dir, TensorDtype::kF32, extra);
    const absl::Status s = ReadError(dir, base);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << extra << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(name)) << s;
  }
  // A bias other than none, and a regular expression for the targets: the config's own keys.
  const std::string dir = testing::TempDir() + "/bias";
  testing::WritePeftLora(adapter, base, 4.0, dir);
  std::string config = testing::ReadFile(dir + "/adapter_config.json");
  testing::WriteFile(dir + "/adapter_config.json",
                     config.replace(config.find("\"none\""), 6, "\"all\""));
  EXPECT_THAT(ReadError(dir, base).message(), HasSubstr("bias"));
  testing::WriteFile(dir + "/adapter_config.json",
                     "{\"r\": 4, \"lora_alpha\": 4, \"target_modules\": \".*proj\"}");
  EXPECT_THAT(ReadError(dir, base).message(), HasSubstr("target_modules"));
}

TEST(LoraAdapterTest, AnAdapterOfAnotherShapeIsRefusedNamingTheTensor) {
  // Written for a wider FFN than stories260K's 172.
  ModelConfig wider = Config("stories260K");
  wider.hidden_dim = 200;
  const std::string dir = testing::TempDir() + "/wider";
  testing::WritePeftLora(testing::RandomLoraAdapter(wider, 4, 4.0, 6), wider, 4.0, dir);
  const absl::Status s = ReadError(dir, Config("stories260K"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("mlp."));
  EXPECT_THAT(s.message(), HasSubstr("does not fit the base's"));
  // stories15M's (dim 288, 6 layers) in both formats.
  const ModelConfig other = Config("stories15M");
  testing::WritePeftLora(testing::RandomLoraAdapter(other, 4, 4.0, 6), other, 4.0,
                         testing::TempDir() + "/15M");
  EXPECT_EQ(ReadError(testing::TempDir() + "/15M", Config("stories260K")).code(),
            absl::StatusCode::kInvalidArgument);
  const std::string gguf = testing::TempDir() + "/15M.gguf";
  testing::WriteGgufLora(testing::RandomLoraAdapter(other, 4, 4.0, 6), other, "llama", 4.0, gguf);
  EXPECT_EQ(ReadError(gguf, Config("stories260K")).code(), absl::StatusCode::kInvalidArgument);
}

// A GGUF LoRA of stories260K with `edit` applied to its writer before it is written.
std::string GgufWith(const std::string& name, const std::function<void(testing::GgufWriter&)>& edit,
                     const std::string& arch = "llama", const std::string& type = "adapter") {
  const ModelConfig base = Config("stories260K");
  testing::GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddString("general.type", type);
  w.AddString("adapter.type", "lora");
  w.AddF32("adapter.lora.alpha", 4.0f);
  edit(w);
  const std::string path = absl::StrCat(testing::TempDir(), "/", name, ".gguf");
  EXPECT_TRUE(w.Write(path).ok());
  return path;
}

TEST(LoraAdapterTest, MalformedGgufLorasAreRefusedByName) {
  const ModelConfig base = Config("stories260K");
  const std::vector<float> a(4 * 64, 0.01f), b(64 * 4, 0.01f), wide_b(65 * 4, 0.01f);
  auto pair = [&](const std::string& prefix, const std::vector<float>& bv, int64_t out) {
    return [=](testing::GgufWriter& w) {
      w.AddF32Tensor(prefix + ".lora_a", {4, 64}, a);
      w.AddF32Tensor(prefix + ".lora_b", {out, 4}, bv);
    };
  };
  struct Case {
    std::string path, message;
  };
  const Case cases[] = {
      {GgufWith("shape", pair("blk.0.attn_q.weight", wide_b, 65)), "blk.0.attn_q.weight.lora_b"},
      {GgufWith("target", pair("blk.0.attn_qkv.weight", b, 64)), "attn_qkv"},
      {GgufWith("layer", pair("blk.5.attn_q.weight", b, 64)), "layer 5"},
      {GgufWith("half",
                [&](testing::GgufWriter& w) {
                  w.AddF32Tensor("blk.0.attn_q.weight.lora_a", {4, 64}, a);
                }),
       "lora_A but no lora_B"},
      {GgufWith("type", pair("blk.0.attn_q.weight", b, 64), "llama", "model"), "general.type"},
      {GgufWith("arch", pair("blk.0.attn_q.weight", b, 64), "gpt2"), "general.architecture"},
      {GgufWith("none", [](testing::GgufWriter&) {}), "no LoRA tensor"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ReadError(c.path, base);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.path << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << s;
  }
  // The rank bound, and the bound on the tensors' bytes.
  LoraReadOptions small = Inside(testing::TempDir());
  small.max_rank = 2;
  EXPECT_THAT(ReadError(cases[0].path, base, small).message(), HasSubstr("rank 4"));
  const std::string good = GgufWith("good", pair("blk.0.attn_q.weight", b, 64));
  EXPECT_TRUE(ReadError(good, base).ok()) << ReadError(good, base);
  small = Inside(testing::TempDir());
  small.max_bytes = 1000;
  EXPECT_THAT(ReadError(good, base, small).message(), HasSubstr("bytes"));
}

TEST(LoraAdapterTest, TruncatedFilesAreRefused) {
  const ModelConfig base = Config("stories260K");
  const LoraAdapter adapter = testing::RandomLoraAdapter(base, 4, 4.0, 7);
  const std::string dir = testing::TempDir() + "/cut", gguf = testing::TempDir() + "/cut.gguf";
  testing::WritePeftLora(adapter, base, 4.0, dir);
  testing::WriteGgufLora(adapter, base, "llama", 4.0, gguf);
  for (const std::string& file : {dir + "/adapter_model.safetensors", gguf}) {
    fs::resize_file(file, fs::file_size(file) - 100);
  }
  EXPECT_EQ(ReadError(dir, base).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadError(gguf, base).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoraAdapterTest, PathsOutsideTheAllowedRootsAreRefusedSymlinksToo) {
  const ModelConfig base = Config("stories260K");
  const std::string root = testing::TempDir() + "/root", outside = testing::TempDir() + "/outside";
  fs::create_directories(root);
  const LoraAdapter adapter = testing::RandomLoraAdapter(base, 4, 4.0, 8);
  testing::WritePeftLora(adapter, base, 4.0, outside + "/a");
  testing::WritePeftLora(adapter, base, 4.0, root + "/b");
  const LoraReadOptions options = Inside(root);
  EXPECT_TRUE(ReadError(root + "/b", base, options).ok());
  EXPECT_THAT(ReadError(outside + "/a", base, options).message(), HasSubstr("outside"));
  EXPECT_THAT(ReadError(root + "/../outside/a", base, options).message(), HasSubstr("outside"));
  // A link inside the root to a directory outside, and a file in a directory inside that
  // links outside.
  fs::create_directory_symlink(outside + "/a", root + "/link");
  EXPECT_THAT(ReadError(root + "/link", base, options).message(), HasSubstr("outside"));
  fs::create_directories(root + "/c");
  fs::copy_file(outside + "/a/adapter_config.json", root + "/c/adapter_config.json");
  fs::create_symlink(outside + "/a/adapter_model.safetensors",
                     root + "/c/adapter_model.safetensors");
  EXPECT_THAT(ReadError(root + "/c", base, options).message(), HasSubstr("outside"));
  EXPECT_EQ(ReadError(root + "/missing", base, options).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ReadError(root + "/b", base, LoraReadOptions()).message(), HasSubstr("outside"));
}

}  // namespace
}  // namespace pagoda
