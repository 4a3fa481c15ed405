#include "worker/worker_engine.h"

#include <functional>
#include <numeric>

#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

TEST(WorkerEngineTest, ASixteenBitPoolHoldsTwiceTheBlocksInTheSameBytes) {
  int num_blocks[4] = {};
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16, KvDtype::kInt8}) {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    WorkerOptions options;
    options.kv_cache_bytes = 100 * KvPool::BytesPerBlock(w->config, options.block_size);  // f32
    options.kv_cache_dtype = dtype;
    options.max_num_batched_tokens = 16;
    options.max_num_seqs = 4;
    auto engine = WorkerEngine::Create(*std::move(w), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    num_blocks[static_cast<int>(dtype)] = (*engine)->info().num_blocks;
    EXPECT_EQ((*engine)->info().kv_cache_dtype, KvDtypeName(dtype));  // what Hello announces
  }
  EXPECT_EQ(num_blocks[0], 100);
  EXPECT_EQ(num_blocks[1], 200);
  EXPECT_EQ(num_blocks[2], 200);
  // int8: head_dim 8 bytes and a 2-byte scale per row against f32's 32 bytes.
  EXPECT_EQ(num_blocks[3], 320);
}

// A step comes off the wire: a bad sampling field or stop id is refused, never a crash, and
// leaves the worker as it was.
TEST(WorkerEngineTest, ABadNewSequenceIsRefusedAndChangesNothing) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  const int vocab = w->config.vocab_size;
  WorkerOptions options;
  options.num_blocks = 8;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 4;
  auto engine = WorkerEngine::Create(*std::move(w), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto step = [](const std::function<void(NewSequence&)>& spoil) {
    StepCommand c;
    c.step_id = 1;
    NewSequence& n = c.new_sequences.emplace_back();
    n.seq_id = 1;
    n.prompt_ids = {1, 5, 6};
    n.sampling.temperature = 0;
    n.sampling.min_tokens = 2;
    n.stop_ids = {1, 2};
    n.sampling.logit_bias = {{3, -5.0f}};
    spoil(n);
    c.scheduled.push_back({.seq_id = 1,
                           .token_ids = n.prompt_ids,
                           .num_kept_blocks = 0,
                           .new_block_ids = {0},
                           .sample = true});
    return c;
  };
  const std::vector<std::function<void(NewSequence&)>> spoils = {
      [&](NewSequence& n) { n.stop_ids = {vocab}; },
      [](NewSequence& n) { n.stop_ids = {-1}; },
      [&](NewSequence& n) { n.stop_ids.assign(vocab, 1); },
      [](NewSequence& n) { n.stop_ids.assign(kMaxStopIdsPerSequence + 1, 1); },
      [](NewSequence& n) { n.sampling.min_tokens = -1; },
      [&](NewSequence& n) {
        n.sampling.logit_bias = {{vocab, 1.0f}};
      },
      [](NewSequence& n) {
        n.sampling.logit_bias = {{-1, 1.0f}};
      },
      [](NewSequence& n) {
        n.sampling.logit_bias = {{3, 1000.0f}};
      },
      [](NewSequence& n) {
        n.sampling.logit_bias = {{4, 1.0f}, {3, 1.0f}};
      },
  };
  for (const auto& spoil : spoils) {
    const absl::StatusOr<StepResult> r = (*engine)->Execute(step(spoil));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  const absl::StatusOr<StepResult> good = (*engine)->Execute(step([](NewSequence&) {}));
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->sampled.size(), 1u);
  EXPECT_NE(good->sampled[0].token_id, 1);
  EXPECT_NE(good->sampled[0].token_id, 2);
}

