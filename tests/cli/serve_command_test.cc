// `pagoda serve MODEL`: what it hands pagoda-router, and a real one serving the GGUF file with
// nothing else on the command line but its ports.
#include "cli/serve_command.h"

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/serving_fixture.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Plan = std::vector<std::string>;

TEST(ServeArgumentsTest, TheModelComesFirstAndOneWorkerRunsUnlessTold) {
  EXPECT_THAT(std::get<Plan>(ServeArguments({"m.gguf"})),
              ElementsAre("--model=m.gguf", "--spawn-workers=1"));
  EXPECT_THAT(
      std::get<Plan>(ServeArguments({"m.gguf", "--port", "9000", "--http_port=0"})),
      ElementsAre("--model=m.gguf", "--spawn-workers=1", "--port", "9000", "--http_port=0"));
  EXPECT_THAT(std::get<Plan>(ServeArguments({"dir/", "--spawn-workers=2"})),
              ElementsAre("--model=dir/", "--spawn-workers=2"));
  EXPECT_THAT(std::get<Plan>(ServeArguments({"dir/", "--spawn_workers", "3"})),
              ElementsAre("--model=dir/", "--spawn_workers", "3"));
}

TEST(ServeArgumentsTest, HelpListsTheFirstFlagsAndPointsToTheRest) {
  const ServeExit help = std::get<ServeExit>(ServeArguments({"m.gguf", "--help"}));
  EXPECT_EQ(help.code, 0);
  for (const char* flag : {"--http-port=8000", "--port=50051", "--api-key", "--spawn-workers",
                           "pagoda-router --help"}) {
    EXPECT_THAT(help.text, HasSubstr(flag));
  }
}

TEST(ServeArgumentsTest, AMissingOrDoubledModelIsAUsageError) {
  EXPECT_EQ(std::get<ServeExit>(ServeArguments({})).code, 2);
  EXPECT_EQ(std::get<ServeExit>(ServeArguments({"--port=1"})).code, 2);
  const ServeExit twice = std::get<ServeExit>(ServeArguments({"a.gguf", "--model=b.gguf"}));
  EXPECT_EQ(twice.code, 2);
  EXPECT_THAT(twice.text, HasSubstr("--model may not be given too"));
}

// Whether the router behind `client` answers /health with 200 within a minute.
bool WaitForHealth(httplib::Client& client, std::string_view what) {
  return testing::WaitUntil(
      [&] {
        auto r = client.Get("/health");
        return r && r->status == 200;
      },
      std::chrono::seconds(60), what, std::chrono::milliseconds(100));
}

TEST(ServeCommandTest, ServesAGgufFileWithOnlyItsPortsGiven) {
  const int port = FreePort(), worker_port = FreePort(), http_port = FreePort();
  const std::string log = testing::TempDir() + "/serve.log";
  const pid_t pid = testing::StartProcess(
      {testing::BinaryPath("pagoda"), "serve",
       testing::SharedPath("models/stories260K-gguf/stories260K.gguf"), "--host=127.0.0.1",
       absl::StrCat("--port=", port), absl::StrCat("--worker-port=", worker_port),
       absl::StrCat("--http-port=", http_port), "--metrics-port=0"},
      log, log);
  httplib::Client client("127.0.0.1", http_port);
  client.set_connection_timeout(1);
  ASSERT_TRUE(WaitForHealth(client, "pagoda serve's router is ready")) << testing::ReadFile(log);
  const nlohmann::json models = nlohmann::json::parse(client.Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "stories260K");
  EXPECT_EQ(models["data"][0]["meta"]["n_vocab"], 512);
  const auto r = client.Post(
      "/v1/completions",
      R"({"model":"stories260K","prompt":"Once upon a time","max_tokens":8,"temperature":0})",
      "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const nlohmann::json completion = nlohmann::json::parse(r->body);
  EXPECT_EQ(completion["usage"]["completion_tokens"], 8);
  EXPECT_FALSE(completion["choices"][0]["text"].get<std::string>().empty());
  // The router runs in serve's place: its pid takes the signal and exits cleanly.
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::ReadFile(log);
}

// Started by name through PATH, as an installed router is (argv[0] "pagoda-router", which execve
// does not look up), it still finds the pagoda-worker beside it and serves.
TEST(RouterCommandTest, StartedByNameThroughPathItSpawnsItsWorkers) {
  const int port = FreePort(), worker_port = FreePort(), http_port = FreePort();
  const std::string log = testing::TempDir() + "/router_by_name.log";
  const std::string bin_dir =
      std::filesystem::path(testing::BinaryPath("pagoda-router")).parent_path().string();
  const pid_t pid = testing::StartProcess(
      {"/usr/bin/env", absl::StrCat("PATH=", bin_dir, ":/usr/bin:/bin"), "pagoda-router",
       absl::StrCat("--model=", testing::SharedPath("models/stories260K-gguf/stories260K.gguf")),
       "--spawn-workers=1", "--host=127.0.0.1", absl::StrCat("--port=", port),
       absl::StrCat("--worker-port=", worker_port), absl::StrCat("--http-port=", http_port)},
      log, log);
  httplib::Client client("127.0.0.1", http_port);
  client.set_connection_timeout(1);
  EXPECT_TRUE(WaitForHealth(client, "the router's spawned worker joins")) << testing::ReadFile(log);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::ReadFile(log);
}

}  // namespace
}  // namespace pagoda
