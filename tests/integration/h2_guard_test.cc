// Issue 38, item 6: a plain pagoda-router (no flags about it) fronts its public gRPC port with
// HAProxy (--h2-proxy=auto, router/link/h2_proxy.h), so HTTP/2 floods that gRPC 1.51 cannot
// bound leave it serving: honest calls keep their golden tokens during a rapid-reset flood and
// the router's memory (and HAProxy's) stays bounded; an HAProxy that dies is started again.
// Skipped where haproxy is not installed (tools/setup.sh installs it).
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "absl/time/clock.h"
#include "router/link/h2_proxy.h"
#include "tests/integration/hostile_fixture.h"
#include "tests/integration/raw_h2.h"

namespace pagoda {
namespace {

constexpr char kGenerate[] = "/pagoda.v1.Generation/Generate";

class H2GuardTest : public HostileGrpcTest {
 protected:
  void SetUp() override {
    if (access(kDefaultHaproxy, X_OK) != 0) {
      GTEST_SKIP() << kDefaultHaproxy << " is not installed (tools/setup.sh installs it): "
                   << "pagoda-router serves its port directly, nothing to test";
    }
    HostileGrpcTest::SetUp();
  }
  // No flag about it: the guard is on by default where HAProxy is installed.

  // The router's HAProxy children (by /proc/<pid>/stat's parent and command).
  std::vector<pid_t> HaproxyPids() const {
    std::vector<pid_t> out;
    DIR* proc = opendir("/proc");
    while (dirent* entry = proc ? readdir(proc) : nullptr) {
      const pid_t pid = atoi(entry->d_name);
      if (pid <= 0) continue;
      const std::string stat = ReadProcFile(pid, "stat");  // gone meanwhile: empty
      const size_t close = stat.rfind(')');
      if (close == std::string::npos || stat.find("(haproxy)") == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      std::string state;
      pid_t parent = 0;
      rest >> state >> parent;
      if (parent == router_) out.push_back(pid);
    }
    if (proc) closedir(proc);
    return out;
  }
  // Resident MB of the router and its HAProxy together.
  int64_t GuardedRssMb() const {
    int64_t kb = ProcStatus(router_, "VmRSS");
    for (const pid_t pid : HaproxyPids()) kb += std::max<int64_t>(0, ProcStatus(pid, "VmRSS"));
    return kb / 1024;
  }
  // Milliseconds of an honest call to its golden tokens; -1 when it failed.
  int64_t HonestCallMs() {
    const auto start = std::chrono::steady_clock::now();
    const testing::StreamOutput out = Generate(Greedy(golden_[0].prompt));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    if (!out.status.ok()) return -1;
    EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
    return ms;
  }
};

// HEADERS + DATA + RST_STREAM from two connections (two client addresses) for 4 s, while an
// honest client calls one after the other. Straight on gRPC 1.51 this grows the router by
// gigabytes and honest calls time out (issue 38; tools/h2_flood measures both ways).
TEST_F(H2GuardTest, ARapidResetFloodLeavesHonestCallsAnsweringAndMemoryBounded) {
  ASSERT_EQ(HaproxyPids().size(), 1u) << "the router started its HAProxy";
  StartWorker();
  WaitForWorkers(1);
  HonestCallMs();  // warm
  const int64_t rss_before = GuardedRssMb();
  const absl::Time end = absl::Now() + absl::Seconds(4);
  std::atomic<int64_t> sent = 0;
  auto flood = [&](const char* source) {
    const std::string block = testing::HpackLiterals(testing::GrpcRequestHeaders(kGenerate));
    const std::string message = testing::GrpcMessage(Greedy(golden_[0].prompt).SerializeAsString());
    while (absl::Now() < end) {  // a connection the proxy closes is opened again
      auto h2 = testing::RawH2Connection::Open(port_, 65535, absl::Seconds(5), source);
      if (h2 == nullptr) continue;
      for (uint32_t id = 1; absl::Now() < end; id += 2) {
        if (!h2->SendHeaders(id, block, false, true) || !h2->SendData(id, message, false) ||
            !h2->SendRstStream(id)) {
          break;
        }
        if (++sent % 256 == 0 && h2->Pump(absl::ZeroDuration()).closed) break;
      }
    }
  };
  auto a = std::async(std::launch::async, flood, "127.0.0.2");
  auto b = std::async(std::launch::async, flood, "127.0.0.3");
  int64_t worst_ms = 0, rss_peak = rss_before;
  int calls = 0;
  while (absl::Now() < end) {
    const int64_t ms = HonestCallMs();
    if (ms < 0) break;
    worst_ms = std::max(worst_ms, ms);
    rss_peak = std::max(rss_peak, GuardedRssMb());
    ++calls;
  }
  a.get();
  b.get();
  rss_peak = std::max(rss_peak, GuardedRssMb());
  Report("guarded_rapid_reset_streams", sent);
  Report("guarded_rapid_reset_rss_before_mb", rss_before);
  Report("guarded_rapid_reset_rss_peak_mb", rss_peak);
  Report("guarded_rapid_reset_honest_calls", calls);
  Report("guarded_rapid_reset_honest_worst_ms", worst_ms);
  EXPECT_GT(sent, 10'000) << "the flood ran";
  EXPECT_GT(calls, 0);
  EXPECT_LT(rss_peak - rss_before, 100) << "MB the router and its HAProxy grew by";
  // Stated: one call takes ~0.1 s here; 1 s in the measurement, 3 s for a loaded CI.
  EXPECT_LT(worst_ms, 3000);
}

// Per client address HAProxy keeps at most 64 connections, except for this machine's own
// 127.0.0.1 (load generators and probes, which could dial the router's loopback port anyway).
TEST_F(H2GuardTest, SixtyFourConnectionsPerAddressExceptFromThisMachine) {
  // Connections open from `source`: each either gets HAProxy's SETTINGS or is closed.
  auto open_from = [&](const char* source, int count) {
    std::vector<std::unique_ptr<testing::RawH2Connection>> held;
    int open = 0;
    for (int i = 0; i < count; ++i) {
      auto h2 = testing::RawH2Connection::Open(port_, 65535, absl::Seconds(5), source);
      if (h2 == nullptr) continue;
      const absl::Time give_up = absl::Now() + absl::Seconds(10);
      while (h2->seen().frames == 0 && !h2->seen().closed && absl::Now() < give_up) {
        h2->Pump(absl::Milliseconds(10));
      }
      if (h2->seen().frames > 0 && !h2->seen().closed) ++open;
      held.push_back(std::move(h2));  // kept open, so each counts against the next
    }
    return open;
  };
  EXPECT_EQ(open_from("127.0.0.2", 70), 64);
  EXPECT_EQ(open_from("127.0.0.1", 70), 70);
}

// HAProxy killed: the router logs it, starts another on the same socket (the port never
// closes), and calls pass again.
TEST_F(H2GuardTest, AnHaproxyThatDiesIsStartedAgain) {
  StartWorker();
  WaitForWorkers(1);
  const std::vector<pid_t> first = HaproxyPids();
  ASSERT_EQ(first.size(), 1u);
  kill(first[0], SIGKILL);
  testing::WaitUntil(
      [&] {
        const std::vector<pid_t> now = HaproxyPids();
        return now.size() == 1 && now[0] != first[0];
      },
      std::chrono::seconds(30), "the router starts HAProxy again");
  // A new client's call passes (one on a channel that was connecting while HAProxy was down
  // may wait for gRPC's connect timeout, 20 s, as after any server restart).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto fresh = v1::Generation::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), args));
  const testing::StreamOutput out = testing::Generate(*fresh, Greedy(golden_[0].prompt));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
  EXPECT_THAT(testing::ReadFile(dir_ + "/router.log"),
              ::testing::HasSubstr("HAProxy started again"));
}

}  // namespace
}  // namespace pagoda
