// The worker's half of speculative decoding (ScheduledSequence::num_draft_tokens): a draft is
// kept while it is what the worker samples, the first difference is replaced by the sampled
// token, and the tokens are those of decoding one at a time, greedy or sampled. A draft that
// does not fit the rules is refused. And the sampled tokens follow the model's distribution
// (a chi-square test on stories260K's 512-token vocabulary).
#include <cmath>
#include <functional>
#include <vector>

#include "common/model/llama2c_checkpoint.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/worker_engine.h"

namespace pagoda {
namespace {

class DraftVerificationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    WorkerOptions options;
    options.num_blocks = 64;
    options.max_num_batched_tokens = 256;
    options.max_num_seqs = 64;
    auto engine = WorkerEngine::Create(*std::move(w), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // One step of one sequence: `tokens` from position `computed`, the last `draft` a draft, in
  // blocks 4 * seq_id ... (4 blocks of 16: room for 64 tokens).
  absl::StatusOr<StepResult> Step(int64_t seq_id, const std::vector<int>& tokens, int computed,
                                  int draft, const NewSequence* added = nullptr) {
    StepCommand c;
    c.step_id = next_step_++;
    if (added != nullptr) c.new_sequences.push_back(*added);
    c.scheduled.push_back({.seq_id = seq_id,
                           .token_ids = tokens,
                           .num_computed_tokens = computed,
                           .num_kept_blocks = added != nullptr ? 0 : 4,
                           .new_block_ids = added != nullptr
                                                ? std::vector<int>{static_cast<int>(seq_id) * 4,
                                                                   static_cast<int>(seq_id) * 4 + 1,
                                                                   static_cast<int>(seq_id) * 4 + 2,
                                                                   static_cast<int>(seq_id) * 4 + 3}
                                                : std::vector<int>{},
                           .sample = true,
                           .num_draft_tokens = draft});
    return engine_->Execute(c);
  }
  static NewSequence Sequence(int64_t id, const SamplingParams& sampling) {
    NewSequence n;
    n.seq_id = id;
    n.sampling = sampling;
    n.prompt_ids = kPrompt;
    return n;
  }
  static std::vector<int> Tokens(const StepResult& r) {
    std::vector<int> ids;
    for (const SampledToken& s : r.sampled) ids.push_back(s.token_id);
    return ids;
  }
  // 12 tokens decoded one at a time after kPrompt.
  std::vector<int> DecodeOneAtATime(int64_t seq_id, const SamplingParams& sampling) {
    const NewSequence n = Sequence(seq_id, sampling);
    absl::StatusOr<StepResult> r = Step(seq_id, kPrompt, 0, 0, &n);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<int> out = {r->sampled[0].token_id};
    while (out.size() < 12) {
      r = Step(seq_id, {out.back()}, static_cast<int>(kPrompt.size() + out.size()) - 1, 0);
      EXPECT_TRUE(r.ok()) << r.status();
      out.push_back(r->sampled[0].token_id);
    }
    return out;
  }
  // The same with drafts: correct ones, then one wrong at `wrong_at`.
  void ExpectDraftsVerified(const SamplingParams& sampling) {
    const std::vector<int> ref = DecodeOneAtATime(1, sampling);
    const NewSequence n = Sequence(2, sampling);
    absl::StatusOr<StepResult> r = Step(2, kPrompt, 0, 0, &n);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->sampled[0].token_id, ref[0]);
    const int p = static_cast<int>(kPrompt.size());
    // ref[1], ref[2] drafted right, then a wrong token: two kept, the third replaced by ref[3].
    const int wrong = (ref[3] + 1) % 512;
    r = Step(2, {ref[0], ref[1], ref[2], wrong, ref[4]}, p, 4);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Tokens(*r), std::vector<int>({ref[1], ref[2], ref[3]}));
    // From ref[3] (position p + 3): a whole right draft, and the token after it.
    r = Step(2, {ref[3], ref[4], ref[5], ref[6], ref[7]}, p + 3, 4);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Tokens(*r), std::vector<int>({ref[4], ref[5], ref[6], ref[7], ref[8]}));
    // A first draft token that is wrong: one token, the right one.
    r = Step(2, {ref[8], (ref[9] + 7) % 512}, p + 8, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Tokens(*r), std::vector<int>({ref[9]}));
  }

  inline static const std::vector<int> kPrompt = {1, 403, 407, 261, 378, 430, 271};
  std::unique_ptr<WorkerEngine> engine_;
  int64_t next_step_ = 0;
};

TEST_F(DraftVerificationTest, GreedyKeepsTheDraftWhileItIsTheArgmax) {
  SamplingParams greedy;
  greedy.temperature = 0;
  ExpectDraftsVerified(greedy);
}

// Penalties see the kept draft tokens as output; the random draw is per position.
TEST_F(DraftVerificationTest, SampledWithPenaltiesKeepsTheTokensOfOneAtATime) {
  SamplingParams s;
  s.temperature = 0.8f;
  s.seed = 7;
  s.repetition_penalty = 1.2f;
  s.frequency_penalty = 0.5f;
  s.presence_penalty = 0.3f;
  ExpectDraftsVerified(s);
}

