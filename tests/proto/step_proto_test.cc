#include "proto/step_proto.h"

#include "gtest/gtest.h"

namespace pagoda {
namespace {

TEST(StepProtoTest, CommandSurvivesTheWire) {
  StepCommand c;
  c.step_id = 42;
  c.finished_ids = {3, 9};
  NewSequence& n = c.new_sequences.emplace_back();
  n.seq_id = 7;
  n.seq_index = 2;
  n.sampling.temperature = 0.5f;
  n.sampling.top_k = 40;
  n.sampling.seed = 1234567890123ULL;
  n.sampling.logprobs = 3;
  n.prompt_ids = {1, 2, 3};
  n.output_ids = {4};
  n.sampling.min_tokens = 5;
  n.sampling.logit_bias = {{3, -100.0f}, {17, 2.5f}};
  n.stop_ids = {2, 30};
  c.block_copies.push_back({5, 6});
  ScheduledSequence& s = c.scheduled.emplace_back();
  s.seq_id = 7;
  s.token_ids = {2, 3, 4};
  s.num_computed_tokens = 1;
  s.num_kept_blocks = 0;
  s.new_block_ids = {11, 12};
  s.sample = true;
  s.num_draft_tokens = 2;

  v1::StepCommand wire;
  ToProto(c, &wire);
  v1::StepCommand parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const StepCommand back = FromProto(parsed);
  EXPECT_EQ(back.step_id, 42);
  EXPECT_EQ(back.finished_ids, c.finished_ids);
  ASSERT_EQ(back.new_sequences.size(), 1u);
  EXPECT_EQ(back.new_sequences[0].seq_index, 2);
  EXPECT_EQ(back.new_sequences[0].sampling.temperature, 0.5f);
  EXPECT_EQ(back.new_sequences[0].sampling.top_k, 40);
  EXPECT_EQ(back.new_sequences[0].sampling.seed, 1234567890123ULL);
  EXPECT_EQ(back.new_sequences[0].sampling.logprobs, 3);
  EXPECT_EQ(back.new_sequences[0].prompt_ids, n.prompt_ids);
  EXPECT_EQ(back.new_sequences[0].output_ids, n.output_ids);
  EXPECT_EQ(back.new_sequences[0].sampling.min_tokens, 5);
  ASSERT_EQ(back.new_sequences[0].sampling.logit_bias.size(), 2u);
  EXPECT_EQ(back.new_sequences[0].sampling.logit_bias[1].token_id, 17);
  EXPECT_EQ(back.new_sequences[0].sampling.logit_bias[1].bias, 2.5f);
  EXPECT_EQ(back.new_sequences[0].stop_ids, n.stop_ids);
  ASSERT_EQ(back.block_copies.size(), 1u);
  EXPECT_EQ(back.block_copies[0].dst, 6);
  ASSERT_EQ(back.scheduled.size(), 1u);
  EXPECT_EQ(back.scheduled[0].token_ids, s.token_ids);
  EXPECT_EQ(back.scheduled[0].new_block_ids, s.new_block_ids);
  EXPECT_EQ(back.scheduled[0].num_computed_tokens, 1);
  EXPECT_TRUE(back.scheduled[0].sample);
  EXPECT_EQ(back.scheduled[0].num_draft_tokens, 2);
  EXPECT_FALSE(back.scheduled[0].constrained);
}

TEST(StepProtoTest, AllowedTokensSurviveTheWireInBothForms) {
  StepCommand c;
  c.scheduled.resize(2);
  ScheduledSequence& ids = c.scheduled[0];
  ids.constrained = true;
  ids.allowed_ids = {3, 70, 511};
  ScheduledSequence& mask = c.scheduled[1];
  mask.constrained = true;
  mask.allowed_mask = {0x8000000000000001ULL, 0, 42};
  v1::StepCommand wire;
  ToProto(c, &wire);
  v1::StepCommand parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  StepCommand back = FromProto(parsed);
  ASSERT_EQ(back.scheduled.size(), 2u);
  EXPECT_TRUE(back.scheduled[0].constrained);
  EXPECT_EQ(back.scheduled[0].allowed_ids, ids.allowed_ids);
  EXPECT_TRUE(back.scheduled[0].allowed_mask.empty());
  EXPECT_EQ(back.scheduled[1].allowed_mask, mask.allowed_mask);
  // Bytes that are not whole words never come out as a mask of the right size.
  parsed.mutable_scheduled(1)->set_allowed_mask(std::string(20, '\xff'));
  back = FromProto(parsed);
  EXPECT_NE(back.scheduled[1].allowed_mask.size(), 3u);
  EXPECT_NE(back.scheduled[1].allowed_mask.size(), 2u);
}

TEST(StepProtoTest, ResultAndHelloSurviveTheWire) {
  StepResult r;
  r.step_id = 5;
  SampledToken& t = r.sampled.emplace_back();
  t.seq_id = 8;
  t.token_id = 99;
  t.logprob = -0.25f;
  t.top_logprobs = {{99, -0.25f}, {3, -2.0f}};
  v1::StepResult wire;
  ToProto(r, &wire);
  const StepResult back = FromProto(wire);
  ASSERT_EQ(back.sampled.size(), 1u);
  EXPECT_EQ(back.sampled[0].token_id, 99);
  ASSERT_EQ(back.sampled[0].top_logprobs.size(), 2u);
  EXPECT_EQ(back.sampled[0].top_logprobs[1].token_id, 3);

  WorkerInfo info{"fp", 100, 16, 2048, 256, "bf16"};
  v1::Hello hello;
  ToProto(info, &hello);
  const WorkerInfo info_back = FromProto(hello);
  EXPECT_EQ(info_back.model_fingerprint, "fp");
  EXPECT_EQ(info_back.num_blocks, 100);
  EXPECT_EQ(info_back.max_num_seqs, 256);
  EXPECT_EQ(info_back.kv_cache_dtype, "bf16");
}

TEST(StepProtoTest, PullsTransfersAndTheTransferAddressSurviveTheWire) {
  StepCommand c;
  c.pulls.push_back({.transfer_id = 77,
                     .peer_address = "10.0.0.7:50061",
                     .src_block_ids = {4, 5, 9},
                     .dst_block_ids = {0, 1, 2}});
  c.await_transfers = true;
  v1::StepCommand wire;
  ToProto(c, &wire);
  v1::StepCommand parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  const StepCommand back = FromProto(parsed);
  ASSERT_EQ(back.pulls.size(), 1u);
  EXPECT_EQ(back.pulls[0].transfer_id, 77);
  EXPECT_EQ(back.pulls[0].peer_address, "10.0.0.7:50061");
  EXPECT_EQ(back.pulls[0].src_block_ids, c.pulls[0].src_block_ids);
  EXPECT_EQ(back.pulls[0].dst_block_ids, c.pulls[0].dst_block_ids);
  EXPECT_TRUE(back.await_transfers);

  StepResult r;
  r.transfers.push_back(
      {.transfer_id = 77, .ok = false, .error = "cut", .bytes = 12, .seconds = 0.5});
  v1::StepResult result_wire;
  ToProto(r, &result_wire);
  const StepResult result_back = FromProto(result_wire);
  ASSERT_EQ(result_back.transfers.size(), 1u);
  EXPECT_EQ(result_back.transfers[0].transfer_id, 77);
  EXPECT_FALSE(result_back.transfers[0].ok);
  EXPECT_EQ(result_back.transfers[0].error, "cut");
  EXPECT_EQ(result_back.transfers[0].bytes, 12);
  EXPECT_EQ(result_back.transfers[0].seconds, 0.5);

  WorkerInfo info;
  info.kv_transfer_address = "10.0.0.8:50061";
  v1::Hello hello;
  ToProto(info, &hello);
  EXPECT_EQ(FromProto(hello).kv_transfer_address, "10.0.0.8:50061");
}

TEST(StepProtoTest, AdaptersSurviveTheWire) {
  StepCommand c;
  c.new_sequences.resize(2);
  c.new_sequences[0].adapter = "sql-lora";
  v1::StepCommand wire;
  ToProto(c, &wire);
  const StepCommand back = FromProto(wire);
  ASSERT_EQ(back.new_sequences.size(), 2u);
  EXPECT_EQ(back.new_sequences[0].adapter, "sql-lora");
  EXPECT_EQ(back.new_sequences[1].adapter, "");

  WorkerInfo info;
  info.adapters = {{"sql-lora", 16, "00ff"}, {"chat", 8, "abcd"}};
  info.max_loras = 4;
  info.max_cpu_loras = 8;
  v1::Hello hello;
  ToProto(info, &hello);
  const WorkerInfo info_back = FromProto(hello);
  ASSERT_EQ(info_back.adapters.size(), 2u);
  EXPECT_EQ(info_back.adapters[1].name, "chat");
  EXPECT_EQ(info_back.adapters[1].rank, 8);
  EXPECT_EQ(info_back.adapters[0].digest, "00ff");
  EXPECT_EQ(info_back.max_loras, 4);
  EXPECT_EQ(info_back.max_cpu_loras, 8);
}

}  // namespace
}  // namespace pagoda
