// A whole router in this process, on free loopback ports, serving through a local worker it
// spawned (the one-command deployment), then shut down.
#include "router/router_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/process/http_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/integration/serving_client.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;

RouterServerOptions Stories260KOptions() {
  RouterServerOptions o;
  o.model = testing::Stories260KModel();
  o.tokenizer = testing::Stories260KTokenizer();
  o.host = "127.0.0.1";
  o.port = 0;  // any free port, each
  o.worker_port = 0;
  o.http_port = 0;
  o.metrics_port = 0;
  o.cluster.engine.max_model_len = 257;  // the golden continuations' length
  return o;
}

// Blocks until grpc.health.v1 at `address` says `service` is SERVING (Watch streams each
// change); false when the stream ends first or after 120 s.
bool WatchUntilServing(const std::string& address, const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  auto reader = health->Watch(&ctx, request);
  grpc::health::v1::HealthCheckResponse response;
  while (reader->Read(&response)) {
    if (response.status() == testing::kServing) {
      ctx.TryCancel();
      return true;
    }
  }
  return false;
}

TEST(RouterServerTest, ServesThroughASpawnedWorkerAndShutsDownCleanly) {
  RouterServerOptions options = Stories260KOptions();
  options.local_workers.num_workers = 1;
  options.local_workers.binary = testing::BinaryPath("pagoda-worker");
  options.local_workers.kv_cache_mb = "8";
  options.local_workers.threads = 1;
  absl::StatusOr<std::unique_ptr<RouterServer>> server = RouterServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  RouterServer& router = **server;
  ASSERT_GT(router.port(), 0);
  ASSERT_GT(router.worker_port(), 0);
  ASSERT_GT(router.http_port(), 0);
  ASSERT_GT(router.metrics_port(), 0);
  std::thread run([&router] { router.Run(); });

  const std::string address = absl::StrCat("127.0.0.1:", router.port());
  EXPECT_EQ(testing::CheckHealth(address, "liveness"), testing::kServing);
  ASSERT_TRUE(WatchUntilServing(address, "")) << "the spawned worker never joined";
  EXPECT_EQ(HttpGet("127.0.0.1", router.metrics_port(), "/health").status, 200);
  EXPECT_EQ(HttpGet("127.0.0.1", router.http_port(), "/health").status, 200);

  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const testing::GoldenCase golden = testing::LoadGoldenCases()[0];
  const testing::StreamOutput out = testing::Generate(*stub, testing::GreedyRequest(golden.prompt));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.ids[0], golden.greedy_ids);
  EXPECT_EQ(testing::GetModelInfo(*stub).num_workers(), 1);
  const HttpResult metrics = HttpGet("127.0.0.1", router.metrics_port(), "/metrics");
  EXPECT_THAT(metrics.body, HasSubstr("pagoda_num_workers{model_name=\"stories260K\"} 1"));
  // Each worker's own figures, as the page's cluster view reads them.
  for (const char* name :
       {"pagoda_worker_num_requests_running", "pagoda_worker_num_requests_waiting",
        "pagoda_worker_kv_blocks_used", "pagoda_worker_kv_blocks",
        "pagoda_worker_prefix_cache_queries_total", "pagoda_worker_prefix_cache_hits_total",
        "pagoda_worker_kv_transfer_blocks_in_total", "pagoda_worker_kv_tokens"}) {
    EXPECT_THAT(metrics.body,
                HasSubstr(absl::StrCat(name, "{model_name=\"stories260K\",worker=\"")))
        << name;
  }

  router.Shutdown();
  run.join();  // Run returns once Shutdown has finished
  EXPECT_EQ(testing::CheckHealth(address, ""), grpc::health::v1::HealthCheckResponse::UNKNOWN)
      << "nothing answers once the server stopped";
  EXPECT_EQ(HttpGet("127.0.0.1", router.http_port(), "/health", 1000).status, -1);
  router.Shutdown();  // a second call returns at once
}

