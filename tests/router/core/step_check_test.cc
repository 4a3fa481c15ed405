// The router's checks of a worker's answer (router/core/step_check.h): what a broken or hostile
// worker may send is refused with a status naming it, never crashes, and a right answer passes.
#include "router/core/step_check.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 100;
constexpr int kDim = 4;

class StepCheckTest : public ::testing::Test {
 protected:
  StepCheckTest() { command_.step_id = 7; }

  // A decoding sequence `id` (2 output tokens so far) scheduled with its last token and `draft`.
  void Decode(int64_t id, std::vector<int> draft = {}) {
    Sequence& seq = seqs_[id];
    seq.id = id;
    seq.num_prompt_tokens = 3;
    seq.tokens = {1, 2, 3, 4, 5};
    seq.max_tokens = 50;
    ScheduledSequence& s = command_.scheduled.emplace_back();
    s.seq_id = id;
    s.token_ids = {5};
    s.token_ids.insert(s.token_ids.end(), draft.begin(), draft.end());
    s.num_computed_tokens = 4;
    s.sample = true;
    s.num_draft_tokens = static_cast<int>(draft.size());
  }
  void Sample(int64_t id, int token) {
    result_.sampled.push_back(
        {.seq_id = id, .token_id = token, .logprob = -0.5f, .top_logprobs = {}});
  }
  absl::Status Check() {
    result_.step_id = command_.step_id;
    return CheckStepResult(command_, result_, kVocab, kDim, [this](int64_t id) -> const Sequence* {
      auto it = seqs_.find(id);
      return it == seqs_.end() ? nullptr : &it->second;
    });
  }
  // Check()'s status, which must be INTERNAL with `what` in its message.
  void ExpectRefused(const std::string& what) {
    const absl::Status status = Check();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  }

  absl::flat_hash_map<int64_t, Sequence> seqs_;
  StepCommand command_;
  StepResult result_;
};

TEST_F(StepCheckTest, AcceptsOneSamplePerSequenceAndAKeptDraftPrefix) {
  Decode(1);
  Decode(2, {10, 11, 12});
  Sample(1, 40);
  Sample(2, 10);  // draft token 0 kept
  Sample(2, 11);  // draft token 1 kept
  Sample(2, 99);  // differs from draft token 2: the last sample
  EXPECT_TRUE(Check().ok()) << Check();
}

TEST_F(StepCheckTest, AcceptsAWholeDraftKeptAndTheTokenAfterIt) {
  Decode(1, {10, 11});
  Sample(1, 10);
  Sample(1, 11);
  Sample(1, 12);
  EXPECT_TRUE(Check().ok()) << Check();
}

