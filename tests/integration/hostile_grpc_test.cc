// Issue 23's gRPC, scheduler and worker-link rows: a real router on loopback under the attack,
// then an honest request that must still get its golden tokens (and, at TearDown, every KV
// block back). Raw HTTP/2 frames for what no real client sends. Each test is bounded in time;
// memory and thread figures go to the log (RecordProperty) for the closing note.
#include <algorithm>
#include <future>
#include <thread>

#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/integration/fake_worker.h"
#include "tests/integration/hostile_fixture.h"
#include "tests/integration/raw_h2.h"

namespace pagoda {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;

constexpr char kGenerate[] = "/pagoda.v1.Generation/Generate";

// Row 1: 16 calls x n = 16 that never read fill every running slot (256) of the worker; two
// honest clients keep getting their golden tokens within a stated latency all the same: the
// paused sequences are preempted for them.
TEST_F(HostileGrpcTest, StalledReadersNeverKeepHonestClientsWaiting) {
  StartWorker();
  WaitForWorkers(1);
  Stalled stalled = StartStalledReaders(16, 16);
  constexpr auto kMaxLatency = std::chrono::seconds(15);  // stated: idle, one takes ~1 s
  auto honest = [&](int client) {
    std::chrono::steady_clock::duration worst{};
    for (int i = 0; i < 3; ++i) {
      const testing::GoldenCase& c = golden_[(client + i) % golden_.size()];
      const auto start = std::chrono::steady_clock::now();
      const testing::StreamOutput out = Generate(Greedy(c.prompt));
      worst = std::max(worst, std::chrono::steady_clock::now() - start);
      EXPECT_TRUE(out.status.ok()) << out.status.error_message();
      if (out.status.ok()) {
        EXPECT_EQ(out.ids[0], c.greedy_ids) << c.prompt;
      }
    }
    return worst;
  };
  auto a = std::async(std::launch::async, honest, 0);
  auto b = std::async(std::launch::async, honest, 1);
  const auto worst = std::max(a.get(), b.get());
  Report("honest_worst_latency_ms",
         std::chrono::duration_cast<std::chrono::milliseconds>(worst).count());
  EXPECT_LT(worst, kMaxLatency);
  EXPECT_GT(ScrapeMetric("pagoda_num_preemptions_total"), 0) << "paused sequences made room";
  for (auto& context : stalled.contexts) context->TryCancel();
  for (auto& reader : stalled.readers) reader->Finish();
}

// On the router's own port (--h2-proxy=off): HAProxy 2.6 in front holds the end of a call the
// router cancelled until the client's own deadline (the router's side is freed all the same).
class StallTimeoutTest : public HostileGrpcTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--stall-timeout-s=2", "--h2-proxy=off"};
  }
};

// Row 1: a client that reads nothing for --stall-timeout-s is cancelled; its KV comes back
// (TearDown) and the router serves on.
TEST_F(StallTimeoutTest, AClientThatReadsNothingIsCancelled) {
  StartWorker();
  WaitForWorkers(1);
  Stalled stalled = StartStalledReaders(4, 16);
  testing::WaitUntil([&] { return ScrapeMetric("pagoda_stalled_clients_total") == 4; },
                     std::chrono::seconds(30), "the four stalled calls are cancelled");
  for (auto& reader : stalled.readers) {
    // The client reads what it had, then the end: reset by the router, or the router's status
    // (not the call's own deadline, a minute away).
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    const grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      EXPECT_THAT(status.error_message(), HasSubstr("read nothing"));
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
    }
  }
  ExpectGoldenStory();
}

// Row 2: HTTP/2 rapid reset (CVE-2023-44487): streams opened and reset at once, for 10 s on
// one connection. gRPC 1.51 has no per-connection reset budget and no setting of the public
// port's bounds it (measured: +1.1 GB RSS, an honest call then takes ~25 s), so this runs the
// attack through the proxy the deploy manifests put in front
// (deploy/k8s/components/h2-proxy/haproxy.cfg, Debian's haproxy), and checks the router's memory
// and an honest call's latency stay low.
// The router serves its port itself here (--h2-proxy=off): the deploy sidecar's configuration
// is what is measured (the router's own HAProxy: h2_guard_test.cc).
class DeployProxyTest : public HostileGrpcTest {
 protected:
  static constexpr char kHaproxy[] = "/usr/sbin/haproxy";
  std::vector<std::string> ExtraRouterFlags() const override { return {"--h2-proxy=off"}; }