TEST_F(DraftVerificationTest, ABadDraftIsRefused) {
  SamplingParams greedy;
  greedy.temperature = 0;
  NewSequence n = Sequence(3, greedy);
  n.sampling.prompt_logprobs = 0;
  ASSERT_TRUE(Step(3, kPrompt, 0, 0, &n).ok());
  const int p = static_cast<int>(kPrompt.size());
  auto refused = [&](const std::function<void(ScheduledSequence&)>& spoil) {
    StepCommand c;
    c.step_id = next_step_++;
    ScheduledSequence s{.seq_id = 3,
                        .token_ids = {5, 6, 7},
                        .num_computed_tokens = p,
                        .num_kept_blocks = 4,
                        .new_block_ids = {},
                        .sample = true,
                        .num_draft_tokens = 2};
    spoil(s);
    c.scheduled.push_back(s);
    absl::StatusOr<StepResult> r = engine_->Execute(c);
    return !r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_FALSE(refused([](ScheduledSequence&) {}));  // the valid one, for contrast
  EXPECT_TRUE(refused([](ScheduledSequence& s) { s.num_draft_tokens = -1; }));
  EXPECT_TRUE(refused([](ScheduledSequence& s) { s.num_draft_tokens = 3; }));  // no token left
  EXPECT_TRUE(refused([](ScheduledSequence& s) { s.sample = false; }));
  EXPECT_TRUE(refused([](ScheduledSequence& s) { s.prompt_logprobs = true; }));
  EXPECT_TRUE(refused([](ScheduledSequence& s) {
    s.constrained = true;
    s.allowed_ids = {5};
  }));
  // A draft inside the prompt (positions before p).
  EXPECT_TRUE(refused([&](ScheduledSequence& s) {
    s.num_computed_tokens = p - 3;
    s.token_ids = {kPrompt[p - 3], kPrompt[p - 2], kPrompt[p - 1]};
  }));
  // More draft rows than the step's logits hold (64 sequences' worth).
  EXPECT_TRUE(refused([&](ScheduledSequence& s) {
    s.token_ids.assign(66, 5);
    s.num_draft_tokens = 65;
    s.new_block_ids = {40, 41};  // room for the positions: only the rows are too many
  }));
}

// Sampling at temperature 1 with a draft in the step: over 4,000 seeds the first token's counts
// follow the model's distribution (chi-square, p = 0.001), and each seed gives the token it gives
// without the draft. The draft is the most likely token, so it is kept about as often as the
// model picks it.
TEST_F(DraftVerificationTest, SampledTokensFollowTheModelsDistribution) {
  SamplingParams s;
  s.temperature = 1.0f;
  s.logprobs = 20;
  // The distribution after BOS and one output token, from the top 20 log probabilities (a short
  // context: each trial computes it).
  const std::vector<int> context = {1, 400};
  NewSequence probe = Sequence(0, s);
  probe.prompt_ids = {1};
  probe.output_ids = {400};
  absl::StatusOr<StepResult> r = Step(0, context, 0, 0, &probe);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<TokenLogprob> top = r->sampled[0].top_logprobs;
  ASSERT_EQ(top.size(), 20u);
  const int draft_token = top[0].token_id;
  // 20 trials a step, each a sequence with the draft and one without (40 sequences, one block
  // each); a step also ends the previous step's.
  constexpr int kTrials = 4000, kPerStep = 20;  // 60 logit rows of the 64 a step holds
  std::vector<int> counts(top.size() + 1, 0);   // the top 20, then the rest
  std::vector<int64_t> previous;
  for (int first = 0; first < kTrials; first += kPerStep) {
    StepCommand c;
    c.step_id = next_step_++;
    c.finished_ids = previous;
    previous.clear();
    for (int trial = first; trial < first + kPerStep; ++trial) {
      s.seed = 1000 + trial;
      for (int draft : {0, 1}) {
        NewSequence n = Sequence(10 + 2 * trial + draft, s);
        n.prompt_ids = {1};
        n.output_ids = {400};
        std::vector<int> tokens = context;
        if (draft) tokens.push_back(draft_token);
        c.new_sequences.push_back(n);
        c.scheduled.push_back({.seq_id = n.seq_id,
                               .token_ids = tokens,
                               .num_computed_tokens = 0,
                               .num_kept_blocks = 0,
                               .new_block_ids = {16 + 2 * (trial - first) + draft},
                               .sample = true,
                               .num_draft_tokens = draft});
        previous.push_back(n.seq_id);
      }
    }
    absl::StatusOr<StepResult> step = engine_->Execute(c);
    ASSERT_TRUE(step.ok()) << step.status();
    size_t next = 0;
    for (int trial = first; trial < first + kPerStep; ++trial) {
      ASSERT_LT(next + 1, step->sampled.size());
      const int plain = step->sampled[next].token_id, drafted = step->sampled[next + 1].token_id;
      ASSERT_EQ(drafted, plain) << "seed " << 1000 + trial;
      next += drafted == draft_token ? 3 : 2;  // a kept draft: the token after it too
      size_t bucket = 0;
      while (bucket < top.size() && top[bucket].token_id != drafted) ++bucket;
      ++counts[bucket];
    }
    ASSERT_EQ(next, step->sampled.size());
  }
  double rest = 1.0, chi2 = 0.0;
  int df = 0;
  for (size_t i = 0; i <= top.size(); ++i) {
    const double p = i < top.size() ? std::exp(top[i].logprob) : rest;
    if (i < top.size()) rest -= p;
    const double expected = kTrials * p;
    if (expected < 5) continue;  // (the chi-square approximation needs >= 5 per bucket)
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++df;
  }
  ASSERT_GE(df, 4);
  // The 0.999 quantile of chi-square with df - 1 degrees of freedom (Wilson-Hilferty).
  const double k = df - 1, z = 3.09;
  const double critical = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi2, critical) << "df " << df;
}

}  // namespace
}  // namespace pagoda
