// ModelConfig::Validate: the checks every loader shares, with errors in the file's own words.
#include "common/model/model_config.h"

#include <cstdint>

#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

ModelConfig Stories260K() {
  ModelConfig c;
  CHECK(NamedModelConfig("stories260K", &c));  // eos {1, 2}
  return c;
}

TEST(ModelConfigTest, ARunnableShapeIsValid) { EXPECT_TRUE(Stories260K().Validate("m").ok()); }

TEST(ModelConfigTest, ErrorsNameTheSourceAndTheFilesKey) {
  ModelConfig c = Stories260K();
  c.num_kv_heads = 3;
  ModelConfigKeys keys;
  keys.num_heads = "num_attention_heads";
  keys.num_kv_heads = "num_key_value_heads";
  const absl::Status s = c.Validate("dir/config.json", keys);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dir/config.json: num_attention_heads (8) must be a multiple "
                                     "of num_key_value_heads (3)"));
}

TEST(ModelConfigTest, EachBrokenInvariantIsRefused) {
  struct Case {
    void (*edit)(ModelConfig&);
    const char* message;
  };
  const Case cases[] = {
      {[](ModelConfig& c) { c.dim = 0; }, "dim = 0 is out of range"},
      {[](ModelConfig& c) { c.num_layers = 1 << 20; }, "num_layers = 1048576 is out of range"},
      {[](ModelConfig& c) { c.head_dim = 1; }, "head_dim = 1 is out of range"},
      {[](ModelConfig& c) { c.head_dim = 7; }, "head_dim (7) even"},
      {[](ModelConfig& c) { c.vocab_size = -1; }, "vocab_size = -1"},
      {[](ModelConfig& c) { c.rms_norm_eps = 0; }, "rms_norm_eps = 0 is out of range (0, 1)"},
      {[](ModelConfig& c) { c.rope_theta = -1; }, "rope_theta = -1 must be positive"},
      {[](ModelConfig& c) { c.eos_ids = {512}; }, "eos_ids 512 is outside the vocabulary"},
  };
  for (const Case& k : cases) {
    ModelConfig c = Stories260K();
    k.edit(c);
    EXPECT_THAT(c.Validate("m").message(), HasSubstr(k.message)) << k.message;
  }
}

TEST(ModelConfigTest, SizesBeyondIntSaturateOutOfRangeInsteadOfWrapping) {
  ModelConfig c = Stories260K();
  c.SetShape({.dim = (int64_t{1} << 32) + 64,
              .hidden_dim = 172,
              .num_layers = 5,
              .num_heads = 8,
              .num_kv_heads = -(int64_t{1} << 40),
              .head_dim = 8,
              .vocab_size = 512,
              .max_seq_len = 512});
  EXPECT_EQ(c.dim, INT32_MAX);
  EXPECT_EQ(c.num_kv_heads, INT32_MIN);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_THAT(c.Validate("m").message(), HasSubstr("dim = 2147483647 is out of range"));
}

}  // namespace
}  // namespace pagoda
