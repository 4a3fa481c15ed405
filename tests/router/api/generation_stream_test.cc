// The request layer over an in-process Cluster: chunk order, the one pause/resume rule, abort
// and the error paths every API shares.
#include "router/api/generation_stream.h"

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/text/llama2c_tokenizer.h"
#include "tests/router/core/test_workers.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// What a client read of a stream, by chunk index.
struct Read {
  std::map<int, std::vector<int>> tokens;
  std::map<int, std::string> text;
  std::map<int, FinishReason> finish_reason;
  bool done = false;
  absl::Status error;
  bool chunk_after_finish = false;
};

class GenerationStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = testing::LoadGoldenCases();
    auto w = LoadLlama2cCheckpoint(testing::Stories260KModel());
    ASSERT_TRUE(w.ok()) << w.status();
    config_ = w->config;
    auto t = Llama2cTokenizer::Load(testing::Stories260KTokenizer());
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
    ClusterOptions o;
    o.engine.max_model_len = 257;
    cluster_ = std::make_unique<Cluster>(config_, o);
  }

  void AddWorker(int num_blocks = 256) {
    ASSERT_TRUE(cluster_->AddWorker(testing::NewWorker(num_blocks)).ok());
  }

  std::unique_ptr<GenerationStream> NewStream(std::function<void()> on_output = nullptr) {
    return std::make_unique<GenerationStream>(cluster_.get(), tokenizer_.get(), nullptr,
                                              std::move(on_output));
  }

  GenerationRequest Greedy(int golden_case) {
    GenerationRequest r;
    r.prompt_ids = golden_[golden_case].prompt_ids;
    r.sampling.temperature = 0;
    return r;
  }

  // A request that runs to max_tokens: n sampled sequences.
  GenerationRequest Long(int n, int max_tokens) {
    GenerationRequest r = Greedy(0);
    r.sampling.temperature = 1;
    r.sampling.seed = 7;
    r.n = n;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
  }

  // Takes and sends until the stream ends (or two minutes pass).
  static void ReadToEnd(GenerationStream& stream, Read* read) {
    const absl::Time give_up = absl::Now() + absl::Minutes(2);
    while (!read->done && absl::Now() < give_up) {
      GenerationStream::Taken taken = stream.Take(absl::Seconds(1));
      for (const OutputChunk& c : taken.chunks) {
        if (read->finish_reason.contains(c.index)) read->chunk_after_finish = true;
        read->tokens[c.index].insert(read->tokens[c.index].end(), c.token_ids.begin(),
                                     c.token_ids.end());
        read->text[c.index] += c.text;
        if (c.finished) read->finish_reason[c.index] = c.finish_reason;
      }
      stream.Sent(taken.num_tokens());
      read->done = taken.done;
      read->error = taken.error;
    }
  }

  // Waits for the stream's first chunk (its request runs); false if it ended without one.
  static bool HasOutput(GenerationStream& stream) {
    GenerationStream::Taken taken;
    const absl::Time give_up = absl::Now() + absl::Minutes(2);
    while (taken.chunks.empty() && !taken.done && absl::Now() < give_up) {
      taken = stream.Take(absl::Seconds(1));
    }
    return !taken.chunks.empty();
  }

  static int NumTokens(const Read& read) {
    int n = 0;
    for (const auto& [index, tokens] : read.tokens) n += static_cast<int>(tokens.size());
    return n;
  }

  std::vector<testing::GoldenCase> golden_;
  ModelConfig config_;
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(GenerationStreamTest, EachSequencesChunksComeInOrderThenItsEnd) {
  AddWorker();
  std::unique_ptr<GenerationStream> stream = NewStream();
  GenerationRequest twice = Greedy(1);
  twice.n = 2;
  ASSERT_TRUE(stream->Submit({Greedy(0), twice}, {}, absl::InfiniteFuture()).ok());
  Read read;
  ReadToEnd(*stream, &read);
  ASSERT_TRUE(read.done);
  ASSERT_TRUE(read.error.ok()) << read.error;
  EXPECT_FALSE(read.chunk_after_finish);
  // Request i's sequence j is index i * n + j: request 0 is index 0, request 1 indices 1, 2.
  EXPECT_EQ(read.tokens[0], golden_[0].greedy_ids);
  EXPECT_EQ(read.tokens[1], golden_[1].greedy_ids);
  EXPECT_EQ(read.tokens[2], golden_[1].greedy_ids);
  EXPECT_TRUE(golden_[0].stdout_text.starts_with(golden_[0].prompt + read.text[0])) << read.text[0];
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(read.finish_reason.contains(i)) << i;
    EXPECT_NE(read.finish_reason[i], FinishReason::kNone);
    EXPECT_NE(read.finish_reason[i], FinishReason::kAbort);
  }
}

