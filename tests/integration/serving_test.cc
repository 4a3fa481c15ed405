// Serving through real router and worker processes: golden tokens under concurrency, waiting
// for workers, prefix reuse, failover, the API's options and errors, Hugging Face models.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/llama2c_checkpoint.h"
#include "common/model/random_weights.h"
#include "common/process/http_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

TEST_F(ServingTest, ThirtyTwoConcurrentStreamsThroughTwoWorkersMatchRunC) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  std::vector<testing::StreamOutput> outputs(32);
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back(
        [&, i] { outputs[i] = Generate(Greedy(golden_[i % golden_.size()].prompt)); });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 32; ++i) {
    const auto& c = golden_[i % golden_.size()];
    ASSERT_TRUE(outputs[i].status.ok()) << outputs[i].status.error_message();
    EXPECT_EQ(outputs[i].ids[0], c.greedy_ids) << c.prompt;
    EXPECT_TRUE(c.stdout_text.starts_with(c.prompt + outputs[i].text[0])) << outputs[i].text[0];
  }
  WaitForNoUsedBlocks();
}

TEST_F(ServingTest, ARequestSentBeforeAnyWorkerIsServedWhenOneJoins) {
  WaitForWorkers(0);  // the router is up (health answers), with no worker
  testing::StreamOutput out;
  std::thread client([&] { out = Generate(Greedy(golden_[3].prompt)); });
  // The request must wait for a worker, not fail: a worker starts once it is seen waiting.
  const bool waited = testing::WaitUntil(
      [&] {
        return absl::StrContains(HttpGet("127.0.0.1", metrics_port_, "/metrics").body,
                                 "\npagoda_num_requests_waiting{model_name=\"stories260K\"} 1\n");
      },
      std::chrono::seconds(30), "the request waits for a worker", std::chrono::milliseconds(25));
  StartWorker();
  client.join();
  ASSERT_TRUE(waited);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], golden_[3].greedy_ids);
}

TEST_F(ServingTest, WithNoWorkerARequestFailsUnavailableAtItsDeadline) {
  WaitForWorkers(0);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(800));
  auto reader = stub_->Generate(&ctx, Greedy(golden_[0].prompt));
  v1::GenerateResponse resp;
  EXPECT_FALSE(reader->Read(&resp));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(ServingTest, ARepeatedPrefixIsReportedAsCached) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  const auto& c = golden_[5];
  const testing::StreamOutput first = Generate(Greedy(c.prompt));
  const testing::StreamOutput second = Generate(Greedy(c.prompt));
  ASSERT_TRUE(second.status.ok());
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_GT(second.cached_tokens, 0) << "the prefix should be served from the same worker";
  EXPECT_EQ(second.ids[0], c.greedy_ids);
}

TEST_F(ServingTest, KillingAWorkerMidStreamLosesNoToken) {
  StartWorker();
  const pid_t victim = StartWorker();
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGKILL); });
  WaitForWorkers(1);
  StartWorker();  // a late joiner adds capacity
  WaitForWorkers(2);
  EXPECT_TRUE(Generate(Greedy(golden_[0].prompt)).status.ok());
  WaitForNoUsedBlocks();
}

TEST_F(ServingTest, ParallelSamplesLogprobsAndStopStringsThroughTheApi) {
  StartWorker();
  WaitForWorkers(1);
  v1::GenerateRequest r = Greedy(golden_[0].prompt);
  r.mutable_sampling()->set_temperature(0.9f);
  r.mutable_sampling()->set_seed(4);
  r.set_n(3);
  r.set_max_tokens(24);
  r.set_logprobs(2);
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, r);
  std::vector<std::vector<int>> ids(3);
  std::vector<int> finished(3, 0);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    ASSERT_GE(resp.index(), 0);
    ASSERT_LT(resp.index(), 3);
    ids[resp.index()].insert(ids[resp.index()].end(), resp.token_ids().begin(),
                             resp.token_ids().end());
    ASSERT_EQ(resp.logprobs_size(), resp.token_ids_size());
    for (const auto& lp : resp.logprobs()) {
      EXPECT_EQ(lp.top_size(), 2);
      EXPECT_LE(lp.logprob(), 0.0f);
    }
    if (!resp.finish_reason().empty()) {
      ++finished[resp.index()];
      EXPECT_EQ(resp.usage().completion_tokens(), static_cast<int>(ids[resp.index()].size()));
      EXPECT_EQ(resp.usage().prompt_tokens(), static_cast<int>(golden_[0].prompt_ids.size()));
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finished, std::vector<int>({1, 1, 1}));
  EXPECT_NE(ids[0], ids[1]);

  // With n = 2, each sequence stops at its own stop string; the workers drop them at once
  // (TearDown checks that every block is free again).
  v1::GenerateRequest two = Greedy(golden_[0].prompt);
  two.set_n(2);
  two.add_stop("little girl");
  const testing::StreamOutput both = Generate(two);
  ASSERT_TRUE(both.status.ok());
  EXPECT_EQ(both.text, std::vector<std::string>({", there was a ", ", there was a "}));
  EXPECT_EQ(both.finish, std::vector<std::string>({"stop", "stop"}));

  // A stop string ends the text before it; the tokens stop there too.
  v1::GenerateRequest stop = Greedy(golden_[0].prompt);
  stop.add_stop("little girl");
  const testing::StreamOutput out = Generate(stop);
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.text[0], ", there was a ");
  EXPECT_EQ(out.finish[0], "stop");
}

