// StepRecord: what a step sent, sequence by sequence, and the worker's answer read back in that
// order; and the rules that turn a sequence's answer into its update (sequence_update.h).
#include "router/core/step_record.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/core/sequence_update.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

SampledToken Sampled(int64_t seq_id, int token_id) {
  SampledToken t;
  t.seq_id = seq_id;
  t.token_id = token_id;
  return t;
}

PromptLogprobs Chunk(int first_position, std::vector<float> logprobs, std::vector<int> ranks) {
  PromptLogprobs chunk;
  chunk.first_position = first_position;
  chunk.logprobs = std::move(logprobs);
  chunk.ranks = std::move(ranks);
  return chunk;
}

Sequence MakeSequence(int64_t id, std::vector<int> prompt) {
  Sequence s;
  s.id = id;
  s.request_id = 100 + id;
  s.num_prompt_tokens = static_cast<int>(prompt.size());
  s.tokens = std::move(prompt);
  s.max_tokens = 8;
  s.max_total_tokens = 64;
  return s;
}

TEST(StepRecordTest, EmitSendsANewSequenceOnceAndOnlyTheBlocksTheWorkerLacks) {
  StepRecord record;
  Sequence seq = MakeSequence(1, {5, 6, 7, 8, 9});
  StepCommand first;
  record.Emit(&seq, 4, 0, {10, 11}, &first);
  ASSERT_EQ(first.new_sequences.size(), 1u);
  EXPECT_THAT(first.new_sequences[0].prompt_ids, ElementsAre(5, 6, 7, 8, 9));
  ASSERT_EQ(first.scheduled.size(), 1u);
  EXPECT_THAT(first.scheduled[0].token_ids, ElementsAre(5, 6, 7, 8));
  EXPECT_THAT(first.scheduled[0].new_block_ids, ElementsAre(10, 11));
  EXPECT_FALSE(first.scheduled[0].sample);  // one prompt token still to go

  record.Clear();
  seq.num_computed_tokens = 4;
  StepCommand second;
  record.Emit(&seq, 1, 2, {10, 11, 12}, &second);  // the worker keeps blocks 10 and 11
  EXPECT_THAT(second.new_sequences, IsEmpty());
  EXPECT_EQ(second.scheduled[0].num_kept_blocks, 2);
  EXPECT_THAT(second.scheduled[0].new_block_ids, ElementsAre(12));
  EXPECT_TRUE(second.scheduled[0].sample);
  ASSERT_EQ(record.entries().size(), 1u);
  EXPECT_TRUE(record.entries()[0].sample);
}

TEST(StepRecordTest, ReaderSkipsTheReportsOfSequencesAbortedMeanwhile) {
  StepRecord record;
  Sequence a = MakeSequence(1, {1, 2}), b = MakeSequence(2, {3, 4}), c = MakeSequence(3, {5, 6});
  StepCommand cmd;
  for (Sequence* s : {&a, &b, &c}) record.Emit(s, 2, 0, {0}, &cmd);
  record.Forget(&b);  // aborted after the step was sent: its sample still comes back
  StepResult result;
  result.sampled = {Sampled(1, 7), Sampled(2, 8), Sampled(3, 9)};
  StepRecord::Reader reader(result);
  ASSERT_EQ(record.entries().size(), 2u);
  EXPECT_EQ(reader.SamplesOf(record.entries()[0])[0].token_id, 7);
  EXPECT_EQ(reader.SamplesOf(record.entries()[1])[0].token_id, 9);
}

TEST(StepRecordTest, ReaderGivesADraftItsKeptTokensAndTheOneAfter) {
  StepRecord record;
  Sequence a = MakeSequence(1, {1, 2}), b = MakeSequence(2, {3, 4});
  StepCommand cmd;
  record.Emit(&a, 2, 0, {0}, &cmd);
  record.Emit(&b, 2, 0, {1}, &cmd);
  record.entries()[0].num_draft = 3;
  StepResult result;  // a kept 2 of its 3 draft tokens: 3 samples, then b's
  result.sampled = {Sampled(1, 7), Sampled(1, 8), Sampled(1, 9), Sampled(2, 4)};
  StepRecord::Reader reader(result);
  EXPECT_EQ(reader.SamplesOf(record.entries()[0]).size(), 3u);
  const auto samples_b = reader.SamplesOf(record.entries()[1]);
  ASSERT_EQ(samples_b.size(), 1u);
  EXPECT_EQ(samples_b[0].token_id, 4);
}

TEST(SequenceUpdateTest, AppendSampledStopsAtTheFirstTokenThatEndsAndDropsTheRest) {
  Sequence seq = MakeSequence(1, {1, 2});
  seq.stop_token_ids = {2};
  const std::vector<SampledToken> samples = {Sampled(1, 9), Sampled(1, 2), Sampled(1, 7)};
  SequenceUpdate u;
  EXPECT_EQ(AppendSampled(samples, &seq, &u), FinishReason::kStop);
  EXPECT_THAT(u.token_ids, ElementsAre(9, 2));
  EXPECT_THAT(seq.tokens, ElementsAre(1, 2, 9, 2));
}

TEST(SequenceUpdateTest, AppendSampledEndsAtMaxTokensAndKeepsNothingForAPromptOnlyRequest) {
  Sequence seq = MakeSequence(1, {1, 2});
  seq.max_tokens = 1;
  const std::vector<SampledToken> samples = {Sampled(1, 9), Sampled(1, 8)};
  SequenceUpdate u;
  EXPECT_EQ(AppendSampled(samples, &seq, &u), FinishReason::kLength);
  EXPECT_THAT(u.token_ids, ElementsAre(9));

  Sequence prompt_only = MakeSequence(2, {1, 2});
  prompt_only.max_tokens = 0;
  SequenceUpdate v;
  EXPECT_EQ(AppendSampled(samples, &prompt_only, &v), FinishReason::kLength);
  EXPECT_THAT(v.token_ids, IsEmpty());
  EXPECT_THAT(prompt_only.tokens, ElementsAre(1, 2));
}

TEST(SequenceUpdateTest, GatherPromptLogprobsSkipsWhatARecomputedChunkBringsAgain) {
  Sequence seq = MakeSequence(1, {1, 2, 3, 4, 5});
  GatherPromptLogprobs(Chunk(1, {-1, -2}, {1, 2}), &seq);
  // A recompute (after a preemption) brings positions 1..3 again: only 3 is new.
  GatherPromptLogprobs(Chunk(1, {-1, -2, -3}, {1, 2, 3}), &seq);
  EXPECT_THAT(seq.prompt_logprobs.logprobs, ElementsAre(-1, -2, -3));
  EXPECT_THAT(seq.prompt_logprobs.ranks, ElementsAre(1, 2, 3));
}

}  // namespace
}  // namespace pagoda
