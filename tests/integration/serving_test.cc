// Router and workers as real processes on loopback ports, driven by real gRPC clients.
// Ready means grpc.health.v1 says SERVING and GetModelInfo counts the workers: no sleeps.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/http_client.h"
#include "common/llama2c_checkpoint.h"
#include "common/random_weights.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/integration/serving_client.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using testing::CheckHealth;
using ::testing::HasSubstr;
using testing::kNotServing;
using testing::kServing;
using testing::WaitForHealth;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  return testing::StartProcess(argv, log, log);
}

class ServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = testing::LoadGoldenCases();
    dir_ = testing::TempDir();
    port_ = FreePort();
    worker_port_ = FreePort();
    metrics_port_ = FreePort();
    StartRouter();
  }
  void TearDown() override {
    // Whatever the test did, every block must be free again once its streams are over.
    if (Info().num_workers() > 0) WaitForNoUsedBlocks();
    for (pid_t pid : workers_) Kill(pid);
    Kill(router_);
  }
  static void Kill(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  // The llama2.c stories260K by default; `model` (with its own tokenizer) otherwise.
  void StartRouter(const std::string& model = "") {
    router_ = Spawn({testing::BinaryPath("pagoda-router"), absl::StrCat("--port=", port_),
                     absl::StrCat("--worker-port=", worker_port_), "--host=127.0.0.1",
                     "--model=" + (model.empty() ? testing::Stories260KModel() : model),
                     "--tokenizer=" + (model.empty() ? testing::Stories260KTokenizer() : ""),
                     "--max-model-len=257", "--heartbeat-timeout-s=3",
                     absl::StrCat("--metrics-port=", metrics_port_)},
                    dir_ + "/router.log");
    // Reconnect quickly while the router starts (the default backoff grows to seconds).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = v1::Generation::NewStub(channel_);
  }
  pid_t StartWorker(const std::string& model = "", const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {
        testing::BinaryPath("pagoda-worker"), absl::StrCat("--router=127.0.0.1:", worker_port_),
        "--model=" + (model.empty() ? testing::Stories260KModel() : model), "--threads=1",
        "--kv-cache-mb=8"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const pid_t pid = Spawn(argv, absl::StrCat(dir_, "/worker", workers_.size(), ".log"));
    workers_.push_back(pid);
    return pid;
  }

  // Waits until health says SERVING and `n` workers are connected.
  void WaitForWorkers(int n) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    for (int i = 0; i < 600; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      ctx.set_wait_for_ready(true);  // wait for the connection rather than fail fast
      grpc::health::v1::HealthCheckRequest req;
      grpc::health::v1::HealthCheckResponse resp;
      // SERVING needs a worker; with n == 0 any answer shows the router is up.
      const bool answered = health->Check(&ctx, req, &resp).ok();
      const bool serving = resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      if (answered && (n == 0 || serving) && Info().num_workers() == n) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "router never had " << n << " workers; see " << dir_;
  }

  v1::ModelInfo Info() { return testing::GetModelInfo(*stub_); }

  // Waits until no block is in use and it stays so for 250 ms: a client can see its call end
  // (e.g. DEADLINE_EXCEEDED) before the router has even admitted the request it then aborts.
  void WaitForNoUsedBlocks() {
    int zeros = 0;
    for (int i = 0; i < 400 && zeros < 10; ++i) {
      zeros = Info().num_used_blocks() == 0 ? zeros + 1 : 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    EXPECT_EQ(zeros, 10) << "blocks still in use: " << Info().num_used_blocks();
  }

  static v1::GenerateRequest Greedy(const std::string& prompt) {
    return testing::GreedyRequest(prompt);
  }
  testing::StreamOutput Generate(const v1::GenerateRequest& request, int trigger_at = -1,
                                 std::function<void(grpc::ClientContext&)> trigger = nullptr) {
    return testing::Generate(*stub_, request, trigger_at, std::move(trigger));
  }
  void ExpectNoTokenLostWhen(const std::function<void()>& fault) {
    testing::ExpectNoTokenLostWhen(*stub_, golden_, fault);
  }

  // The exit status of a child that is ending (or -1 if it did not exit normally in 30 s).
  int ExitCode(pid_t pid) {
    int status = 0;
    for (int i = 0; i < 600; ++i) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        std::erase(workers_, pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

  std::vector<testing::GoldenCase> golden_;
  std::string dir_;
  int port_ = 0, worker_port_ = 0, metrics_port_ = 0;
  pid_t router_ = -1;
  std::vector<pid_t> workers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

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

// The value of one series (`name` with its labels, exactly as rendered) in a scrape; NaN if
// it is not there.
double Metric(const std::string& text, const std::string& series) {
  for (size_t at = 0; (at = text.find(series + " ", at)) != std::string::npos; ++at) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
  }
  return NAN;
}

TEST_F(ServingTest, MetricsMoveDuringALoadAndSettleAfterIt) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  std::string during;
  std::vector<testing::StreamOutput> outputs(16);
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      outputs[i] = Generate(Greedy(golden_[i % golden_.size()].prompt), i == 0 ? 20 : -1,
                            [&](grpc::ClientContext&) {
                              during = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
                            });
    });
  }
  for (auto& t : clients) t.join();
  for (const char* name :
       {"pagoda_num_requests_running", "pagoda_num_requests_waiting", "pagoda_kv_cache_usage",
        "pagoda_prefix_cache_queries_total", "pagoda_prefix_cache_hits_total",
        "pagoda_num_preemptions_total", "pagoda_prompt_tokens_total",
        "pagoda_generation_tokens_total", "pagoda_time_to_first_token_seconds",
        "pagoda_inter_token_latency_seconds", "pagoda_e2e_request_latency_seconds",
        "pagoda_request_queue_time_seconds", "pagoda_worker_step_seconds"}) {
    EXPECT_THAT(during, HasSubstr(absl::StrCat("# TYPE ", name, " "))) << name;
  }
  EXPECT_GE(Metric(during, "pagoda_num_requests_running"), 1);
  EXPECT_GT(Metric(during, "pagoda_generation_tokens_total"), 0);
  EXPECT_GT(Metric(during, "pagoda_kv_cache_usage{worker=\"0\"}") +
                Metric(during, "pagoda_kv_cache_usage{worker=\"1\"}"),
            0);

  int tokens = 0, prompt_tokens = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(outputs[i].status.ok());
    tokens += static_cast<int>(outputs[i].ids[0].size());
    prompt_tokens += static_cast<int>(golden_[i % golden_.size()].prompt_ids.size());
  }
  WaitForNoUsedBlocks();
  const std::string after = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
  EXPECT_EQ(Metric(after, "pagoda_generation_tokens_total"), tokens);
  EXPECT_EQ(Metric(after, "pagoda_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(Metric(after, "pagoda_time_to_first_token_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_e2e_request_latency_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_request_queue_time_seconds_count"), 16);
  EXPECT_EQ(Metric(after, "pagoda_inter_token_latency_seconds_count"), tokens - 16);
  EXPECT_EQ(Metric(after, "pagoda_prefix_cache_queries_total"), prompt_tokens);
  EXPECT_EQ(Metric(after, "pagoda_num_requests_running"), 0);
  EXPECT_EQ(Metric(after, "pagoda_kv_cache_usage{worker=\"0\"}"), 0);
  EXPECT_EQ(Metric(after, "pagoda_kv_cache_usage{worker=\"1\"}"), 0);
  EXPECT_GT(Metric(after, "pagoda_worker_step_seconds_count{worker=\"0\"}") +
                Metric(after, "pagoda_worker_step_seconds_count{worker=\"1\"}"),
            0);
}

// A number field of a flat JSON object; NaN if absent.
double JsonNumber(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\":");
  return at == std::string::npos ? NAN : std::stod(json.substr(at + key.size() + 3));
}

