// The router, two workers and the client as four hosts: one network namespace each, joined by
// a bridge in a fifth, each with its own address on 10.77.0.0/24. The test process itself is
// the client host (it enters that namespace before gRPC starts a thread). Faults are real:
// a worker's link goes down (its cable is pulled: packets vanish, no connection reset), and a
// worker is killed.
//
// Making namespaces needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2. Where the machine
// cannot, every test here is reported SKIPPED with the reason, never passed.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/serving_client.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

// The hosts of the test network: namespace suffix and address.
struct Host {
  const char* name;
  const char* address;
};
constexpr Host kRouter = {"router", "10.77.0.1"};
constexpr Host kWorker1 = {"w1", "10.77.0.2"};
constexpr Host kWorker2 = {"w2", "10.77.0.3"};
constexpr Host kClient = {"client", "10.77.0.4"};
constexpr Host kHosts[] = {kRouter, kWorker1, kWorker2, kClient};

class TestNetwork : public ::testing::Environment {
 public:
  static TestNetwork* Get() { return instance_; }
  explicit TestNetwork() { instance_ = this; }

  // Empty when the network is up; otherwise why it cannot be.
  const std::string& unavailable() const { return unavailable_; }

  std::string Namespace(const Host& host) const { return prefix_ + host.name; }

  const std::string& ip() const { return ip_; }

  // Pulls (up = false) or plugs back the cable of `host` at the bridge.
  bool SetLink(const Host& host, bool up) {
    return Run({"ip", "-n", prefix_ + "net", "link", "set", std::string("v-") + host.name,
                up ? "up" : "down"});
  }

  void SetUp() override {
    if (geteuid() != 0) {
      Unavailable("needs root to create network namespaces");
      return;
    }
    for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (access(path, X_OK) == 0) {
        ip_ = path;
        break;
      }
    }
    if (ip_.empty()) {
      Unavailable("iproute2's `ip` is not installed");
      return;
    }
    if (!Run({"ip", "netns", "add", prefix_ + "net"})) return;
    namespaces_.push_back(prefix_ + "net");
    const std::string net = prefix_ + "net";
    if (!Run({"ip", "-n", net, "link", "add", "br0", "type", "bridge"}) ||
        !Run({"ip", "-n", net, "link", "set", "br0", "up"})) {
      return;
    }
    for (const Host& host : kHosts) {
      const std::string ns = Namespace(host);
      const std::string port = std::string("v-") + host.name;
      if (!Run({"ip", "netns", "add", ns})) return;
      namespaces_.push_back(ns);
      if (!Run({"ip", "-n", net, "link", "add", port, "type", "veth", "peer", "name", "eth0",
                "netns", ns}) ||
          !Run({"ip", "-n", net, "link", "set", port, "master", "br0"}) ||
          !Run({"ip", "-n", net, "link", "set", port, "up"}) ||
          !Run({"ip", "-n", ns, "addr", "add", absl::StrCat(host.address, "/24"), "dev", "eth0"}) ||
          !Run({"ip", "-n", ns, "link", "set", "eth0", "up"}) ||
          !Run({"ip", "-n", ns, "link", "set", "lo", "up"})) {
        return;
      }
    }
    // From here on this process is the client host. No thread exists yet, so every thread
    // gRPC starts later inherits the namespace.
    const int fd = open(("/run/netns/" + Namespace(kClient)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      Unavailable(absl::StrCat("cannot enter the client namespace: ", strerror(errno)));
    }
    if (fd >= 0) close(fd);
  }

  void TearDown() override {
    for (const std::string& ns : namespaces_) Run({"ip", "netns", "del", ns});
  }

 private:
  bool Run(std::vector<std::string> argv) {
    argv[0] = ip_;
    const testing::CommandResult r = testing::RunCommand(argv);
    if (r.exit_code == 0) return true;
    if (unavailable_.empty()) {
      Unavailable(
          absl::StrCat("`", absl::StrJoin(argv, " "), "` failed (", r.exit_code, "): ", r.err));
    }
    return false;
  }
  void Unavailable(const std::string& why) {
    unavailable_ = why;
    fprintf(stderr, "multi-host tests cannot run here: %s\n", why.c_str());
  }