// Prompt log probabilities and embeddings come off the wire too: a chunk that asks for what its
// sequence did not, an embedding that samples, skips rows of its mean or runs past its prompt,
// an unknown pooling, or more logit rows than the buffer holds are refused, never a crash.
TEST(WorkerEngineTest, ABadPrefillOutputRequestIsRefused) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  WorkerOptions options;
  options.num_blocks = 8;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 4;
  auto engine = WorkerEngine::Create(*std::move(w), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto step = [](const std::function<void(NewSequence&, ScheduledSequence&)>& spoil) {
    StepCommand c;
    c.step_id = 1;
    NewSequence& n = c.new_sequences.emplace_back();
    n.seq_id = 1;
    n.prompt_ids = {1, 5, 6};
    n.sampling.prompt_logprobs = 2;
    ScheduledSequence& s = c.scheduled.emplace_back();
    s.seq_id = 1;
    s.token_ids = n.prompt_ids;
    s.new_block_ids = {0};
    s.sample = true;
    s.prompt_logprobs = true;
    spoil(n, s);
    return c;
  };
  const std::vector<std::function<void(NewSequence&, ScheduledSequence&)>> spoils = {
      [](NewSequence& n, ScheduledSequence&) { n.sampling.prompt_logprobs = -1; },
      [](NewSequence& n, ScheduledSequence&) { n.sampling.prompt_logprobs = 21; },
      [](NewSequence& n, ScheduledSequence&) { n.pooling = static_cast<Pooling>(-1); },
      [](NewSequence& n, ScheduledSequence&) { n.pooling = Pooling::kLast; },  // samples
      [](NewSequence& n, ScheduledSequence& s) {
        n.pooling = Pooling::kMean;
        n.sampling.prompt_logprobs = -1;
        s.sample = s.prompt_logprobs = false;
        s.num_computed_tokens = 1;  // its mean would miss row 0
        s.token_ids = {5, 6};
      },
      [](NewSequence& n, ScheduledSequence& s) {
        n.pooling = Pooling::kLast;
        s.sample = false;
        s.prompt_logprobs = false;
        s.token_ids = {1, 5, 6, 7};  // past its prompt
      },
      [](NewSequence& n, ScheduledSequence& s) {  // 8 rows of logits; the buffer holds 4
        n.prompt_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        s.token_ids = n.prompt_ids;
      },
  };
  for (const auto& spoil : spoils) {
    const absl::StatusOr<StepResult> r = (*engine)->Execute(step(spoil));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ((*engine)->num_sequences(), 0);
  }
  const absl::StatusOr<StepResult> good =
      (*engine)->Execute(step([](NewSequence&, ScheduledSequence&) {}));
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->prompt_logprobs.size(), 1u);
  EXPECT_EQ(good->prompt_logprobs[0].first_position, 1);
  EXPECT_EQ(good->prompt_logprobs[0].logprobs.size(), 2u);
  EXPECT_EQ(good->prompt_logprobs[0].top.size(), 4u);
  EXPECT_EQ(good->sampled.size(), 1u);
}

// A constrained sample's allowed set comes off the wire too: a wrong size, an id out of range
// or out of order, both forms or none, or a set with no token is refused; a good one is obeyed
// (ids and bitmask alike), with greedy and sampled decoding.
TEST(WorkerEngineTest, AllowedTokensAreValidatedAndObeyed) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok()) << w.status();
  const int vocab = w->config.vocab_size;
  const size_t words = (vocab + 63) / 64;
  WorkerOptions options;
  options.num_blocks = 8;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 4;
  auto engine = WorkerEngine::Create(*std::move(w), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  int64_t next_seq = 1;
  auto step = [&](const std::function<void(ScheduledSequence&)>& set, float temperature) {
    StepCommand c;
    c.step_id = next_seq;
    NewSequence& n = c.new_sequences.emplace_back();
    n.seq_id = next_seq;
    n.prompt_ids = {1, 5, 6};
    n.sampling.temperature = temperature;
    n.sampling.seed = 9;
    ScheduledSequence& s = c.scheduled.emplace_back();
    s.seq_id = next_seq;
    s.token_ids = n.prompt_ids;
    s.new_block_ids = {0};
    s.sample = true;
    s.constrained = true;
    set(s);
    return c;
  };
  const std::vector<std::function<void(ScheduledSequence&)>> spoils = {
      [](ScheduledSequence&) {},  // neither form
      [](ScheduledSequence& s) {
        s.allowed_ids = {3, 3};
      },
      [](ScheduledSequence& s) {
        s.allowed_ids = {5, 3};
      },
      [&](ScheduledSequence& s) { s.allowed_ids = {vocab}; },
      [](ScheduledSequence& s) { s.allowed_ids = {-1}; },
      [&](ScheduledSequence& s) { s.allowed_mask.assign(words - 1, ~uint64_t{0}); },
      [&](ScheduledSequence& s) { s.allowed_mask.assign(words + 1, 1); },
      [&](ScheduledSequence& s) { s.allowed_mask.assign(words, 0); },
      [&](ScheduledSequence& s) {
        s.allowed_mask.assign(words, 1);
        s.allowed_ids = {3};
      },
      [](ScheduledSequence& s) {
        s.allowed_ids = {3};
        s.sample = false;
      },
  };
  for (const auto& spoil : spoils) {
    const absl::StatusOr<StepResult> r = (*engine)->Execute(step(spoil, 0));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  }
  if (vocab % 64 != 0) {
    auto past_the_end = [&](ScheduledSequence& s) {
      s.allowed_mask.assign(words, 0);
      s.allowed_mask.back() = uint64_t{1} << (vocab % 64);
    };
    EXPECT_FALSE((*engine)->Execute(step(past_the_end, 0)).ok());
  }
  for (float temperature : {0.0f, 1.0f}) {
    auto ids = (*engine)->Execute(step(
        [](ScheduledSequence& s) {
          s.allowed_ids = {7, 300};
        },
        temperature));
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_TRUE(ids->sampled[0].token_id == 7 || ids->sampled[0].token_id == 300);
    ++next_seq;
    auto mask = (*engine)->Execute(step(
        [&](ScheduledSequence& s) {
          s.allowed_mask.assign(words, 0);
          s.allowed_mask[1] = uint64_t{1} << 3;  // token 67
        },
        temperature));
    ASSERT_TRUE(mask.ok()) << mask.status();
    EXPECT_EQ(mask->sampled[0].token_id, 67);
    ++next_seq;
  }
}

