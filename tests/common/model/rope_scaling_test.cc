// RoPE scaling (linear, Llama 3, YaRN): frequencies and YaRN's attention factor against
// transformers' formulas transcribed independently (reference_model.cc) and against constants
// worked out by hand; the parsers of config.json's object and of --rope-scaling; a greedy run
// of a scaled model past its original context against the float64 reference.
#include "common/model/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "common/model/model_config.h"
#include "common/model/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/model_runs.h"
#include "tests/common/model/reference_model.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// Qwen2.5-7B-Instruct's shape of RoPE with the YaRN block its model card adds for 128k:
// head_dim 128, rope_theta 1e6, {"type": "yarn", "factor": 4.0,
// "original_max_position_embeddings": 32768}.
ModelConfig Qwen25Yarn() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 1e6f;
  c.max_seq_len = 32768;
  c.rope_style = RopeStyle::kHalf;
  c.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 4, .original_max_position = 32768};
  return c;
}

double Unscaled(const ModelConfig& c, int i) {
  return 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
}

TEST(RopeScalingTest, YarnFrequenciesMatchTransformersFormula) {
  const ModelConfig c = Qwen25Yarn();
  for (int i = 0; i < c.head_dim / 2; ++i) {
    const double want = testing::ReferenceRopeFrequency(c, i);
    EXPECT_NEAR(c.RopeFrequency(i) / want, 1.0, 2e-6) << "pair " << i;
  }
}

TEST(RopeScalingTest, YarnRampRunsBetweenThePairsTurning32And1TimesPerOriginalContext) {
  // find_correction_dim(r) = 128 ln(32768 / (2 pi r)) / (2 ln 1e6): r = 32 gives 23.596 (floor
  // 23), r = 1 gives 39.651 (ceil 40). Pairs up to 23 keep their frequency, pairs from 40 on
  // are divided by the factor 4, and pair 30 is 7/17 of the way: freq (1 - 7/17 * 3/4).
  const ModelConfig c = Qwen25Yarn();
  for (int i : {0, 10, 23}) EXPECT_NEAR(c.RopeFrequency(i) / Unscaled(c, i), 1.0, 2e-6) << i;
  for (int i : {40, 50, 63}) EXPECT_NEAR(c.RopeFrequency(i) / Unscaled(c, i), 0.25, 2e-6) << i;
  EXPECT_NEAR(c.RopeFrequency(30) / Unscaled(c, 30), 1 - 7.0 / 17 * 0.75, 2e-6);
  // mscale = 0.1 ln(4) + 1 = 1.138629436...
  EXPECT_NEAR(c.RopeAttentionFactor(), 1.1386294, 1e-6);
  EXPECT_NEAR(c.RopeAttentionFactor(), testing::ReferenceRopeAttentionFactor(c), 1e-6);
}

TEST(RopeScalingTest, LinearDividesEveryFrequencyAndLeavesTheAttentionAlone) {
  ModelConfig c = Qwen25Yarn();
  c.rope_scaling = {.type = RopeScalingType::kLinear, .factor = 2, .original_max_position = 4096};
  for (int i : {0, 17, 63}) {
    EXPECT_NEAR(c.RopeFrequency(i) / Unscaled(c, i), 0.5, 2e-6) << i;
    EXPECT_NEAR(c.RopeFrequency(i) / testing::ReferenceRopeFrequency(c, i), 1.0, 2e-6) << i;
  }
  EXPECT_EQ(c.RopeAttentionFactor(), 1.0f);
  EXPECT_EQ(c.rope_scaling.ScaledContext(), 8192);
}

TEST(RopeScalingTest, HuggingFacesObjectIsReadInBothSpellingsWithItsDefaults) {
  absl::StatusOr<RopeScaling> s = ParseRopeScaling(
      Json::parse(R"({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})"),
      32768, "config.json: rope_scaling");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, RopeScalingType::kYarn);
  EXPECT_EQ(s->factor, 4);
  EXPECT_EQ(s->beta_fast, 32);
  EXPECT_EQ(s->beta_slow, 1);
  EXPECT_EQ(s->ScaledContext(), 131072);  // what vLLM derives as max_model_len
  // The original context defaults to max_position_embeddings.
  s = ParseRopeScaling(Json::parse(R"({"rope_type": "linear", "factor": 2})"), 2048, "x");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->type, RopeScalingType::kLinear);
  EXPECT_EQ(s->ScaledContext(), 4096);
  s = ParseRopeScaling(Json::parse(R"({"rope_type": "default"})"), 2048, "x");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->enabled());
}