// The page at `/` through the real HTTP server: behind the key (Basic's password), revalidated
// by its ETag, and gone with --no-web-ui. No worker is needed to serve it.
TEST(RouterServerTest, ThePageIsBehindTheKeyAndOffWithNoWebUi) {
  RouterServerOptions options = Stories260KOptions();
  options.api_key = "s3cret";
  absl::StatusOr<std::unique_ptr<RouterServer>> server = RouterServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->http_port());
  httplib::Result refused = client.Get("/");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_THAT(refused->get_header_value("WWW-Authenticate"), HasSubstr("Basic realm=\"pagoda\""));

  client.set_basic_auth("anyone", "s3cret");
  httplib::Result page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(page->get_header_value("Content-Security-Policy"), HasSubstr("default-src 'none'"));
  const std::string etag = page->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  httplib::Result again = client.Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  httplib::Result script = client.Get("/ui/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  httplib::Result missing = client.Get("/ui/missing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The API takes the bearer header only (head_gate.h).
  httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  (*server)->Shutdown();

  options.web_ui = false;
  server = RouterServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client off("127.0.0.1", (*server)->http_port());
  off.set_bearer_token_auth("s3cret");
  for (const char* path : {"/", "/ui/app.js"}) {
    httplib::Result r = off.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
  (*server)->Shutdown();
}

TEST(RouterServerTest, ShutdownBeforeRunMakesRunReturnAtOnce) {
  absl::StatusOr<std::unique_ptr<RouterServer>> server = RouterServer::Start(Stories260KOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Shutdown();
  (*server)->Run();
}

TEST(RouterServerTest, OptionsThatCanNeverWorkAreRefusedNamingTheFlag) {
  struct Case {
    const char* flag;
    void (*spoil)(RouterServerOptions&);
  };
  const Case cases[] = {{"--model", [](RouterServerOptions& o) { o.model.clear(); }},
                        {"--tls-ca", [](RouterServerOptions& o) { o.worker_tls.ca = "pem"; }},
                        {"--worker-weight-dtype=fp8",
                         [](RouterServerOptions& o) { o.local_workers.weight_dtype = "fp8"; }},
                        {"--worker-kv-cache-dtype=int4",
                         [](RouterServerOptions& o) { o.local_workers.kv_cache_dtype = "int4"; }},
                        {"--spawn-workers", [](RouterServerOptions& o) {
                           o.worker_tls = {"cert", "key", ""};
                           o.local_workers.num_workers = 1;
                         }}};
  for (const Case& c : cases) {
    RouterServerOptions options = Stories260KOptions();
    c.spoil(options);
    const absl::Status checked = RouterServer::CheckOptions(options);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(checked.message(), HasSubstr(c.flag));
    EXPECT_EQ(RouterServer::Start(options).status(), checked) << c.flag;
  }
}

TEST(RouterServerTest, OneModelsFlagsWithSeveralModelsAreRefusedNamingTheFlag) {
  for (const char* flag : {"--tokenizer", "--served-model-name", "--chat-template"}) {
    RouterServerOptions options = Stories260KOptions();
    options.models = {{.path = options.model, .name = "a"},
                      {.path = testing::SharedPath("models/stories260K-hf"), .name = "b"}};
    options.tokenizer.clear();
    if (std::string_view(flag) == "--tokenizer") options.tokenizer = "tok512.bin";
    if (std::string_view(flag) == "--served-model-name") options.served_model_name = "x";
    if (std::string_view(flag) == "--chat-template") {
      options.chat_template = *jinja::ChatTemplate::Create("{{ messages[0].content }}");
    }
    const absl::Status checked = RouterServer::CheckOptions(options);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_THAT(checked.message(), HasSubstr(flag));
  }
}

TEST(RouterServerTest, TheSameModelTwiceOrTwoNamesAlikeStopStart) {
  RouterServerOptions options = Stories260KOptions();
  options.tokenizer.clear();                 // one model's flag: each of several takes its own
  options.cluster.engine.max_model_len = 0;  // each its own context (the GGUF's is 128)
  const std::string hf = testing::SharedPath("models/stories260K-hf");
  options.models = {{.path = hf, .name = "a"}, {.path = hf, .name = "b"}};
  absl::Status status = RouterServer::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("a and b are the same model"));

  options.models = {
      {.path = hf, .name = "a"},
      {.path = testing::SharedPath("models/stories260K-gguf/stories260K.gguf"), .name = "a"}};
  status = RouterServer::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("two models are named `a`"));
}

TEST(RouterServerTest, AMaxModelLenAboveTheModelsContextStopsStartNamingTheFlag) {
  RouterServerOptions options = Stories260KOptions();
  options.cluster.engine.max_model_len = 513;  // stories260K was trained on 512
  const absl::Status status = RouterServer::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("--max-model-len=513 is above the model's context of 512 tokens"));
}

TEST(RouterServerTest, AModelThatDoesNotLoadStopsStartWithItsError) {
  RouterServerOptions options = Stories260KOptions();
  options.model = testing::TempDir() + "/missing.bin";
  const absl::Status status = RouterServer::Start(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("missing.bin"));
}

TEST(RouterServerTest, APortAnotherSocketHoldsStopsStartNamingIt) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);  // without SO_REUSEPORT, unlike gRPC's
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  RouterServerOptions options = Stories260KOptions();
  options.port = ntohs(addr.sin_port);
  const absl::Status status = RouterServer::Start(options).status();
  close(fd);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), absl::StrCat("cannot listen on port ", options.port));
}

}  // namespace
}  // namespace pagoda
