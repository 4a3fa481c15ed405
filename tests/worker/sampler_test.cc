#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pagoda {
namespace {

std::vector<float> Logits() {
  // Token 0 is most likely, then 1, 2, ... with decreasing logits.
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = -0.1f * i;
  return l;
}

SampledToken SampleOnce(const SamplingParams& p, int seq_index, int position,
                        std::vector<int> output = {}) {
  Sampler sampler(50);
  std::vector<float> logits = Logits();
  std::vector<int> prompt(position - output.size(), 49);
  return sampler.Sample(logits.data(), p, prompt, output, seq_index);
}

TEST(SamplerTest, GreedyTakesTheFirstMaximum) {
  Sampler sampler(4);
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0).token_id, 1);
}

// The vectorized scan keeps the scalar one's answer: the first maximum whatever lane or tail
// it falls in, NaN never winning, all -inf giving 0.
TEST(SamplerTest, GreedyTakesTheFirstMaximumAtAnyVocabularySize) {
  SamplingParams p;
  p.temperature = 0;
  for (int n : {5, 16, 100, 32000}) {
    Sampler sampler(n);
    for (auto [a, b] : {std::pair{3, 40}, {17, 1}, {0, 33}, {n - 1, n - 2}, {n / 2, n / 2 + 16}}) {
      if (a >= n || b >= n || a == b) continue;
      std::vector<float> logits(n, -1.0f);
      logits[a] = logits[b] = 5.0f;
      if (n > 2) logits[2] = std::nanf("");
      EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0).token_id, std::min(a, b))
          << n << " " << a << " " << b;
    }
    std::vector<float> none(n, -std::numeric_limits<float>::infinity());
    EXPECT_EQ(sampler.Sample(none.data(), p, {}, {}, 0).token_id, 0);
  }
}

// The allowed set, word by word: all, none and mixed words, and a last word cut short.
TEST(SamplerTest, OnlyAllowedTokensAreSampled) {
  constexpr int n = 200;
  Sampler sampler(n);
  SamplingParams p;
  p.temperature = 0;
  std::vector<uint64_t> allowed((n + 63) / 64, 0);
  auto allow = [&](int id) { allowed[id / 64] |= uint64_t{1} << (id % 64); };
  allowed[0] = ~uint64_t{0};  // 0..63
  allow(100);
  allow(199);
  std::vector<float> logits(n);
  for (int i = 0; i < n; ++i) logits[i] = static_cast<float>(i);
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0, {}, allowed).token_id, 199);
  for (int i = 0; i < n; ++i) logits[i] = static_cast<float>(i % 150);
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0, {}, allowed).token_id, 100);
  for (int i = 0; i < n; ++i) logits[i] = static_cast<float>(i % 90);
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0, {}, allowed).token_id, 63);
}

TEST(SamplerTest, SameCounterSameToken) {
  SamplingParams p;
  p.seed = 42;
  for (int pos = 1; pos < 40; ++pos) {
    EXPECT_EQ(SampleOnce(p, 3, pos).token_id, SampleOnce(p, 3, pos).token_id);
  }
}