TEST_F(GenerationStreamTest, AClientThatDoesNotReadIsPausedUntilFewerThanAQuarterIsUnsent) {
  AddWorker();
  constexpr int kN = 4, kMaxTokens = 100;  // 400 tokens: more than kMaxUnsentTokens
  // What the sequences are when read at once.
  Read eager;
  {
    std::unique_ptr<GenerationStream> stream = NewStream();
    ASSERT_TRUE(stream->Submit({Long(kN, kMaxTokens)}, {}, absl::InfiniteFuture()).ok());
    ReadToEnd(*stream, &eager);
    ASSERT_EQ(NumTokens(eager), kN * kMaxTokens);
  }
  absl::Notification paused;
  GenerationStream* observed = nullptr;
  std::unique_ptr<GenerationStream> stream = NewStream([&] {
    // Sinks run one at a time, under the Cluster's lock.
    if (observed->paused() && !paused.HasBeenNotified()) paused.Notify();
  });
  observed = stream.get();
  ASSERT_TRUE(stream->Submit({Long(kN, kMaxTokens)}, {}, absl::InfiniteFuture()).ok());
  ASSERT_TRUE(paused.WaitForNotificationWithTimeout(absl::Minutes(2)));
  // Paused, the call stops generating: what it queued (a step in flight included) is all.
  Read slow;
  int unsent = 0;
  for (;;) {
    GenerationStream::Taken taken = stream->Take(absl::Milliseconds(500));
    if (taken.chunks.empty()) break;
    ASSERT_FALSE(taken.done);
    for (const OutputChunk& c : taken.chunks) {
      slow.tokens[c.index].insert(slow.tokens[c.index].end(), c.token_ids.begin(),
                                  c.token_ids.end());
    }
    unsent += taken.num_tokens();
  }
  EXPECT_GE(unsent, kMaxUnsentTokens);
  EXPECT_LT(unsent, kN * kMaxTokens) << "the call ran on while its client did not read";
  // Taken is not sent: the call resumes only once fewer than a quarter are unsent.
  stream->Sent(unsent - kMaxUnsentTokens / 4);
  EXPECT_TRUE(stream->paused());
  stream->Sent(1);
  EXPECT_FALSE(stream->paused());
  stream->Sent(kMaxUnsentTokens / 4 - 1);
  ReadToEnd(*stream, &slow);
  ASSERT_TRUE(slow.done && slow.error.ok()) << slow.error;
  EXPECT_EQ(slow.tokens, eager.tokens) << "a pause changes no token";
}

// The largest call the limits allow, 64 prompts x n = 16: a step gives it up to 256 tokens at
// once (max_num_seqs), which paused it (and the paused caps then cancelled it) though its
// client read as fast as it could. Its bound grows with its sequences.
TEST_F(GenerationStreamTest, AClientThatReadsIsNotPausedByItsOwnCallsSize) {
  AddWorker(4096);
  // Atomic: the stream calls this outside its own lock, so its last call may still run while
  // this thread reads the flag after the last chunk (ThreadSanitizer found the race).
  std::atomic<bool> ever_paused = false;
  GenerationStream* observed = nullptr;
  std::unique_ptr<GenerationStream> stream = NewStream([&] {
    if (observed->paused()) ever_paused = true;
  });
  observed = stream.get();
  std::vector<GenerationRequest> requests(64, Long(16, 8));
  ASSERT_TRUE(stream->Submit(requests, {}, absl::InfiniteFuture()).ok());
  Read read;
  ReadToEnd(*stream, &read);
  ASSERT_TRUE(read.done && read.error.ok()) << read.error;
  EXPECT_EQ(NumTokens(read), 64 * 16 * 8);
  EXPECT_FALSE(ever_paused);
}