TEST_F(ServingTest, BenchReportsTheLoadItSent) {
  StartWorker();
  StartWorker();
  WaitForWorkers(2);
  const std::string server = absl::StrCat("--server=127.0.0.1:", port_);
  const std::string metrics = absl::StrCat("--metrics=127.0.0.1:", metrics_port_);
  const testing::CommandResult random =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, metrics,
                           "--num-prompts=24", "--input-len=40", "--output-len=30",
                           "--range-ratio=0.5", "--request-rate=200", "--ignore-eos", "--json"});
  ASSERT_EQ(random.exit_code, 0) << random.err;
  for (const char* key :
       {"duration", "request_throughput", "input_throughput", "output_throughput",
        "total_token_throughput", "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
        "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
        "prefix_cache_hit_rate", "peak_running", "mean_kv_cache_utilization"}) {
    EXPECT_FALSE(std::isnan(JsonNumber(random.out, key))) << key << " in " << random.out;
  }
  EXPECT_EQ(JsonNumber(random.out, "completed"), 24);
  EXPECT_EQ(JsonNumber(random.out, "failed"), 0);
  // --ignore-eos: every request ran to its max_tokens, drawn from [15, 45].
  const double output = JsonNumber(random.out, "total_output_tokens");
  EXPECT_GE(output, 24 * 15);
  EXPECT_LE(output, 24 * 45);
  EXPECT_GE(JsonNumber(random.out, "peak_running"), 1);
  EXPECT_LE(JsonNumber(random.out, "p90_ttft_ms"), JsonNumber(random.out, "p99_ttft_ms"));
  // What the router counted agrees with what the client saw.
  const std::string scrape = HttpGet("127.0.0.1", metrics_port_, "/metrics").body;
  EXPECT_EQ(Metric(scrape, "pagoda_generation_tokens_total"), output);

  // max_tokens 4x the output: the client ends each stream at its output length.
  const testing::CommandResult overstated = testing::RunCommand(
      {testing::BinaryPath("pagoda"), "bench", server, "--num-prompts=8", "--input-len=20",
       "--output-len=20", "--max-tokens-ratio=4", "--ignore-eos", "--json"});
  ASSERT_EQ(overstated.exit_code, 0) << overstated.err;
  EXPECT_EQ(JsonNumber(overstated.out, "completed"), 8);
  EXPECT_EQ(JsonNumber(overstated.out, "total_output_tokens"), 8 * 20);
  WaitForNoUsedBlocks();

  // Chat: every turn resends the history, so most prompt tokens are cache hits.
  const testing::CommandResult chat =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, "--dataset=chat",
                           "--num-prompts=12", "--turns=3", "--system-prompt-len=96",
                           "--input-len=16", "--output-len=16", "--max-concurrency=4", "--json"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(JsonNumber(chat.out, "completed"), 12);
  EXPECT_GT(JsonNumber(chat.out, "prefix_cache_hit_rate"), 0.5) << chat.out;

  // Bad input: clear errors, exit code 2.
  const testing::CommandResult too_long =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench", server, "--input-len=300"});
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_THAT(too_long.err, HasSubstr("model length is 257"));
  const testing::CommandResult nobody =
      testing::RunCommand({testing::BinaryPath("pagoda"), "bench",
                           absl::StrCat("--server=127.0.0.1:", FreePort()), "--timeout=1"});
  EXPECT_EQ(nobody.exit_code, 2);
  EXPECT_THAT(nobody.err, HasSubstr("error:"));
  WaitForNoUsedBlocks();
}