TEST(SamplerTest, SeedIndexAndPositionAllChangeTheDraw) {
  EXPECT_NE(CounterUniform(1, 0, 10), CounterUniform(2, 0, 10));
  EXPECT_NE(CounterUniform(1, 0, 10), CounterUniform(1, 1, 10));
  EXPECT_NE(CounterUniform(1, 0, 10), CounterUniform(1, 0, 11));
  for (uint64_t i = 0; i < 1000; ++i) {
    const float u = CounterUniform(i, i * 7, i * 13);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
}

TEST(SamplerTest, TopKOneIsGreedy) {
  SamplingParams p;
  p.top_k = 1;
  for (int pos = 1; pos < 30; ++pos) EXPECT_EQ(SampleOnce(p, 0, pos).token_id, 0);
}

TEST(SamplerTest, TopKAndTopPRestrictTheCandidates) {
  SamplingParams k3;
  k3.top_k = 3;
  SamplingParams p_small;
  p_small.top_p = 0.05f;  // token 0 alone has p ≈ 0.1 > 0.05
  SamplingParams min_p;
  min_p.min_p = 0.8f;  // keeps tokens with p >= 0.8 p(0): logits within ln(1/0.8) ≈ 0.22 → 0..2
  std::map<int, int> seen_k, seen_minp;
  for (int pos = 1; pos < 400; ++pos) {
    seen_k[SampleOnce(k3, 0, pos).token_id]++;
    EXPECT_EQ(SampleOnce(p_small, 0, pos).token_id, 0);
    seen_minp[SampleOnce(min_p, 0, pos).token_id]++;
  }
  EXPECT_EQ(seen_k.size(), 3u);
  EXPECT_EQ(seen_k.rbegin()->first, 2);
  EXPECT_EQ(seen_minp.size(), 3u);
  EXPECT_EQ(seen_minp.rbegin()->first, 2);
}

TEST(SamplerTest, SamplingFollowsTheDistribution) {
  // Two tokens with p = 0.75 / 0.25.
  Sampler sampler(2);
  SamplingParams p;
  int ones = 0;
  const int trials = 4000;
  for (int pos = 0; pos < trials; ++pos) {
    std::vector<float> logits = {std::log(3.0f), 0.0f};
    std::vector<int> prompt(pos, 0);
    ones += sampler.Sample(logits.data(), p, prompt, {}, 0).token_id;
  }
  EXPECT_NEAR(ones / static_cast<double>(trials), 0.25, 0.03);
}

TEST(SamplerTest, PenaltiesDemoteSeenTokens) {
  Sampler sampler(3);
  std::vector<float> logits = {2.0f, 1.9f, -1.0f};
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.2f;
  // Token 0 appeared twice in the output: 2.0 - 0.4 < 1.9.
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, std::vector<int>{0, 0}, 0).token_id, 1);
  logits = {2.0f, 1.9f, -1.0f};
  p.frequency_penalty = 0;
  p.repetition_penalty = 1.2f;  // in the prompt: 2.0 / 1.2 < 1.9
  EXPECT_EQ(sampler.Sample(logits.data(), p, std::vector<int>{0}, {}, 0).token_id, 1);
  logits = {2.0f, 1.9f, -1.0f};
  p.repetition_penalty = 1;
  p.presence_penalty = 0.5f;
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, std::vector<int>{0}, 0).token_id, 1);
}

TEST(SamplerTest, LogprobsAreOfTheRawDistribution) {
  Sampler sampler(3);
  std::vector<float> logits = {0.0f, std::log(3.0f), -100.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  const SampledToken t = sampler.Sample(logits.data(), p, {}, {}, 0);
  EXPECT_EQ(t.token_id, 1);
  EXPECT_NEAR(t.logprob, std::log(0.75), 1e-5);
  ASSERT_EQ(t.top_logprobs.size(), 2u);
  EXPECT_EQ(t.top_logprobs[0].token_id, 1);
  EXPECT_EQ(t.top_logprobs[1].token_id, 0);
  EXPECT_NEAR(t.top_logprobs[1].logprob, std::log(0.25), 1e-5);
}

TEST(SamplerTest, LogitBiasIsAddedBeforeGreedysChoice) {
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{1, -100.0f}, {3, 1.5f}};  // 3 + 1.5 > 2 + 1.5 > 2; 1 is banned
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 2.0f};
  EXPECT_EQ(sampler.Sample(logits.data(), p, {}, {}, 0).token_id, 3);
}

TEST(SamplerTest, LogitBiasIsAddedBeforeTopKAndTemperature) {
  // Token 49 is the least likely; +100 puts it alone at the top, so top_k = 1 keeps only it.
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 5;
  p.logit_bias = {{49, 100.0f}};
  for (int pos = 1; pos < 20; ++pos) EXPECT_EQ(SampleOnce(p, 0, pos).token_id, 49);
  // -100 on the likeliest token: never sampled (e^-100 of the mass), at any temperature.
  p = SamplingParams();
  p.temperature = 1;
  p.logit_bias = {{0, -100.0f}};
  for (int pos = 1; pos < 200; ++pos) EXPECT_NE(SampleOnce(p, 0, pos).token_id, 0);
}

TEST(SamplerTest, MinTokensMasksTheStopIdsUntilEnoughAreOut) {
  Sampler sampler(4);
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  const std::vector<int> stop_ids = {1, 2};
  auto sample = [&](std::vector<int> output) {
    std::vector<float> logits = {0.0f, 5.0f, 4.0f, 1.0f};
    return sampler.Sample(logits.data(), p, {}, output, 0, stop_ids).token_id;
  };
  EXPECT_EQ(sample({}), 3);
  EXPECT_EQ(sample({3}), 3);
  EXPECT_EQ(sample({3, 3}), 1) << "min_tokens reached";
  // Sampled, too: every draw avoids the masked ids.
  p.temperature = 1;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    p.seed = seed;
    const int t = sample({0});
    EXPECT_TRUE(t == 0 || t == 3) << t;
  }
}

