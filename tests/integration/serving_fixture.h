// The fixture of the process tests: a real pagoda-router on loopback ports, workers started
// on demand, a gRPC client, and checks that every block is free again when a test ends.
// Ready means grpc.health.v1 says SERVING and GetModelInfo counts the workers: no sleeps.
#ifndef PAGODA_TESTS_INTEGRATION_SERVING_FIXTURE_H_
#define PAGODA_TESTS_INTEGRATION_SERVING_FIXTURE_H_

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/process/http_client.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/integration/serving_client.h"
#include "tests/test_util.h"

namespace pagoda {

// A loopback port nobody listens on, drawn at random below the kernel's ephemeral range: a
// port bind(0) hands out comes from that range, where every outgoing connection of a test
// running alongside may take it before our child binds it. A child that still loses a race
// is restarted on fresh ports (StartRouter).
inline bool CanBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

inline int FreePort() {
  static std::mt19937 rng(std::random_device{}());
  static std::set<int> given;  // never the same port twice in one test process
  int ephemeral_low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> ephemeral_low;
  const int lo = 10000, hi = std::max(lo + 1000, ephemeral_low);
  std::uniform_int_distribution<int> pick(lo, hi - 1);
  for (int tries = 0; tries < 1000; ++tries) {
    const int port = pick(rng);
    if (!given.contains(port) && CanBind(port)) {
      given.insert(port);
      return port;
    }
  }
  LOG(FATAL) << "no free loopback port in [" << lo << ", " << hi << ")";
  return -1;
}

inline pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  return testing::StartProcess(argv, log, log);
}

class ServingTest : public ::testing::Test {
 protected:
  // The cluster's worker token: the router asks for it, StartWorker's workers present it.
  static constexpr char kToken[] = "test-worker-token";

  void SetUp() override {
    golden_ = testing::LoadGoldenCases();
    dir_ = testing::TempDir();
    port_ = FreePort();
    worker_port_ = FreePort();
    metrics_port_ = FreePort();
    http_port_ = FreePort();
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

  // Flags a test adds to the router's command line.
  virtual std::vector<std::string> ExtraRouterFlags() const { return {}; }
  // The flags that say what the router serves: the llama2.c stories260K by default, `model`
  // (with its own tokenizer) otherwise.
  virtual std::vector<std::string> ModelFlags(const std::string& model) const {
    return {"--model=" + (model.empty() ? testing::Stories260KModel() : model),
            "--tokenizer=" + (model.empty() ? testing::Stories260KTokenizer() : ""),
            "--max-model-len=257"};
  }

  // The router's command line: ModelFlags(model), then `flags` last (a flag given twice takes
  // the later value).
  std::vector<std::string> RouterArgv(const std::string& model,
                                      const std::vector<std::string>& flags) const {
    std::vector<std::string> argv = {
        testing::BinaryPath("pagoda-router"), absl::StrCat("--port=", port_),
        absl::StrCat("--worker-port=", worker_port_), "--host=127.0.0.1"};
    for (const std::string& flag : ModelFlags(model)) argv.push_back(flag);
    const std::vector<std::string> ports = {
        "--heartbeat-timeout-s=3", absl::StrCat("--metrics-port=", metrics_port_),
        absl::StrCat("--http-port=", http_port_), absl::StrCat("--worker-token=", kToken)};
    argv.insert(argv.end(), ports.begin(), ports.end());
    for (const std::string& flag : ExtraRouterFlags()) argv.push_back(flag);
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }

  void StartRouter(const std::string& model = "", const std::vector<std::string>& flags = {}) {
    // Up means the OpenAI port, which the router opens last, answers. A router that exits
    // first lost one of its ports to a process beside us: it is started again on new ones,
    // unless workers already dial its worker port.
    for (int attempt = 1;; ++attempt) {
      const std::string log = dir_ + "/router.log";
      router_ = Spawn(RouterArgv(model, flags), log);
      int status = 0;
      bool exited = false;
      testing::WaitUntil(
          [&] {
            exited = waitpid(router_, &status, WNOHANG) == router_;
            return exited || HttpGet("127.0.0.1", http_port_, "/health", 1000).status != -1;
          },
          std::chrono::seconds(60), absl::StrCat("the router answers on its ports; see ", log),
          std::chrono::milliseconds(20));
      if (!exited) break;
      router_ = -1;
      const std::string why = testing::ReadFile(log);
      std::filesystem::rename(log, absl::StrCat(dir_, "/router_exited", attempt, ".log"));
      ASSERT_TRUE(attempt < 3 && workers_.empty() && absl::StrContains(why, "cannot listen"))
          << "the router exited at start:\n"
          << why;
      port_ = FreePort();
      worker_port_ = FreePort();
      metrics_port_ = FreePort();
      http_port_ = FreePort();
    }
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
        testing::BinaryPath("pagoda-worker"),
        absl::StrCat("--router=127.0.0.1:", worker_port_),
        "--model=" + (model.empty() ? testing::Stories260KModel() : model),
        "--threads=1",
        "--kv-cache-mb=8",
        absl::StrCat("--worker-token=", kToken)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const pid_t pid = Spawn(argv, absl::StrCat(dir_, "/worker", workers_.size(), ".log"));
    workers_.push_back(pid);
    return pid;
  }

  // Restarts the router and one worker on a copy of stories260K-hf whose tokenizer_config.json
  // carries the chat template `name` of the golden set (a real model's); returns the copy's path.
  std::string ServeHfCopyWithChatTemplate(const std::string& name) {
    const std::string model = dir_ + "/chat-model";
    std::filesystem::copy(testing::SharedPath("models/stories260K-hf"), model);
    std::filesystem::permissions(model, std::filesystem::perms::owner_all);
    std::ifstream golden(testing::SharedPath("golden/chat_templates.json"));
    std::ifstream config_in(model + "/tokenizer_config.json");
    nlohmann::json config = nlohmann::json::parse(config_in);
    config["chat_template"] = nlohmann::json::parse(golden)["templates"][name];
    std::filesystem::remove(model + "/tokenizer_config.json");
    testing::WriteFile(model + "/tokenizer_config.json", config.dump());
    Kill(router_);
    StartRouter(model);
    StartWorker(model);
    WaitForWorkers(1);
    return model;
  }

  // Restarts the router and one worker on a copy of stories260K-hf whose
  // generation_config.json asks for greedy sampling by default; returns the copy's path.
  std::string ServeGreedyHfCopy() {
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
    return model;
  }

  // Waits until health says SERVING and `n` workers are connected; after 60 s fails the test.
  void WaitForWorkers(int n) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    testing::WaitUntil(
        [&] {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
          ctx.set_wait_for_ready(true);  // wait for the connection rather than fail fast
          grpc::health::v1::HealthCheckRequest req;
          grpc::health::v1::HealthCheckResponse resp;
          // SERVING needs a worker; with n == 0 any answer shows the router is up.
          const bool answered = health->Check(&ctx, req, &resp).ok();
          const bool serving = resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
          return answered && (n == 0 || serving) && Info().num_workers() == n;
        },
        std::chrono::seconds(60),
        absl::StrCat("the router is up with ", n, " workers", n > 0 ? ", SERVING" : "", "; see ",
                     dir_),
        std::chrono::milliseconds(50));
  }

