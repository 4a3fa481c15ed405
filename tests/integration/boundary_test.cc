// The boundary holds: what a hostile or broken peer can send on either port is refused with a
// status naming the problem, and the router serves on (issue: hostile and broken peers).
// A fake worker speaks worker.proto directly; public calls are plain gRPC.
#include <sys/resource.h>

#include <climits>
#include <filesystem>
#include <utility>

#include "common/process/http_client.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/integration/fake_worker.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class BoundaryTest : public ServingTest {
 protected:
  std::string WorkerAddress() const { return absl::StrCat("127.0.0.1:", worker_port_); }
  std::string Fingerprint() { return Info().model_fingerprint(); }
  // A raw call (the shared client sizes its output by n, which these requests abuse).
  grpc::Status Call(const v1::GenerateRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }
};

TEST_F(BoundaryTest, AHelloOutOfRangeIsRefusedNamingTheFieldAndTheRouterServesOn) {
  WaitForWorkers(0);
  const std::string fingerprint = Fingerprint();
  ASSERT_FALSE(fingerprint.empty());
  struct Case {
    const char* field;
    std::function<void(v1::Hello&)> mutate;
  };
  const std::vector<Case> cases = {
      {"num_blocks", [](v1::Hello& h) { h.set_num_blocks(0); }},
      {"num_blocks", [](v1::Hello& h) { h.set_num_blocks(-1); }},
      {"num_blocks", [](v1::Hello& h) { h.set_num_blocks(50'000'000); }},
      {"block_size", [](v1::Hello& h) { h.set_block_size(0); }},
      {"block_size", [](v1::Hello& h) { h.set_block_size(-16); }},
      {"block_size", [](v1::Hello& h) { h.set_block_size(INT_MAX); }},
      {"max_num_seqs", [](v1::Hello& h) { h.set_max_num_seqs(0); }},
      {"max_num_batched_tokens", [](v1::Hello& h) { h.set_max_num_batched_tokens(0); }},
      {"max_num_batched_tokens", [](v1::Hello& h) { h.set_max_num_batched_tokens(-5); }},
      {"slots",
       [](v1::Hello& h) {
         h.set_num_blocks(1 << 21);
         h.set_block_size(1024);
       }},
      {"kv_cache_dtype", [](v1::Hello& h) { h.set_kv_cache_dtype("bf16\n[forged log line]"); }},
      {"kv_cache_dtype", [](v1::Hello& h) { h.set_kv_cache_dtype(std::string(100, 'f')); }},
  };
  for (const Case& c : cases) {
    v1::Hello hello = testing::ValidHello(fingerprint);
    c.mutate(hello);
    testing::FakeWorker fake(WorkerAddress(), kToken);
    const v1::HelloReply reply = fake.Connect(hello);
    EXPECT_FALSE(reply.accepted()) << hello.ShortDebugString();
    EXPECT_THAT(reply.message(), HasSubstr(c.field)) << hello.ShortDebugString();
    EXPECT_EQ(fake.Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  StartWorker();
  WaitForWorkers(1);
  ExpectGoldenStory();
}

TEST_F(BoundaryTest, ARefusalDoesNotRevealTheRoutersFingerprint) {
  WaitForWorkers(0);
  const std::string fingerprint = Fingerprint();
  testing::FakeWorker fake(WorkerAddress(), kToken);
  const v1::HelloReply reply = fake.Connect(testing::ValidHello("dim=1,layers=1"));
  EXPECT_FALSE(reply.accepted());
  EXPECT_THAT(reply.message(), HasSubstr("different model"));
  EXPECT_THAT(reply.message(), Not(HasSubstr(fingerprint)));
  EXPECT_THAT(reply.message(), Not(HasSubstr("dim=")));
  EXPECT_THAT(fake.Finish().error_message(), Not(HasSubstr("dim=")));
}

TEST_F(BoundaryTest, RequestSizesAreCheckedBeforeAnythingIsAllocated) {
  StartWorker();
  WaitForWorkers(1);
  struct Case {
    const char* field;
    std::function<void(v1::GenerateRequest&)> mutate;
  };
  const std::vector<Case> cases = {
      {"n", [](v1::GenerateRequest& r) { r.set_n(INT_MAX); }},
      {"n", [](v1::GenerateRequest& r) { r.set_n(-1); }},
      {"n", [](v1::GenerateRequest& r) { r.set_n(0); }},
      {"max_tokens", [](v1::GenerateRequest& r) { r.set_max_tokens(INT_MAX); }},
      {"max_tokens", [](v1::GenerateRequest& r) { r.set_max_tokens(INT_MIN); }},
      {"stop_token_ids",
       [](v1::GenerateRequest& r) {
         for (int i = 0; i < 10'000; ++i) r.add_stop_token_ids(1);
       }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = Greedy(golden_[0].prompt);
    c.mutate(request);
    const grpc::Status status = Call(request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(status.error_message(), HasSubstr(c.field));
  }
  ExpectGoldenStory();
}

// Sends `bytes` as the one request message of `method` and returns the call's status.
grpc::Status CallWithRawBytes(const std::shared_ptr<grpc::Channel>& channel,
                              const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&context, method, &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  call->Write(request, grpc::WriteOptions().set_last_message(), reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  return status;
}

TEST_F(BoundaryTest, MalformedRequestBytesAreInvalidArgumentWithAMessage) {
  WaitForWorkers(0);
  const std::string garbage = "\xff\xff\xff\xff\x0f";
  for (const std::string method :
       {"/pagoda.v1.Generation/Generate", "/pagoda.v1.Generation/Tokenize",
        "/pagoda.v1.Generation/GetModelInfo"}) {
    const grpc::Status status = CallWithRawBytes(channel_, method, garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("not a valid")) << method;
  }
  EXPECT_FALSE(Fingerprint().empty());  // and well-formed calls still work
}

TEST_F(BoundaryTest, DeadWorkersLeaveNoMetricSeries) {
  WaitForWorkers(0);
  const std::string fingerprint = Fingerprint();
  for (int i = 0; i < 20; ++i) {
    testing::FakeWorker fake(WorkerAddress(), kToken);
    ASSERT_TRUE(fake.Connect(testing::ValidHello(fingerprint)).accepted());
    fake.Serve(testing::FakeWorker::Mode::kAnswer);
    WaitForWorkers(1);
    fake.Finish();
    WaitForWorkers(0);
  }
  StartWorker();
  WaitForWorkers(1);
  ExpectGoldenStory();
  // Only the live worker (id 20) has series; the 20 that left have none.
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("worker=\"20\""));
  for (int i = 0; i < 20; ++i) {
    EXPECT_THAT(metrics, Not(HasSubstr(absl::StrCat("worker=\"", i, "\""))));
  }
}

TEST_F(BoundaryTest, AWorkerWithoutTheClustersTokenIsRefusedAndLearnsNothing) {
  WaitForWorkers(0);
  const std::string fingerprint = Fingerprint();
  for (const std::string token : {"", "wrong-token", "test-worker-token-but-longer"}) {
    testing::FakeWorker fake(WorkerAddress(), token);
    const v1::HelloReply reply = fake.Connect(testing::ValidHello(fingerprint));
    EXPECT_FALSE(reply.accepted());
    EXPECT_THAT(reply.message(), HasSubstr("token"));
    EXPECT_EQ(fake.Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_THAT(Metrics(), HasSubstr("reason=\"worker_token\"} 3"));
  // A real pagoda-worker started by hand without the token gives up with the reason.
  const pid_t intruder =
      Spawn({testing::BinaryPath("pagoda-worker"), "--router=" + WorkerAddress(),
             "--model=" + testing::Stories260KModel(), "--threads=1", "--kv-cache-mb=8"},
            dir_ + "/intruder.log");
  int status = 0;
  ASSERT_EQ(waitpid(intruder, &status, 0), intruder);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(testing::ReadFile(dir_ + "/intruder.log"), HasSubstr("PAGODA_WORKER_TOKEN"));
  EXPECT_EQ(Info().num_workers(), 0);
  StartWorker();  // with the token
  WaitForWorkers(1);
  ExpectGoldenStory();
}

// The router's own port, without the HAProxy in front by default (--h2-proxy): what these tests
// measure is the router's. Behind HAProxy, a slow reader pauses a few hundred tokens later (its
// buffers: tune.bufsize and the HTTP/2 windows, per stream), and one client address holds at most
// 64 connections (router/link/h2_proxy.h).
class DirectBoundaryTest : public BoundaryTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override { return {"--h2-proxy=off"}; }
};

// A client that stops reading is paused once kMaxUnsentTokens of its tokens wait (and is
// preempted first when KV runs short), so the router does not buffer its whole output and an
// honest client is served meanwhile; when it reads again, its streams finish.
TEST_F(DirectBoundaryTest, AClientThatStopsReadingIsPausedWhileOthersAreServed) {
  StartWorker();
  WaitForWorkers(1);
  grpc::ChannelArguments args;  // a small receive window that never grows
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8192);
  auto slow = v1::Generation::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), args));
  constexpr int kStreams = 8, kN = 8, kMaxTokens = 200;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  for (int i = 0; i < kStreams; ++i) {
    v1::GenerateRequest request = testing::SeededRequest(golden_[i % golden_.size()].prompt, i);
    request.set_n(kN);
    request.set_logprobs(20);
    request.set_max_tokens(kMaxTokens);
    request.set_ignore_eos(true);
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(slow->Generate(contexts.back().get(), request));
  }
  // The slow streams stall: no token is generated for a while, yet their sequences remain.
  // Nothing reports a paused call, so a stall is the token counter unchanged over 300 ms.
  double generated = -1;
  testing::WaitUntil(
      [&] {
        const double before =
            std::exchange(generated, ScrapeMetric("pagoda_generation_tokens_total"));
        return generated > 0 && generated == before;
      },
      std::chrono::seconds(90), "no token is generated for 300 ms (the slow streams stall)",
      std::chrono::milliseconds(300));
  EXPECT_LT(generated, kStreams * kN * kMaxTokens / 2) << "the slow streams were not paused";
  ExpectGoldenStory();  // an honest client is served meanwhile
  EXPECT_GT(
      ScrapeMetric("pagoda_num_requests_running") + ScrapeMetric("pagoda_num_requests_waiting"), 0);
  // Reading again resumes them, to the last token.
  for (int i = 0; i < kStreams; ++i) {
    std::vector<int> tokens(kN, 0);
    v1::GenerateResponse response;
    while (readers[i]->Read(&response)) tokens[response.index()] += response.token_ids_size();
    const grpc::Status status = readers[i]->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_THAT(tokens, ::testing::Each(kMaxTokens));
  }
}

// Idle connections hold descriptors: the router raises its soft limit (1024 on many machines)
// to the hard one at start, so more idle connections than that do not stop it accepting.
class FileLimitTest : public DirectBoundaryTest {
 protected:
  void SetUp() override {
    rlimit limit;
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
    // The usual soft limit, or half the hard one where that is lower: either way the router
    // must raise it to serve num_idle_ connections.
    const rlim_t soft = std::min<rlim_t>(1024, limit.rlim_max / 2);
    ASSERT_GE(soft, 128u) << "hard descriptor limit " << limit.rlim_max;
    soft_ = soft;
    num_idle_ = static_cast<int>(soft) + 76;
    const rlimit low = {soft, limit.rlim_max};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);  // the router inherits the low soft limit
    DirectBoundaryTest::SetUp();
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);  // this test opens num_idle_ sockets
  }
  rlim_t soft_ = 0;  // the limit the router starts with
  int num_idle_ = 0;
};