TEST_F(GenerationStreamTest, AbortEndsTheStreamAndFreesItsBlocks) {
  AddWorker();
  {
    std::unique_ptr<GenerationStream> stream = NewStream();
    ASSERT_TRUE(stream->Submit({Long(2, 200)}, {}, absl::InfiniteFuture()).ok());
    ASSERT_TRUE(HasOutput(*stream));
    EXPECT_GT(cluster_->stats().num_used_blocks, 0);
    stream->Abort();
    const GenerationStream::Taken taken = stream->Take(absl::ZeroDuration());
    EXPECT_TRUE(taken.done);
    EXPECT_TRUE(taken.error.ok()) << "the client left: nothing failed";
  }
  {
    // Destroyed before its end: aborted too.
    std::unique_ptr<GenerationStream> stream = NewStream();
    ASSERT_TRUE(stream->Submit({Long(1, 200)}, {}, absl::InfiniteFuture()).ok());
    ASSERT_TRUE(HasOutput(*stream));
  }
  // The worker drops aborted requests before it runs the next one, whose end it reports after
  // freeing its blocks.
  std::unique_ptr<GenerationStream> next = NewStream();
  ASSERT_TRUE(next->Submit({Greedy(2)}, {}, absl::InfiniteFuture()).ok());
  Read read;
  ReadToEnd(*next, &read);
  ASSERT_TRUE(read.done && read.error.ok()) << read.error;
  EXPECT_EQ(cluster_->stats().num_used_blocks, 0);
  EXPECT_EQ(cluster_->stats().num_running, 0);
}

TEST_F(GenerationStreamTest, ABadRequestIsRefusedBeforeAnythingIsQueued) {
  std::unique_ptr<GenerationStream> stream = NewStream();
  GenerationRequest bad = Greedy(0);
  bad.n = 0;
  const absl::Status status = stream->Submit({Greedy(1), bad}, {}, absl::InfiniteFuture());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("n = 0"));
  EXPECT_EQ(cluster_->stats().num_waiting, 0) << "the good request was not queued either";
}

TEST_F(GenerationStreamTest, WithNoWorkerTheStreamEndsUnavailableWhenItGivesUp) {
  std::unique_ptr<GenerationStream> stream = NewStream();
  const absl::Time give_up_at = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(stream->Submit({Greedy(0)}, {}, give_up_at).ok());
  cluster_->Tick(give_up_at - absl::Seconds(1));
  EXPECT_FALSE(stream->Take(absl::ZeroDuration()).done) << "it still waits for a worker";
  cluster_->Tick(give_up_at);
  const GenerationStream::Taken taken = stream->Take(absl::ZeroDuration());
  EXPECT_TRUE(taken.done);
  EXPECT_TRUE(taken.chunks.empty());
  EXPECT_EQ(taken.error.code(), absl::StatusCode::kUnavailable);
}

TEST_F(GenerationStreamTest, ASequenceItsWorkerDropsEndsTheStreamWithAnError) {
  AddWorker(/*num_blocks=*/2);  // too small for any request of the model's length
  std::unique_ptr<GenerationStream> stream = NewStream();
  ASSERT_TRUE(stream->Submit({Greedy(0)}, {}, absl::InfiniteFuture()).ok());
  Read read;
  ReadToEnd(*stream, &read);
  ASSERT_TRUE(read.done);
  EXPECT_EQ(read.error.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(read.error.message(), HasSubstr("dropped by its worker"));
}

}  // namespace
}  // namespace pagoda