  v1::ModelInfo Info() { return testing::GetModelInfo(*stub_); }

  void WaitForNoUsedBlocks() { testing::WaitForNoUsedBlocks(*stub_); }

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
  // The router still serves the golden story.
  void ExpectGoldenStory() {
    const testing::StreamOutput out = Generate(Greedy(golden_[0].prompt));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
  }

  std::string Metrics() { return HttpGet("127.0.0.1", metrics_port_, "/metrics").body; }
  // The value of the first series of family `name` (whatever its labels); -1 if absent.
  double ScrapeMetric(const std::string& name) {
    const std::string metrics = Metrics();
    for (size_t at = metrics.find(name); at != std::string::npos; at = metrics.find(name, at + 1)) {
      const bool line_start = at == 0 || metrics[at - 1] == '\n';
      const char next = metrics[at + name.size()];
      if (!line_start || (next != ' ' && next != '{')) continue;
      const size_t end = metrics.find('\n', at);
      const size_t space = metrics.rfind(' ', end);
      return std::stod(metrics.substr(space + 1, end - space - 1));
    }
    return -1;
  }

  // The exit status of a child that is ending (-1 if it did not exit normally; after 30 s fails
  // the test).
  int ExitCode(pid_t pid) {
    int status = 0;
    if (!testing::WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                            std::chrono::seconds(30),
                            absl::StrCat("process ", pid, " exits; see ", dir_))) {
      return -1;
    }
    std::erase(workers_, pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<testing::GoldenCase> golden_;
  std::string dir_;
  int port_ = 0, worker_port_ = 0, metrics_port_ = 0, http_port_ = 0;
  pid_t router_ = -1;
  std::vector<pid_t> workers_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace pagoda

#endif  // PAGODA_TESTS_INTEGRATION_SERVING_FIXTURE_H_