TEST_F(FileLimitTest, IdleConnectionsPastTheSoftLimitDoNotStopTheRouter) {
  StartWorker();
  WaitForWorkers(1);
  const std::string limits = testing::ReadFile(absl::StrCat("/proc/", router_, "/limits"));
  EXPECT_THAT(limits, Not(::testing::ContainsRegex(absl::StrCat("Max open files +", soft_, " "))));
  std::vector<int> idle;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port_);
  for (int i = 0; i < num_idle_; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    idle.push_back(fd);
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto fresh = v1::Generation::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), args));
  const testing::StreamOutput out = testing::Generate(*fresh, Greedy(golden_[0].prompt));
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  for (int fd : idle) close(fd);
}

// Same shape, other weights (a fine-tune of the same base model): a different model.
TEST_F(BoundaryTest, AWorkerWithOtherWeightsOfTheSameShapeIsRefused) {
  WaitForWorkers(0);
  EXPECT_THAT(Fingerprint(), HasSubstr(",weights="));
  std::string weights = testing::ReadFile(testing::Stories260KModel());
  weights[weights.size() - 5] ^= 0x10;  // one bit of the last weight
  const std::string tuned = dir_ + "/stories260K-tuned.bin";
  testing::WriteFile(tuned, weights);
  const pid_t worker = StartWorker(tuned);
  EXPECT_EQ(ExitCode(worker), 1);
  EXPECT_THAT(testing::ReadFile(dir_ + "/worker0.log"), HasSubstr("different model"));
  StartWorker();
  WaitForWorkers(1);
  ExpectGoldenStory();
}