TEST_F(ServingTest, ARequestSentBeforeAnyWorkerIsServedWhenOneJoins) {
  WaitForWorkers(0);  // the router is up (health answers), with no worker
  testing::StreamOutput out;
  std::thread client([&] { out = Generate(Greedy(golden_[3].prompt)); });
  // The request must wait for a worker, not fail: start one once it is queued.
  for (int i = 0; i < 200 && Info().num_workers() == 0; ++i) {
    if (i == 4) StartWorker();
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  client.join();
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

TEST_F(ServingTest, ProbesTellLivenessFromReadiness) {
  const std::string router = absl::StrCat("127.0.0.1:", port_);
  WaitForWorkers(0);
  // A router with no worker is alive but not ready.
  EXPECT_EQ(CheckHealth(router, "liveness"), kServing);
  EXPECT_EQ(CheckHealth(router, ""), kNotServing);
  EXPECT_EQ(CheckHealth(router, "pagoda.v1.Generation"), kNotServing);

  const std::string worker = absl::StrCat("127.0.0.1:", FreePort());
  StartWorker("", {"--health-port=" + worker.substr(worker.find(':') + 1)});
  WaitForWorkers(1);
  ASSERT_TRUE(WaitForHealth(worker, "", kServing));
  EXPECT_EQ(CheckHealth(worker, "liveness"), kServing);
  EXPECT_EQ(CheckHealth(router, ""), kServing);
  EXPECT_EQ(CheckHealth(router, "pagoda.v1.Generation"), kServing);

  // Without its router the worker is alive but not ready; it is again once one is back.
  Kill(router_);
  ASSERT_TRUE(WaitForHealth(worker, "", kNotServing));
  EXPECT_EQ(CheckHealth(worker, "liveness"), kServing);
  StartRouter();
  WaitForWorkers(1);
  EXPECT_TRUE(WaitForHealth(worker, "", kServing));
}

TEST_F(ServingTest, ADrainedWorkerFinishesItsStreamsAndExits) {
  StartWorker();
  const pid_t victim = StartWorker();
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGTERM); });
  EXPECT_EQ(ExitCode(victim), 0);
  const std::string log = testing::ReadFile(absl::StrCat(dir_, "/worker1.log"));
  EXPECT_THAT(log, HasSubstr("drained; leaving the router"));
  const std::string router_log = testing::ReadFile(dir_ + "/router.log");
  EXPECT_THAT(router_log,
              ::testing::ContainsRegex("worker [0-9]+ is draining with [1-9][0-9]* sequences"))
      << "the drain must start with streams in flight there";
  EXPECT_THAT(router_log, ::testing::Not(HasSubstr("moving")))
      << "a drained worker's sequences finish where they are";
  WaitForWorkers(1);
  EXPECT_EQ(Generate(Greedy(golden_[1].prompt)).ids[0], golden_[1].greedy_ids);
}