TEST_F(ServingTest, BadRequestsAreRejectedNamingTheField) {
  StartWorker();
  WaitForWorkers(1);
  struct Case {
    std::string field;
    std::function<void(v1::GenerateRequest&)> spoil;
  };
  const std::vector<Case> cases = {
      {"prompt", [](auto& r) { r.set_prompt(""); }},
      {"prompt_token_ids",
       [](auto& r) {
         r.clear_prompt();
         r.add_prompt_token_ids(1);
         r.add_prompt_token_ids(99999);
       }},
      {"temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-1); }},
      {"temperature", [](auto& r) { r.mutable_sampling()->set_temperature(NAN); }},
      {"top_p", [](auto& r) { r.mutable_sampling()->set_top_p(0); }},
      {"top_p", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }},
      {"max_tokens", [](auto& r) { r.set_max_tokens(0); }},
      {"max_tokens", [](auto& r) { r.set_max_tokens(300); }},
      {"stop",
       [](auto& r) {
         for (int i = 0; i < 17; ++i) r.add_stop()->push_back('x');
       }},
      {"stop", [](auto& r) { r.add_stop()->assign(300, 'x'); }},
      {"n", [](auto& r) { r.set_n(100); }},
      {"prompt", [](auto& r) { r.set_prompt(std::string(1 << 20, 'a')); }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest r = Greedy("Once upon a time");
    c.spoil(r);
    const testing::StreamOutput out = Generate(r);
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(out.status.error_message(), HasSubstr(c.field));
  }
  EXPECT_EQ(Generate(Greedy(golden_[0].prompt)).ids[0], golden_[0].greedy_ids);
}

TEST_F(ServingTest, CancelledAndExpiredStreamsFreeTheirBlocks) {
  StartWorker();
  WaitForWorkers(1);
  v1::GenerateRequest r = Greedy(golden_[0].prompt);
  r.set_ignore_eos(true);
  const testing::StreamOutput cancelled =
      Generate(r, 10, [](grpc::ClientContext& ctx) { ctx.TryCancel(); });
  EXPECT_EQ(cancelled.status.error_code(), grpc::StatusCode::CANCELLED);
  WaitForNoUsedBlocks();

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
  auto reader = stub_->Generate(&ctx, r);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  WaitForNoUsedBlocks();
}

TEST_F(ServingTest, AWorkerWithAnotherModelIsRefused) {
  ModelConfig c;
  ASSERT_TRUE(NamedModelConfig("stories260K", &c));
  c.num_layers = 2;
  const std::string other = dir_ + "/other.bin";
  ASSERT_TRUE(WriteLlama2cCheckpoint(RandomModelWeights(c, 3), other).ok());
  const pid_t pid = StartWorker(other);
  int status = 0;
  waitpid(pid, &status, 0);
  workers_.pop_back();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_THAT(testing::ReadFile(absl::StrCat(dir_, "/worker0.log")), HasSubstr("different model"));
}

TEST_F(ServingTest, AHuggingFaceDirectoryIsServedWithItsTokenizerAndDefaults) {
  // stories260K-hf, whose generation_config.json asks for greedy sampling by default.
  const std::string model = ServeGreedyHfCopy();
  for (const auto& c : golden_) {
    v1::GenerateRequest r;
    r.set_prompt(c.prompt);  // no sampling fields: the model's default (greedy) applies
    const testing::StreamOutput out = Generate(r);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.ids[0], c.greedy_ids) << c.prompt;
    EXPECT_TRUE(c.stdout_text.starts_with(c.prompt + out.text[0])) << out.text[0];
  }
}