// A worker that heartbeats but never answers a step (a hung forward pass) is failed over like
// a dead one once --step-timeout-s passes; its request finishes on a healthy worker.
class StepTimeoutTest : public BoundaryTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override { return {"--step-timeout-s=1"}; }
};

TEST_F(StepTimeoutTest, AHungWorkersRequestsMoveToAHealthyOne) {
  WaitForWorkers(0);
  testing::FakeWorker hung(WorkerAddress(), kToken);
  ASSERT_TRUE(hung.Connect(testing::ValidHello(Fingerprint())).accepted());
  hung.Serve(testing::FakeWorker::Mode::kSilent);
  WaitForWorkers(1);
  testing::StreamOutput out;
  std::thread client([&] { out = Generate(Greedy(golden_[0].prompt)); });
  testing::WaitUntil([&] { return hung.num_steps_seen() > 0; }, std::chrono::seconds(30),
                     "the hung worker is sent a step");
  EXPECT_GT(hung.num_prompts_seen(), 0);
  StartWorker();
  client.join();
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], golden_[0].greedy_ids);
  EXPECT_EQ(hung.Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(Info().num_workers(), 1);
}

// TLS on the worker port with certificates made here: a worker with a client certificate the
// CA signed serves; a plaintext peer, or a TLS one without a client certificate, cannot join.
class TlsTest : public BoundaryTest {
 protected:
  static void SetUpTestSuite() {
    certs_ = new std::string(testing::TempDir());
    const std::string& d = *certs_;
    testing::WriteFile(d + "/san.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    auto run = [](const std::vector<std::string>& argv) {
      const testing::CommandResult r = testing::RunCommand(argv);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    };
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    run(with({"/usr/bin/openssl", "req", "-x509", "-days", "1", "-subj", "/CN=pagoda-test-ca",
              "-keyout", d + "/ca.key", "-out", d + "/ca.pem"},
             ec));
    for (const std::string name : {"router", "worker"}) {
      run(with({"/usr/bin/openssl", "req", "-subj", "/CN=localhost", "-keyout",
                d + "/" + name + ".key", "-out", d + "/" + name + ".csr"},
               ec));
      run({"/usr/bin/openssl", "x509", "-req", "-days", "1", "-in", d + "/" + name + ".csr", "-CA",
           d + "/ca.pem", "-CAkey", d + "/ca.key", "-CAcreateserial", "-extfile", d + "/san.cnf",
           "-out", d + "/" + name + ".pem"});
    }
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*certs_);
    delete certs_;
  }
  std::vector<std::string> ExtraRouterFlags() const override {
    return {"--tls-cert=" + *certs_ + "/router.pem", "--tls-key=" + *certs_ + "/router.key",
            "--tls-ca=" + *certs_ + "/ca.pem"};
  }
  static std::string* certs_;
};
std::string* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, OnlyAWorkerWithACertificateTheCaSignedJoins) {
  WaitForWorkers(0);
  const std::string d = *certs_;
  {
    testing::FakeWorker plaintext(WorkerAddress(), kToken);
    EXPECT_FALSE(plaintext.Connect(testing::ValidHello(Fingerprint())).accepted());
  }
  {
    grpc::SslCredentialsOptions no_client_cert;
    no_client_cert.pem_root_certs = testing::ReadFile(d + "/ca.pem");
    testing::FakeWorker anonymous(WorkerAddress(), kToken, grpc::SslCredentials(no_client_cert));
    EXPECT_FALSE(anonymous.Connect(testing::ValidHello(Fingerprint())).accepted());
  }
  StartWorker("", {"--tls-ca=" + d + "/ca.pem", "--tls-cert=" + d + "/worker.pem",
                   "--tls-key=" + d + "/worker.key"});
  WaitForWorkers(1);
  ExpectGoldenStory();
}