TEST_F(StepCheckTest, RefusesAnAnswerToAnotherStep) {
  Decode(1);
  Sample(1, 40);
  result_.step_id = 8;
  const absl::Status status = CheckStepResult(command_, result_, kVocab, kDim,
                                              [](int64_t) -> const Sequence* { return nullptr; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(status.message()), HasSubstr("answered step 8 to step 7"));
}

TEST_F(StepCheckTest, RefusesAForwardTimeThatIsNegativeOrNotFinite) {
  Decode(1);
  Sample(1, 40);
  for (double t : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    result_.forward_seconds = t;
    ExpectRefused("forward_seconds");
  }
}

TEST_F(StepCheckTest, RefusesAMissingSample) {
  Decode(1);
  Decode(2);
  Sample(1, 40);
  ExpectRefused("no sample for sequence 2");
}

TEST_F(StepCheckTest, RefusesSamplesOutOfOrder) {
  Decode(1);
  Decode(2);
  Sample(2, 40);
  Sample(1, 40);
  ExpectRefused("no sample for sequence 1");
}

TEST_F(StepCheckTest, RefusesUnrequestedSamples) {
  Decode(1);
  Sample(1, 40);
  Sample(1, 41);
  ExpectRefused("1 unrequested samples");
}

TEST_F(StepCheckTest, RefusesASampleForASequenceThatDoesNotSample) {
  Decode(1);
  command_.scheduled[0].sample = false;
  Sample(1, 40);
  ExpectRefused("unrequested samples");
}

TEST_F(StepCheckTest, RefusesTokenIdsOutsideTheVocabulary) {
  for (int id : {-1, kVocab, std::numeric_limits<int>::max()}) {
    result_.sampled.clear();
    command_.scheduled.clear();
    Decode(1);
    Sample(1, id);
    ExpectRefused("outside the vocabulary");
  }
}

TEST_F(StepCheckTest, RefusesALogprobThatIsNotFinite) {
  Decode(1);
  Sample(1, 40);
  result_.sampled[0].logprob = std::nanf("");
  ExpectRefused("logprob");
}

TEST_F(StepCheckTest, RefusesMoreAlternativesThanTheSequenceAskedFor) {
  Decode(1);
  seqs_[1].sampling.logprobs = 1;
  Sample(1, 40);
  result_.sampled[0].top_logprobs = {{.token_id = 40, .logprob = -0.5f},
                                     {.token_id = 41, .logprob = -1.0f}};
  ExpectRefused("2 top logprobs for sequence 1, which asked for 1");
}

TEST_F(StepCheckTest, RefusesAnAlternativeOutsideTheVocabulary) {
  Decode(1);
  seqs_[1].sampling.logprobs = 1;
  Sample(1, 40);
  result_.sampled[0].top_logprobs = {{.token_id = kVocab, .logprob = -0.5f}};
  ExpectRefused("top logprob");
}

TEST_F(StepCheckTest, RefusesAStopTokenBeforeMinTokens) {
  Decode(1);
  seqs_[1].stop_token_ids = {2};
  seqs_[1].sampling.min_tokens = 3;  // 2 output tokens so far: this is the third
  Sample(1, 2);
  ExpectRefused("stop token 2 for sequence 1 after 2 of its min_tokens 3");
}

TEST_F(StepCheckTest, RefusesASampleAfterADraftTokenThatDidNotMatch) {
  Decode(1, {10, 11});
  Sample(1, 99);  // differs from draft token 0: the worker must stop here
  Sample(1, 11);
  ExpectRefused("a sample after draft token 0 of sequence 1, which did not match");
}

TEST_F(StepCheckTest, RefusesTooManySamplesForADraft) {
  Decode(1, {10, 11});
  Sample(1, 10);
  Sample(1, 11);
  Sample(1, 12);
  Sample(1, 13);  // past the draft and the token after it
  ExpectRefused("1 unrequested samples");
}

TEST_F(StepCheckTest, RefusesTooManySamplesForADraftBeforeAnotherSequence) {
  Decode(1, {10});
  Decode(2);
  Sample(1, 10);
  Sample(1, 11);
  Sample(1, 12);  // one more for sequence 1, where sequence 2's belongs
  Sample(2, 40);
  ExpectRefused("no sample for sequence 2");
}

TEST_F(StepCheckTest, RefusesAMissingSampleAfterAKeptDraftToken) {
  Decode(1, {10, 11});
  Sample(1, 10);  // kept: the next one must follow
  ExpectRefused("no sample after draft token 0 of sequence 1, which matched");
}

TEST_F(StepCheckTest, ChecksAnAbortedSequenceForShapeOnly) {
  Decode(1);
  seqs_.erase(1);  // aborted while the step ran: its limits are gone, the shape is not
  Sample(1, 40);
  result_.sampled[0].top_logprobs = {{.token_id = 3, .logprob = -1.0f}};
  EXPECT_EQ(Check().code(), absl::StatusCode::kInternal);  // it asked for no alternatives
  result_.sampled[0].top_logprobs.clear();
  EXPECT_TRUE(Check().ok()) << Check();
  result_.sampled[0].token_id = kVocab;
  ExpectRefused("outside the vocabulary");
}

class StepCheckPromptTest : public StepCheckTest {
 protected:
  // Sequence 1's prompt of 6 tokens, its chunk [0, 4) asking for 2 alternatives per position.
  void SetUp() override {
    Sequence& seq = seqs_[1];
    seq.id = 1;
    seq.num_prompt_tokens = 6;
    seq.tokens = {1, 2, 3, 4, 5, 6};
    seq.sampling.prompt_logprobs = 2;
    command_.scheduled.push_back({.seq_id = 1,
                                  .token_ids = {1, 2, 3, 4},
                                  .num_computed_tokens = 0,
                                  .new_block_ids = {},
                                  .prompt_logprobs = true});
    PromptLogprobs& p = result_.prompt_logprobs.emplace_back();
    p.seq_id = 1;
    p.first_position = 1;
    for (int i = 0; i < 4; ++i) {
      p.logprobs.push_back(-1.0f);
      p.ranks.push_back(1 + i);
      p.top.push_back({.token_id = 7, .logprob = -0.5f});
      p.top.push_back({.token_id = 8, .logprob = -1.0f});
    }
  }
  PromptLogprobs& prompt() { return result_.prompt_logprobs[0]; }
};

TEST_F(StepCheckPromptTest, AcceptsOneRowPerPosition) { EXPECT_TRUE(Check().ok()) << Check(); }

TEST_F(StepCheckPromptTest, RefusesMissingPromptLogprobs) {
  result_.prompt_logprobs.clear();
  ExpectRefused("no prompt logprobs for sequence 1");
}

TEST_F(StepCheckPromptTest, RefusesTheWrongNumberOfRows) {
  prompt().logprobs.pop_back();
  ExpectRefused("wrong shape");
}

TEST_F(StepCheckPromptTest, RefusesTheWrongNumberOfAlternatives) {
  prompt().top.pop_back();
  ExpectRefused("wrong shape");
}

TEST_F(StepCheckPromptTest, RefusesRowsFromAnotherPosition) {
  prompt().first_position = 2;
  ExpectRefused("wrong shape");
}

TEST_F(StepCheckPromptTest, RefusesARankOutsideTheVocabulary) {
  for (int rank : {0, kVocab + 1}) {
    prompt().ranks[2] = rank;
    ExpectRefused("prompt logprob");
  }
}

TEST_F(StepCheckPromptTest, RefusesAnAlternativeOutsideTheVocabulary) {
  prompt().top[3].token_id = -1;
  ExpectRefused("prompt top logprob");
}

TEST_F(StepCheckPromptTest, RefusesUnrequestedPromptLogprobs) {
  command_.scheduled[0].prompt_logprobs = false;
  ExpectRefused("unrequested prompt logprobs");
}

class StepCheckEmbeddingTest : public StepCheckTest {
 protected:
  // Sequence 1 embeds its 3-token prompt, all of it in this step.
  void SetUp() override {
    Sequence& seq = seqs_[1];
    seq.id = 1;
    seq.num_prompt_tokens = 3;
    seq.tokens = {1, 2, 3};
    seq.pooling = Pooling::kMean;
    command_.scheduled.push_back(
        {.seq_id = 1, .token_ids = {1, 2, 3}, .num_computed_tokens = 0, .new_block_ids = {}});
    result_.embeddings.push_back({.seq_id = 1, .values = {0.5f, 0.5f, 0.5f, 0.5f}});
  }
};

TEST_F(StepCheckEmbeddingTest, AcceptsTheModelsWidth) { EXPECT_TRUE(Check().ok()) << Check(); }

TEST_F(StepCheckEmbeddingTest, RefusesAMissingEmbedding) {
  result_.embeddings.clear();
  ExpectRefused("no embedding for sequence 1");
}

TEST_F(StepCheckEmbeddingTest, RefusesAnotherWidthOrValuesThatAreNotFinite) {
  result_.embeddings[0].values.push_back(0.0f);
  ExpectRefused("an embedding of 5 values");
  result_.embeddings[0].values = {0.5f, std::nanf(""), 0.5f, 0.5f};
  ExpectRefused("not finite");
}

TEST_F(StepCheckEmbeddingTest, RefusesAnEmbeddingOfASequenceNotInTheStep) {
  command_.scheduled[0].token_ids = {1, 2};  // the prompt's last token is the next step's
  result_.embeddings[0].seq_id = 5;
  ExpectRefused("unrequested prompt logprobs or embeddings");
}

}  // namespace
}  // namespace pagoda