  // Starts HAProxy with the deploy manifests' configuration in front of the router's public
  // port; returns its port once calls pass through it.
  int StartProxy() {
    const int proxy_port = FreePort();
    healthz_port_ = FreePort();
    proxy_ = Spawn({"/usr/bin/env", absl::StrCat("PROXY_BIND=127.0.0.1:", proxy_port),
                    absl::StrCat("ROUTER_ADDR=127.0.0.1:", port_),
                    absl::StrCat("HEALTHZ_BIND=127.0.0.1:", healthz_port_), kHaproxy, "-db", "-f",
                    std::string(PAGODA_SOURCE_DIR) + "/deploy/k8s/components/h2-proxy/haproxy.cfg"},
                   dir_ + "/haproxy.log");
    proxied_ = v1::Generation::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", proxy_port),
                                                           grpc::InsecureChannelCredentials()));
    testing::WaitUntil([&] { return testing::GetModelInfo(*proxied_).num_workers() == 1; },
                       std::chrono::seconds(30), "calls pass through the proxy");
    return proxy_port;
  }
  void TearDown() override {
    Kill(proxy_);
    HostileGrpcTest::TearDown();
  }

  // The attack on `port`: how many streams it opened and reset, and the router's peak RSS.
  std::pair<int, int64_t> Flood(int port) {
    // From another address than the honest clients' (the proxy limits each address).
    auto h2 = testing::RawH2Connection::Open(port, 65535, absl::Seconds(5), "127.0.0.2");
    EXPECT_NE(h2, nullptr);
    if (h2 == nullptr) return {0, 0};
    const std::string block = testing::HpackLiterals(testing::GrpcRequestHeaders(kGenerate));
    const std::string message = testing::GrpcMessage(Greedy(golden_[0].prompt).SerializeAsString());
    int64_t rss_peak = RouterRssMb();
    int sent = 0;
    const absl::Time end = absl::Now() + absl::Seconds(10);
    for (uint32_t id = 1; absl::Now() < end && sent < 200'000; id += 2) {
      if (!h2->SendHeaders(id, block, false, true) || !h2->SendData(id, message, false) ||
          !h2->SendRstStream(id)) {
        break;
      }
      ++sent;
      if (sent % 256 == 0 && h2->Pump(absl::ZeroDuration()).closed) break;
      if (sent % 5000 == 0) rss_peak = std::max(rss_peak, RouterRssMb());
    }
    return {sent, std::max(rss_peak, RouterRssMb())};
  }
  // Milliseconds an honest call through `stub` takes to its golden tokens.
  int64_t HonestCallMs(v1::Generation::Stub& stub) {
    const auto start = std::chrono::steady_clock::now();
    const testing::StreamOutput out = testing::Generate(stub, Greedy(golden_[0].prompt));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message();
    if (out.status.ok()) {
      EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  }

  pid_t proxy_ = -1;
  int healthz_port_ = 0;  // the sidecar's liveness probe
  std::unique_ptr<v1::Generation::Stub> proxied_;
};

TEST_F(DeployProxyTest, ThroughTheDeployProxyTheRouterStaysSmallAndServing) {
  ASSERT_EQ(access(kHaproxy, X_OK), 0) << kHaproxy << " is missing: tools/setup.sh installs it";
  StartWorker();
  WaitForWorkers(1);
  const int proxy_port = StartProxy();
  const int64_t rss_before = RouterRssMb();
  const auto [sent, rss_peak] = Flood(proxy_port);
  const int64_t honest_ms = HonestCallMs(*proxied_);
  Report("proxied_rapid_reset_streams", sent);
  Report("proxied_rapid_reset_rss_before_mb", rss_before);
  Report("proxied_rapid_reset_rss_peak_mb", rss_peak);
  Report("proxied_rapid_reset_honest_ms_after", honest_ms);
  EXPECT_GT(sent, 1000);
  EXPECT_LT(rss_peak - rss_before, 200) << "MB the router grew by";
  EXPECT_LT(honest_ms, 5000);
  // The sidecar's liveness probe (deploy/k8s/components/h2-proxy) answers after the flood too.
  EXPECT_EQ(HttpGet("127.0.0.1", healthz_port_, "/healthz", 5000).status, 200);
}

// The same attack straight on the router's port: measured, not bounded (gRPC 1.51). Only the
// router's survival is checked.
TEST_F(DeployProxyTest, StraightOnTheRouterItIsMeasuredAndTheRouterSurvives) {
  StartWorker();
  WaitForWorkers(1);
  const int64_t rss_before = RouterRssMb();
  const auto [sent, rss_peak] = Flood(port_);
  const int64_t honest_ms = HonestCallMs(*stub_);
  Report("rapid_reset_streams", sent);
  Report("rapid_reset_rss_before_mb", rss_before);
  Report("rapid_reset_rss_peak_mb", rss_peak);
  Report("rapid_reset_rss_after_mb", RouterRssMb());
  Report("rapid_reset_honest_ms_after", honest_ms);
  EXPECT_GT(sent, 0);
}