// --kv-cache-dir: a block the router hands another sequence is written out before the step
// overwrites it, and the next worker on the directory loads it and offers it in its Hello.
TEST(WorkerEngineTest, ABlockTheRouterReusesIsKeptOnDiskForTheNextWorker) {
  const std::string dir = testing::TempDir() + "/kv";
  auto make = [&] {
    absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    CHECK(w.ok()) << w.status();
    WorkerOptions options;
    options.num_blocks = 8;
    options.max_num_batched_tokens = 64;
    options.max_num_seqs = 4;
    std::unique_ptr<WorkerEngine> engine = *WorkerEngine::Create(*std::move(w), options);
    KvDiskCacheOptions disk;
    disk.dir = dir;
    const absl::Status enabled = engine->EnableDiskCache(disk);
    CHECK(enabled.ok()) << enabled;
    return engine;
  };
  std::vector<int> prompt(20), other(16);
  std::iota(prompt.begin(), prompt.end(), 5);
  std::iota(other.begin(), other.end(), 100);
  auto prefill = [](int64_t step, int64_t seq, const std::vector<int>& tokens, int from,
                    std::vector<int> blocks, std::vector<int64_t> finished) {
    StepCommand c;
    c.step_id = step;
    c.finished_ids = std::move(finished);
    NewSequence& n = c.new_sequences.emplace_back();
    n.seq_id = seq;
    n.prompt_ids = tokens;
    n.sampling.temperature = 0;
    c.scheduled.push_back({.seq_id = seq,
                           .token_ids = std::vector<int>(tokens.begin() + from, tokens.end()),
                           .num_computed_tokens = from,
                           .num_kept_blocks = 0,
                           .new_block_ids = std::move(blocks)});
    return c;
  };
  {
    std::unique_ptr<WorkerEngine> engine = make();
    ASSERT_TRUE(engine->Execute(prefill(1, 1, prompt, 0, {3, 4}, {})).ok());
    // A prefix hit on block 3 (its 16 tokens computed): it keeps what it holds.
    ASSERT_TRUE(engine->Execute(prefill(2, 2, prompt, 16, {3, 5}, {1})).ok());
    // Block 3 handed to other tokens: written out first.
    ASSERT_TRUE(engine->Execute(prefill(3, 3, other, 0, {3}, {2})).ok());
  }  // the writer finishes its queue
  std::unique_ptr<WorkerEngine> engine = make();
  EXPECT_EQ(engine->disk_cache()->store().num_files(), 1);
  const std::vector<CachedBlock> offered = engine->CachedBlocks(100);
  ASSERT_EQ(offered.size(), 1u);
  EXPECT_EQ(offered[0].tokens, std::vector<int>(prompt.begin(), prompt.begin() + 16));
}

}  // namespace
}  // namespace pagoda