// --api-key guards every public call; health stays open. A router started with
// --spawn-workers and no --worker-token makes its own and hands it to its workers.
TEST(ApiKeyTest, EveryCallNeedsTheKeyButHealthDoesNot) {
  const std::string dir = testing::TempDir();
  const int port = FreePort();
  const pid_t router =
      Spawn({testing::BinaryPath("pagoda-router"), absl::StrCat("--port=", port),
             absl::StrCat("--worker-port=", FreePort()), "--host=127.0.0.1",
             "--model=" + testing::Stories260KModel(),
             "--tokenizer=" + testing::Stories260KTokenizer(), "--max-model-len=257",
             "--spawn-workers=1", "--worker-kv-cache-mb=8", "--api-key=sesame", "--http-port=0"},
            dir + "/router.log");
  const std::string address = absl::StrCat("127.0.0.1:", port);
  ASSERT_TRUE(testing::WaitForHealth(address, "", testing::kServing)) << dir;
  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const std::vector<testing::GoldenCase> golden = testing::LoadGoldenCases();
  auto generate = [&](const std::string& key) {
    grpc::ClientContext context;
    if (!key.empty()) context.AddMetadata("authorization", key);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = stub->Generate(&context, testing::GreedyRequest(golden[0].prompt));
    std::vector<int> ids;
    v1::GenerateResponse response;
    while (reader->Read(&response))
      ids.insert(ids.end(), response.token_ids().begin(), response.token_ids().end());
    return std::make_pair(reader->Finish(), ids);
  };
  for (const std::string bad : {"", "Bearer wrong", "sesame", "Bearer sesame2", "Bearer SESAME"}) {
    EXPECT_EQ(generate(bad).first.error_code(), grpc::StatusCode::UNAUTHENTICATED) << bad;
  }
  // The scheme is case-insensitive (RFC 9110), the key is not.
  for (const std::string good : {"Bearer sesame", "bearer sesame"}) {
    const auto [status, ids] = generate(good);
    EXPECT_TRUE(status.ok()) << good << ": " << status.error_message();
    EXPECT_EQ(ids, golden[0].greedy_ids);
  }
  grpc::ClientContext info_context;
  v1::ModelInfo info;
  EXPECT_EQ(stub->GetModelInfo(&info_context, v1::GetModelInfoRequest(), &info).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext tokenize_context;
  v1::TokenizeRequest tokenize;
  tokenize.set_text("hello");
  v1::TokenizeResponse tokens;
  EXPECT_EQ(stub->Tokenize(&tokenize_context, tokenize, &tokens).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(testing::CheckHealth(address, "liveness"), testing::kServing);
  kill(router, SIGKILL);
  waitpid(router, nullptr, 0);
}

}  // namespace
}  // namespace pagoda