TEST_F(ServingTest, AWorkerWithoutItsRouterStopsAtOnceOnSigterm) {
  const std::string health = absl::StrCat("127.0.0.1:", FreePort());
  const pid_t pid = StartWorker("", {absl::StrCat("--router=127.0.0.1:", FreePort()),
                                     "--health-port=" + health.substr(health.find(':') + 1)});
  ASSERT_TRUE(WaitForHealth(health, "liveness", kServing));  // loaded, dialing nobody
  EXPECT_EQ(CheckHealth(health, ""), kNotServing);
  kill(pid, SIGTERM);
  EXPECT_EQ(ExitCode(pid), 0);
}

TEST_F(ServingTest, ADrainThatRunsOutOfTimeMovesItsSequences) {
  StartWorker();
  const pid_t victim = StartWorker("", {"--drain-timeout-s=0"});
  WaitForWorkers(2);
  ExpectNoTokenLostWhen([&] { kill(victim, SIGTERM); });
  EXPECT_EQ(ExitCode(victim), 0);
  EXPECT_THAT(testing::ReadFile(absl::StrCat(dir_, "/worker1.log")), HasSubstr("drain timed out"));
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("moving the sequences of worker"));
  WaitForWorkers(1);
}

TEST_F(ServingTest, ARouterStoppedWithSigtermFinishesItsStreams) {
  StartWorker();
  WaitForWorkers(1);
  std::vector<testing::StreamOutput> outputs(16);
  std::vector<std::thread> clients;
  std::atomic<bool> stopped{false};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      outputs[i] =
          Generate(Greedy(golden_[i % golden_.size()].prompt), 20, [&](grpc::ClientContext&) {
            if (!stopped.exchange(true)) kill(router_, SIGTERM);
          });
    });
  }
  for (auto& t : clients) t.join();
  ASSERT_TRUE(stopped);
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << i << ": " << outputs[i].status.error_message();
    EXPECT_EQ(outputs[i].ids[0], golden_[i % golden_.size()].greedy_ids) << i;
  }
  EXPECT_EQ(ExitCode(router_), 0);
  router_ = -1;
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("refusing new calls"));
  // Gone: a new call fails instead of hanging.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1::ModelInfo info;
  EXPECT_EQ(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
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
  const std::string model = dir_ + "/stories260K-hf";
  std::filesystem::copy(testing::SharedPath("models/stories260K-hf"), model);
  std::filesystem::permissions(model, std::filesystem::perms::owner_all);
  std::filesystem::remove(model + "/generation_config.json");
  testing::WriteFile(model + "/generation_config.json",
                     R"({"eos_token_id": [2, 1], "temperature": 0.0})");
  Kill(router_);
  StartRouter(model);
  StartWorker(model);
  WaitForWorkers(1);
  for (const auto& c : golden_) {
    v1::GenerateRequest r;
    r.set_prompt(c.prompt);  // no sampling fields: the model's default (greedy) applies
    const testing::StreamOutput out = Generate(r);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.ids[0], c.greedy_ids) << c.prompt;
    EXPECT_TRUE(c.stdout_text.starts_with(c.prompt + out.text[0])) << out.text[0];
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

}  // namespace
}  // namespace pagoda