TEST_F(ServingTest, AGgufFileIsServedWithItsOwnVocabulary) {
  // stories260K.gguf (llama.cpp's converter): the router reads only its header and vocabulary,
  // the workers its weights. Its context_length is 128 (the fixture's 257 would be refused),
  // so the golden runs are cut there.
  const std::string model = testing::SharedPath("models/stories260K-gguf/stories260K.gguf");
  Kill(router_);
  StartRouter(model, {"--max-model-len=0"});
  StartWorker(model);
  StartWorker(model);
  WaitForWorkers(2);
  EXPECT_EQ(Info().context_length(), 128);
  std::vector<std::thread> clients;
  std::vector<testing::StreamOutput> outs(golden_.size());
  for (size_t i = 0; i < golden_.size(); ++i) {
    clients.emplace_back([&, i] {
      v1::GenerateRequest r = Greedy(golden_[i].prompt);
      r.set_max_tokens(128 - static_cast<int>(golden_[i].prompt_ids.size()));
      outs[i] = Generate(r);
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < golden_.size(); ++i) {
    const auto& g = golden_[i];
    ASSERT_TRUE(outs[i].status.ok()) << outs[i].status.error_message();
    const size_t n = 128 - g.prompt_ids.size();
    EXPECT_EQ(outs[i].ids[0], std::vector<int>(g.greedy_ids.begin(), g.greedy_ids.begin() + n))
        << g.prompt;
  }
}

TEST_F(ServingTest, WorkersSurviveARouterRestart) {
  StartWorker();
  WaitForWorkers(1);
  Kill(router_);
  StartRouter();
  WaitForWorkers(1);  // the worker reconnects by itself
  EXPECT_EQ(Generate(Greedy(golden_[2].prompt)).ids[0], golden_[2].greedy_ids);
}

// Issue 38: the workers' Hello carries what their pools hold, so the new router's prefix cache
// and placement are as the old one left them: the repeat is a hit on the worker that has it.
TEST_F(ServingTest, ARouterRestartKeepsTheWorkersPrefixCache) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  const auto& c = golden_[5];
  const testing::StreamOutput first = Generate(Greedy(c.prompt));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.cached_tokens, 0);
  Kill(router_);
  StartRouter();
  WaitForWorkers(2);
  const testing::StreamOutput second = Generate(Greedy(c.prompt));
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_GT(second.cached_tokens, 0) << "the restarted router should know the worker's blocks";
  EXPECT_EQ(second.ids[0], c.greedy_ids);
  WaitForNoUsedBlocks();
}

// A tenant's (salted) blocks are shared only under its salt, and never offered to the next
// router, which could not tell them from unsalted ones.
TEST_F(ServingTest, ACacheSaltKeepsATenantsBlocksToItselfAcrossARestart) {
  StartWorker();
  WaitForWorkers(1);
  const auto& c = golden_[5];
  v1::GenerateRequest salted = Greedy(c.prompt);
  salted.set_cache_salt("tenant-a-7f3c9e");
  EXPECT_EQ(Generate(salted).cached_tokens, 0);
  EXPECT_EQ(Generate(Greedy(c.prompt)).cached_tokens, 0) << "unsalted: another chain";
  const testing::StreamOutput again = Generate(salted);
  EXPECT_GT(again.cached_tokens, 0);
  EXPECT_EQ(again.ids[0], c.greedy_ids);
  Kill(router_);
  StartRouter();
  WaitForWorkers(1);
  EXPECT_EQ(Generate(salted).cached_tokens, 0) << "salted blocks are not offered in a Hello";
  EXPECT_GT(Generate(Greedy(c.prompt)).cached_tokens, 0) << "unsalted ones are";
}

// Issue 38: a worker restart keeps its KV (--kv-cache-dir). SIGTERM drains the worker, which
// writes its blocks; the next worker on the directory loads them before its Hello, so the
// router's prefix cache covers them as after a router restart: the repeat is a hit, same tokens.
class KvCacheDirTest : public ServingTest {
 protected:
  // A prompt of several full blocks (16 tokens each: ~90 tokens), and a greedy continuation.
  v1::GenerateRequest LongPrompt() const {
    v1::GenerateRequest r = Greedy(golden_[5].stdout_text.substr(0, 300));
    r.set_max_tokens(32);
    return r;
  }
  pid_t StartDiskWorker() { return StartWorker("", {"--kv-cache-dir=" + dir_ + "/kv"}); }
  // SIGTERM, then the worker drains, saves and exits 0.
  void Stop(pid_t pid) {
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    *std::find(workers_.begin(), workers_.end(), pid) = -1;  // gone; its log keeps its number
    WaitForWorkers(0);
  }
  std::vector<std::string> BlockFiles() const {
    std::vector<std::string> out;
    for (const auto& item : std::filesystem::directory_iterator(dir_ + "/kv")) {
      if (item.path().extension() == ".kvb") out.push_back(item.path().string());
    }
    return out;
  }
};