TEST(SamplerTest, LogprobsStayTheModelsUnderBiasAndMask) {
  Sampler sampler(3);
  std::vector<float> logits = {0.0f, std::log(3.0f), -100.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 1;
  p.min_tokens = 1;
  p.logit_bias = {{0, 1.0f}};
  const std::vector<int> stop_ids = {1};
  const SampledToken t = sampler.Sample(logits.data(), p, {}, {}, 0, stop_ids);
  EXPECT_EQ(t.token_id, 0);
  EXPECT_NEAR(t.logprob, std::log(0.25), 1e-5);
}

TEST(SamplingParamsTest, ValidateNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(p.Validate().ok());
  p.temperature = NAN;
  EXPECT_NE(p.Validate().message().find("temperature"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1;
  EXPECT_NE(p.Validate().message().find("temperature"), std::string::npos);
  p = SamplingParams();
  p.top_p = 0;
  EXPECT_NE(p.Validate().message().find("top_p"), std::string::npos);
  p.top_p = 1.5f;
  EXPECT_NE(p.Validate().message().find("top_p"), std::string::npos);
  p = SamplingParams();
  p.logprobs = 100;
  EXPECT_NE(p.Validate().message().find("logprobs"), std::string::npos);
  p = SamplingParams();
  p.min_tokens = -1;
  EXPECT_NE(p.Validate().message().find("min_tokens"), std::string::npos);
  p = SamplingParams();
  p.logit_bias = {{4, 100.0f}, {9, -100.0f}};
  EXPECT_TRUE(p.Validate().ok());
  EXPECT_TRUE(p.ValidateTokenIds(10).ok());
  EXPECT_NE(p.ValidateTokenIds(9).message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{9, 1.0f}, {4, 1.0f}};
  EXPECT_NE(p.Validate().message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{4, INFINITY}};
  EXPECT_NE(p.Validate().message().find("logit_bias"), std::string::npos);
}

// A draft's rows (Sampler::VerifyDraft): each samples as decoding one token at a time would,
// seeing the tokens sampled before it (here through a presence penalty that turns the greedy
// choice between 7 and 8), and verification stops after the first token the draft did not have.
TEST(SamplerTest, VerifyDraftSamplesAsOneTokenAtATimeAndStopsAtTheFirstDifference) {
  constexpr int kVocabSize = 50;
  std::vector<float> row(kVocabSize, 0.0f);
  row[7] = 2.0f;
  row[8] = 1.9f;
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 0.5f;
  const std::vector<int> prompt = {1, 2};
  // One token at a time: 7, then 8 (7 penalized), then 7 (both penalized).
  std::vector<int> expected;
  {
    Sampler sampler(kVocabSize);
    std::vector<int> output;
    for (int i = 0; i < 3; ++i) {
      std::vector<float> logits = row;
      output.push_back(sampler.Sample(logits.data(), p, prompt, output, 0).token_id);
    }
    expected = output;
    ASSERT_EQ(expected, (std::vector<int>{7, 8, 7}));
  }
  struct Case {
    std::vector<int> draft;
    int kept;
  };
  for (const Case& c : {Case{{7, 8, 9}, 2}, Case{{7, 8}, 2}, Case{{7}, 1}, Case{{}, 0},
                        Case{{3, 8, 7}, 0}, Case{{7, 9, 7}, 1}}) {
    Sampler sampler(kVocabSize);
    const int num_rows = static_cast<int>(c.draft.size()) + 1;
    std::vector<float> logits;
    for (int r = 0; r < num_rows; ++r) logits.insert(logits.end(), row.begin(), row.end());
    std::vector<int> tokens = prompt;
    std::vector<SampledToken> out;
    out.push_back(SampledToken{.seq_id = 9, .token_id = 0, .logprob = 0, .top_logprobs = {}});
    EXPECT_EQ(
        sampler.VerifyDraft(logits.data(), c.draft, p, 2, 0, {}, {}, /*seq_id=*/5, &tokens, &out),
        c.kept);
    ASSERT_EQ(out.size(), 1u + c.kept + 1) << "draft of " << c.draft.size();
    std::vector<int> sampled(tokens.begin() + 2, tokens.end());
    EXPECT_EQ(sampled, std::vector<int>(expected.begin(), expected.begin() + c.kept + 1));
    for (size_t i = 1; i < out.size(); ++i) {
      EXPECT_EQ(out[i].seq_id, 5);
      EXPECT_EQ(out[i].token_id, sampled[i - 1]);
    }
    EXPECT_EQ(out[0].seq_id, 9);
  }
}

}  // namespace
}  // namespace pagoda