TEST(RopeScalingTest, TypesNotImplementedAndBadValuesAreRefusedByName) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"rope_type": "dynamic", "factor": 2})",
       "rs: type \"dynamic\" is not supported (linear, llama3, yarn)"},
      {R"({"rope_type": "longrope", "factor": 2})", "type \"longrope\" is not supported"},
      {R"({"rope_type": "yarn"})", "factor = 0 must be >= 1"},
      {R"({"rope_type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32})",
       "needs 0 < beta_slow (32) < beta_fast (1)"},
      {R"({"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0})",
       "original_max_position_embeddings = 0 must be >= 1"},
      {R"({"rope_type": "yarn", "factor": 64, "original_max_position_embeddings": 32768})",
       "is above 1048576 tokens"},
      {R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1})",
       "low_freq_factor"},
      {R"({"rope_type": 3})", "rope_type"},
      {R"([1])", "rs: expected a JSON object"},
  };
  for (const Case& k : cases) {
    const absl::StatusOr<RopeScaling> s = ParseRopeScaling(Json::parse(k.json), 4096, "rs");
    ASSERT_FALSE(s.ok()) << k.json;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(k.message)) << k.json;
  }
}

TEST(RopeScalingTest, TheFlagStretchesTheContextAndChangesTheFingerprint) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));  // 512 tokens
  const std::string before = c.Fingerprint();
  ASSERT_TRUE(ApplyRopeScalingFlag(R"({"rope_type":"yarn","factor":4})", &c).ok());
  EXPECT_EQ(c.max_seq_len, 2048);
  EXPECT_EQ(c.rope_scaling.original_max_position, 512);
  EXPECT_NE(c.Fingerprint(), before);
  EXPECT_THAT(c.Fingerprint(), HasSubstr("rope_scaling=yarn:4:512:32:1:1.13863"));
  // Again on the scaled model: the original context is still the one it was trained for.
  ASSERT_TRUE(ApplyRopeScalingFlag(R"({"rope_type":"linear","factor":2})", &c).ok());
  EXPECT_EQ(c.max_seq_len, 1024);
  ASSERT_TRUE(ApplyRopeScalingFlag(R"({"rope_type":"default"})", &c).ok());
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_EQ(c.Fingerprint(), before);
  EXPECT_TRUE(ApplyRopeScalingFlag("", &c).ok());

  const absl::Status malformed = ApplyRopeScalingFlag("{yarn", &c);
  EXPECT_EQ(malformed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.message(), HasSubstr("--rope-scaling"));
  EXPECT_THAT(ApplyRopeScalingFlag(R"({"rope_type":"dynamic","factor":2})", &c).message(),
              HasSubstr("--rope-scaling: type \"dynamic\" is not supported"));
  c.rope_freq_factors.assign(c.head_dim / 2, 1.0f);
  EXPECT_THAT(ApplyRopeScalingFlag(R"({"rope_type":"yarn","factor":2})", &c).message(),
              HasSubstr("already scales its RoPE"));
}

// A model scaled by YaRN (trained for 64 positions, stretched 4x to 256) generates greedily past
// its original context what the float64 reference, fed the same tokens, ranks first.
TEST(RopeScalingTest, AGreedyRunWithYarnPastTheOriginalContextFollowsTheReference) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.rope_style = RopeStyle::kHalf;
  c.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 4, .original_max_position = 64};
  c.max_seq_len = static_cast<int>(c.rope_scaling.ScaledContext());
  ModelWeights w = RandomModelWeights(c, 11);
  const std::vector<int> prompt = {1, 7, 99, 250, 31, 4, 400, 12};
  const std::vector<int> out = testing::GreedyRun(w, prompt);
  ASSERT_EQ(prompt.size() + out.size(), 256u);
  std::vector<int> tokens = prompt;
  tokens.insert(tokens.end(), out.begin(), out.end() - 1);
  const std::vector<double> logits = testing::ReferenceLogits(w, tokens);
  const int vocab = c.vocab_size;
  int checked = 0;
  for (size_t t = prompt.size() - 1; t < tokens.size(); ++t) {
    const double* row = &logits[t * vocab];
    std::vector<double> sorted(row, row + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] < 1e-3) continue;  // a near tie: either is greedy
    const int next = out[t + 1 - prompt.size()];
    EXPECT_EQ(row[next], sorted[0]) << "position " << t + 1;
    ++checked;
  }
  EXPECT_GE(checked, 200) << "most positions decide";
}

}  // namespace
}  // namespace pagoda