  static TestNetwork* instance_;
  const std::string prefix_ = absl::StrCat("pagoda", getpid(), "-");
  std::string ip_;  // iproute2's ip, by full path
  std::vector<std::string> namespaces_;
  std::string unavailable_;
};
TestNetwork* TestNetwork::instance_ = nullptr;
::testing::Environment* const kNetwork = ::testing::AddGlobalTestEnvironment(new TestNetwork);

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    network_ = TestNetwork::Get();
    if (!network_->unavailable().empty()) {
      GTEST_SKIP() << "multi-host test skipped: " << network_->unavailable();
    }
    golden_ = testing::LoadGoldenCases();
    dir_ = testing::TempDir();
    router_ = StartOn(
        kRouter, testing::BinaryPath("pagoda-router"),
        {"--host=0.0.0.0", "--port=50051", "--worker-port=50052",
         "--model=" + testing::Stories260KModel(), "--tokenizer=" + testing::Stories260KTokenizer(),
         "--max-model-len=257", "--heartbeat-timeout-s=2", "--worker-token=multihost-secret"});
    for (const Host& host : {kWorker1, kWorker2}) {
      workers_.push_back(
          StartOn(host, testing::BinaryPath("pagoda-worker"),
                  {absl::StrCat("--router=", kRouter.address, ":50052"),
                   "--model=" + testing::Stories260KModel(), "--threads=1", "--kv-cache-mb=8",
                   "--health-port=8081", "--worker-token=multihost-secret"}));
    }
    stub_ = v1::Generation::NewStub(grpc::CreateChannel(absl::StrCat(kRouter.address, ":50051"),
                                                        grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    for (pid_t pid : workers_) Kill(pid);
    Kill(router_);
  }

  // Runs `binary` on `host`; its output goes to <dir>/<host>.log.
  pid_t StartOn(const Host& host, const std::string& binary, std::vector<std::string> args) {
    // `ip netns exec` execs the binary in place, so the pid is the binary's own.
    std::vector<std::string> argv = {network_->ip(), "netns", "exec", network_->Namespace(host),
                                     binary};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = absl::StrCat(dir_, "/", host.name, ".log");
    return testing::StartProcess(argv, log, log);
  }
  static void Kill(pid_t pid) {
    if (pid <= 0) return;  // never kill(-1): that is every process we may signal
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }

  // Waits until the router, seen from the client host, is ready with `n` workers; after 60 s
  // fails the test.
  void WaitForWorkers(int n) {
    const std::string router = absl::StrCat(kRouter.address, ":50051");
    testing::WaitUntil(
        [&] {
          return testing::CheckHealth(router, "") == testing::kServing &&
                 testing::GetModelInfo(*stub_).num_workers() == n;
        },
        std::chrono::seconds(60),
        absl::StrCat("the router is serving with ", n, " workers; logs in ", dir_),
        std::chrono::milliseconds(50));
  }

  TestNetwork* network_ = nullptr;
  std::vector<testing::GoldenCase> golden_;
  std::string dir_;
  pid_t router_ = -1;
  std::vector<pid_t> workers_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(MultiHostTest, AClientOnAnotherHostGetsTheGoldenTokens) {
  WaitForWorkers(2);
  // Each worker dialed in from, and is ready on, its own address.
  const std::string router_log = testing::ReadFile(dir_ + "/router.log");
  for (const Host& host : {kWorker1, kWorker2}) {
    EXPECT_THAT(router_log, HasSubstr(absl::StrCat("connected from ipv4:", host.address, ":")));
    EXPECT_TRUE(testing::WaitForHealth(absl::StrCat(host.address, ":8081"), "", testing::kServing))
        << host.name;
  }
  std::vector<testing::StreamOutput> outputs(32);
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      outputs[i] =
          testing::Generate(*stub_, testing::GreedyRequest(golden_[i % golden_.size()].prompt));
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << outputs[i].status.error_message();
    EXPECT_EQ(outputs[i].ids[0], golden_[i % golden_.size()].greedy_ids)
        << golden_[i % golden_.size()].prompt;
  }
  testing::WaitForNoUsedBlocks(*stub_);
}

TEST_F(MultiHostTest, ALinkCutAndAKillLoseNoToken) {
  WaitForWorkers(2);
  // Worker 1's cable is pulled mid-stream: no reset reaches anyone, so the router learns it
  // only from the missing heartbeats, and moves its sequences to worker 2.
  testing::ExpectNoTokenLostWhen(*stub_, golden_,
                                 [&] { EXPECT_TRUE(network_->SetLink(kWorker1, false)); });
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("missed its heartbeats"));
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"), HasSubstr("moving the sequences"));
  WaitForWorkers(1);

  // Plugged back in, worker 1 finds its old stream dead and joins again.
  ASSERT_TRUE(network_->SetLink(kWorker1, true));
  WaitForWorkers(2);

  // Now worker 2 is killed mid-stream; worker 1 takes over.
  testing::ExpectNoTokenLostWhen(*stub_, golden_, [&] { kill(workers_[1], SIGKILL); });
  WaitForWorkers(1);
  testing::WaitForNoUsedBlocks(*stub_);
}

}  // namespace
}  // namespace pagoda