TEST_F(KvCacheDirTest, AWorkerRestartKeepsItsKvOnDisk) {
  const pid_t first_worker = StartDiskWorker();
  WaitForWorkers(1);
  const testing::StreamOutput first = Generate(LongPrompt());
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.cached_tokens, 0);
  Stop(first_worker);
  EXPECT_GE(BlockFiles().size(), 4u) << "the drain wrote the prompt's blocks";

  StartDiskWorker();
  WaitForWorkers(1);
  const testing::StreamOutput second = Generate(LongPrompt());
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_GE(second.cached_tokens, 64) << "the new worker's Hello offered the saved blocks";
  EXPECT_EQ(second.ids, first.ids);
}

TEST_F(KvCacheDirTest, ACorruptFileIsComputedAgainWithOneLogLine) {
  const pid_t first_worker = StartDiskWorker();
  WaitForWorkers(1);
  const testing::StreamOutput first = Generate(LongPrompt());
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  Stop(first_worker);
  // The chain's first block (its parent hash 0) gets a flipped byte: nothing after it loads.
  int num_corrupted = 0;
  for (const std::string& path : BlockFiles()) {
    if (!absl::EndsWith(path, "-0000000000000000.kvb")) continue;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    const char c = static_cast<char>(f.get());
    f.seekp(200);
    f.put(static_cast<char>(c ^ 0x40));
    ++num_corrupted;
  }
  ASSERT_EQ(num_corrupted, 1);

  StartDiskWorker();
  WaitForWorkers(1);
  const testing::StreamOutput second = Generate(LongPrompt());
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.cached_tokens, 0) << "computed again";
  EXPECT_EQ(second.ids, first.ids);
  const std::string log = testing::ReadFile(absl::StrCat(dir_, "/worker1.log"));
  size_t count = 0;
  for (size_t at = log.find("--kv-cache-dir: ignored"); at != std::string::npos;
       at = log.find("--kv-cache-dir: ignored", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << log;
  EXPECT_THAT(log, ::testing::HasSubstr("corrupt (checksum)"));
}

TEST_F(KvCacheDirTest, TwoLiveWorkersNeverShareADirectory) {
  StartDiskWorker();
  WaitForWorkers(1);
  const pid_t second = StartDiskWorker();
  int status = 0;
  ASSERT_EQ(waitpid(second, &status, 0), second);
  *std::find(workers_.begin(), workers_.end(), second) = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_THAT(testing::ReadFile(absl::StrCat(dir_, "/worker1.log")),
              ::testing::HasSubstr("is in use by another worker"));
}

// The router's --worker-kv-cache-dir: its spawned worker keeps DIR/worker-0, and a router
// stopped with SIGTERM stops it with SIGTERM too, so that it writes its blocks there; the
// next router's worker loads them and the repeat is a hit with the same tokens.
class SpawnedKvCacheDirTest : public KvCacheDirTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--spawn-workers=1", "--worker-threads=1", "--worker-kv-cache-dir=" + dir_ + "/kv"};
  }
};

TEST_F(SpawnedKvCacheDirTest, ARouterStoppedWithSigtermLeavesItsWorkersBlocksToTheNext) {
  WaitForWorkers(1);
  const testing::StreamOutput first = Generate(LongPrompt());
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_EQ(kill(router_, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(router_, &status, 0), router_);
  router_ = -1;
  size_t num_files = 0;
  for (const auto& item : std::filesystem::directory_iterator(dir_ + "/kv/worker-0")) {
    num_files += item.path().extension() == ".kvb";
  }
  EXPECT_GE(num_files, 4u) << "the stopped worker wrote the prompt's blocks";

  StartRouter();
  WaitForWorkers(1);
  const testing::StreamOutput second = Generate(LongPrompt());
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_GE(second.cached_tokens, 64) << "the new worker loaded them before its Hello";
  EXPECT_EQ(second.ids, first.ids);
}

}  // namespace
}  // namespace pagoda
