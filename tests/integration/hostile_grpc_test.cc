// Issue 23's gRPC, scheduler and worker-link rows: a real router on loopback under the attack,
// then an honest request that must still get its golden tokens (and, at TearDown, every KV
// block back). Raw HTTP/2 frames for what no real client sends. Each test is bounded in time;
// memory and thread figures go to the log (RecordProperty) for the closing note.
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/integration/fake_worker.h"
#include "tests/integration/raw_h2.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;

constexpr char kGenerate[] = "/pagoda.v1.Generation/Generate";

// A field of /proc/<pid>/status (VmRSS in kB, Threads), or -1.
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream value(line.substr(field.size() + 1));
    int64_t v = -1;
    value >> v;
    return v;
  }
  return -1;
}

class HostileGrpcTest : public ServingTest {
 protected:
  int64_t RouterRssMb() { return ProcStatus(router_, "VmRSS") / 1024; }
  int64_t RouterThreads() { return ProcStatus(router_, "Threads"); }
  void Report(const std::string& key, int64_t value) {
    LOG(INFO) << key << " = " << value;
    RecordProperty(key, static_cast<int>(value));
  }

  // `streams` calls of `n` samples each, on one connection whose client never reads: its
  // receive window is small and never grows, so the router's writes stall and the calls pause.
  struct Stalled {
    std::unique_ptr<v1::Generation::Stub> stub;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  };
  Stalled StartStalledReaders(int streams, int n) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8192);
    Stalled s;
    s.stub = v1::Generation::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), args));
    for (int i = 0; i < streams; ++i) {
      v1::GenerateRequest request = testing::SeededRequest(golden_[i % golden_.size()].prompt, i);
      request.set_n(n);
      request.set_logprobs(20);  // big responses: the window fills in a few tokens
      request.set_max_tokens(200);
      request.set_ignore_eos(true);
      s.contexts.push_back(std::make_unique<grpc::ClientContext>());
      s.contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(1));
      s.readers.push_back(s.stub->Generate(s.contexts.back().get(), request));
    }
    // Stalled: the token counter stands still for 300 ms.
    double generated = -1;
    testing::WaitUntil(
        [&] {
          const double before =
              std::exchange(generated, ScrapeMetric("pagoda_generation_tokens_total"));
          return generated > 0 && generated == before;
        },
        std::chrono::seconds(90), "the stalled readers' calls pause",
        std::chrono::milliseconds(300));
    return s;
  }
};

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

class StallTimeoutTest : public HostileGrpcTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override { return {"--stall-timeout-s=2"}; }
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

// Row 2: HTTP/2 rapid reset (CVE-2023-44487): streams opened and reset at once on the public
// port. gRPC 1.51 has no per-connection reset budget; this measures what the port's limits
// leave (the deploy manifests put a proxy with rapid-reset protection in front) and checks
// the router survives and serves on.
TEST_F(HostileGrpcTest, RapidResetLeavesTheRouterServing) {
  StartWorker();
  WaitForWorkers(1);
  ExpectGoldenStory();
  const int64_t rss_before = RouterRssMb();
  auto h2 = testing::RawH2Connection::Open(port_);
  ASSERT_NE(h2, nullptr);
  v1::GenerateRequest request = Greedy(golden_[0].prompt);
  const std::string message = request.SerializeAsString();
  const std::string block = testing::HpackLiterals(testing::GrpcRequestHeaders(kGenerate));
  int64_t rss_peak = rss_before;
  int sent = 0;
  const absl::Time end = absl::Now() + absl::Seconds(10);
  for (uint32_t id = 1; id < (1u << 31) && absl::Now() < end && sent < 100'000; id += 2) {
    if (!h2->SendHeaders(id, block, false, true) || !h2->SendRstStream(id)) break;
    ++sent;
    if (sent % 256 == 0) h2->Pump(absl::ZeroDuration());
    if (sent % 5000 == 0) rss_peak = std::max(rss_peak, RouterRssMb());
  }
  rss_peak = std::max(rss_peak, RouterRssMb());
  const auto honest_start = std::chrono::steady_clock::now();
  ExpectGoldenStory();
  const auto honest_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - honest_start)
                             .count();
  h2.reset();
  ExpectGoldenStory();
  Report("rapid_reset_streams", sent);
  Report("rapid_reset_rss_before_mb", rss_before);
  Report("rapid_reset_rss_peak_mb", rss_peak);
  Report("rapid_reset_rss_after_mb", RouterRssMb());
  Report("rapid_reset_honest_ms_after", honest_ms);
  EXPECT_GT(sent, 0);
}

// Row 9: a header block continued by CONTINUATION frames that never end. The public port's
// metadata bound (16 KiB) must end the connection long before the 64 MiB this would send.
TEST_F(HostileGrpcTest, EndlessContinuationFramesAreCutOff) {
  StartWorker();
  WaitForWorkers(1);
  const int64_t rss_before = RouterRssMb();
  auto h2 = testing::RawH2Connection::Open(port_, 65535, absl::Seconds(2));
  ASSERT_NE(h2, nullptr);
  std::string block = testing::HpackLiterals(testing::GrpcRequestHeaders(kGenerate));
  ASSERT_TRUE(h2->SendHeaders(1, block, false, false));
  const std::string filler =
      testing::HpackLiterals({{"x-filler", std::string(16 * 1024 - 32, 'a')}});
  int64_t sent_bytes = 0;
  while (sent_bytes < (int64_t{64} << 20) && h2->SendContinuation(1, filler, false)) {
    sent_bytes += static_cast<int64_t>(filler.size());
    if (sent_bytes % (1 << 20) < static_cast<int64_t>(filler.size())) {
      if (h2->Pump(absl::ZeroDuration()).closed) break;
    }
  }
  const int64_t rss_peak = RouterRssMb();
  h2->Pump(absl::Seconds(1));
  Report("continuation_bytes_sent", sent_bytes);
  Report("continuation_rss_before_mb", rss_before);
  Report("continuation_rss_peak_mb", rss_peak);
  EXPECT_LT(sent_bytes, int64_t{64} << 20) << "the router kept buffering the header block";
  EXPECT_TRUE(h2->seen().closed || h2->seen().goaways > 0 || h2->seen().rst_streams > 0);
  h2.reset();
  ExpectGoldenStory();
}

// Row 8: calls on the worker port that never send their Hello hold a router thread only until
// the Hello deadline (10 s), and calls without the token none at all; a real worker joins
// meanwhile and afterwards, and the thread count comes back.
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
  testing::WaitUntil([&] { return RouterThreads() < threads_peak; }, std::chrono::seconds(30),
                     "the idle calls' threads end");
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