// Row 9: a header block continued by CONTINUATION frames that never end, up to 64 MiB. gRPC
// 1.51 buffers it all (its metadata bound is checked only once the block ends: measured +64 MB
// RSS); the deploy proxy ends the connection at tune.bufsize (32 KiB).
TEST_F(DeployProxyTest, EndlessContinuationFramesAreCutOffByTheDeployProxy) {
  ASSERT_EQ(access(kHaproxy, X_OK), 0) << kHaproxy << " is missing: tools/setup.sh installs it";
  StartWorker();
  WaitForWorkers(1);
  const int proxy_port = StartProxy();
  int64_t straight_growth_mb = 0;
  for (const int port : {port_, proxy_port}) {
    const std::string where = port == port_ ? "router" : "proxied";
    const int64_t rss_before = RouterRssMb();
    auto h2 = testing::RawH2Connection::Open(port, 65535, absl::Seconds(2));
    ASSERT_NE(h2, nullptr);
    const std::string block = testing::HpackLiterals(testing::GrpcRequestHeaders(kGenerate));
    ASSERT_TRUE(h2->SendHeaders(1, block, false, false));
    const std::string filler =
        testing::HpackLiterals({{"x-filler", std::string(16 * 1024 - 32, 'a')}});
    int64_t sent_bytes = 0;
    while (sent_bytes < (int64_t{64} << 20) && h2->SendContinuation(1, filler, false)) {
      sent_bytes += static_cast<int64_t>(filler.size());
      if (sent_bytes % (1 << 20) < static_cast<int64_t>(filler.size()) &&
          h2->Pump(absl::ZeroDuration()).closed) {
        break;
      }
    }
    const int64_t growth_mb = RouterRssMb() - rss_before;
    Report(where + "_continuation_bytes_sent", sent_bytes);
    Report(where + "_continuation_rss_growth_mb", growth_mb);
    if (port == port_) straight_growth_mb = growth_mb;
    if (port == proxy_port) {  // closed at 32 KiB; the rest is what socket buffers took
      EXPECT_LT(sent_bytes, int64_t{16} << 20) << "the proxy kept reading the header block";
      // A fraction of what the flood costs straight on the router (64–82 MB in Release, ~210
      // under ASAN, whose allocator keeps freed memory in quarantine for a while).
      EXPECT_LT(growth_mb, std::max<int64_t>(8, straight_growth_mb / 4));
    }
  }
  EXPECT_LT(HonestCallMs(*proxied_), 5000);
}

// Row 8: calls on the worker port that never send their Hello are ended at the Hello deadline
// (10 s), and calls without the token at once; none holds a router thread; a real worker joins
// meanwhile.
TEST_F(HostileGrpcTest, IdleWorkerStreamsAreEndedAndHoldNoThreadsForLong) {
  const std::string address = absl::StrCat("127.0.0.1:", worker_port_);
  const int64_t threads_before = RouterThreads();
  std::vector<std::unique_ptr<testing::FakeWorker>> strangers, idle;
  for (int i = 0; i < 200; ++i) {
    strangers.push_back(std::make_unique<testing::FakeWorker>(address, "wrong-token"));
  }
  for (auto& s : strangers) s->ReadUntilEnd();  // refused at once, without a Hello read
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<testing::FakeWorker>(address, kToken));
  }
  int64_t threads_peak = RouterThreads();
  StartWorker();
  WaitForWorkers(1);
  threads_peak = std::max(threads_peak, RouterThreads());
  const auto start = std::chrono::steady_clock::now();
  for (auto& s : idle) s->ReadUntilEnd();  // the router ends each at its Hello deadline
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited, std::chrono::seconds(30));
  strangers.clear();
  idle.clear();
  ExpectGoldenStory();
  // Calls take no thread (gRPC's callback API): 100 idle calls and 200 refused ones add at most
  // the few threads of a worker joining, where a thread per call would add 100.
  EXPECT_LT(threads_peak - threads_before, 32);
  Report("worker_port_threads_before", threads_before);
  Report("worker_port_threads_peak", threads_peak);
  Report("worker_port_threads_after", RouterThreads());
  EXPECT_THAT(ScrapeMetric("pagoda_refused_total"), Eq(200));
}

// Row 8/11: reflection is off on the public port unless --enable-reflection.
TEST_F(HostileGrpcTest, ReflectionIsOffByDefault) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::Status status;
  std::promise<void> done;
  generic.UnaryCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                    grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.set_value();
                    });
  done.get_future().wait();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
}

// Rows 10 and 11: a worker whose results carry NaN log-probabilities is dropped, and its call
// is ended so it could reconnect afresh; nothing of it reaches the client, which gets its
// golden tokens from a real worker.
TEST_F(HostileGrpcTest, AWorkerSendingNanLogprobsIsDroppedAndItsCallEnded) {
  WaitForWorkers(0);
  testing::FakeWorker fake(absl::StrCat("127.0.0.1:", worker_port_), kToken);
  ASSERT_TRUE(fake.Connect(testing::ValidHello(Info().model_fingerprint())).accepted());
  fake.Serve(testing::FakeWorker::Mode::kNanLogprob, 5);
  WaitForWorkers(1);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub_->Generate(&context, Greedy(golden_[0].prompt));
  testing::WaitUntil([&] { return fake.ended(); }, std::chrono::seconds(30),
                     "the router ends the broken worker's call");
  StartWorker();
  std::vector<int> ids;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    EXPECT_EQ(response.logprobs_size(), 0) << "no logprobs were asked for";
    ids.insert(ids.end(), response.token_ids().begin(), response.token_ids().end());
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ids, golden_[0].greedy_ids) << "moved to the real worker with nothing of the fake's";
}

}  // namespace
}  // namespace pagoda
