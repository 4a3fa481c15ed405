// What a newcomer sees first: --help and --version of every binary, and the client commands
// pointed at a router that is not there. Real processes, as a user runs them.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using testing::CommandResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using testing::RunCommand;

// A loopback port nobody listens on (bound, then released).
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct Binary {
  std::string name;
  std::vector<std::string> flags;  // some of its flags, as the README spells them
};

const std::vector<Binary>& Binaries() {
  static const auto* binaries = new std::vector<Binary>{
      {"pagoda", {"--model=", "--max-tokens=", "--prompts-file=", "--stop=", "--num-prompts="}},
      {"pagoda-router",
       {"--model=", "--worker-port=", "--spawn-workers=", "--served-model-name=",
        "--metrics-port="}},
      {"pagoda-worker", {"--router=", "--model=", "--kv-cache-mb=", "--drain-timeout-s="}},
      {"pagoda-make-model", {"--shape=", "--out=", "--format=", "--dtype="}},
  };
  return *binaries;
}

TEST(UsageTest, EveryBinaryListsItsOwnFlagsWithDashes) {
  for (const Binary& b : Binaries()) {
    const CommandResult help = RunCommand({testing::BinaryPath(b.name), "--help"});
    EXPECT_EQ(help.exit_code, 0) << b.name << ": " << help.err;
    for (const std::string& flag : b.flags) EXPECT_THAT(help.out, HasSubstr(flag)) << b.name;
    EXPECT_THAT(help.out, Not(HasSubstr("SetProgramUsageMessage"))) << b.name;
    EXPECT_THAT(help.out, Not(HasSubstr("--flagfile"))) << b.name << ": Abseil's own flags";
    // No flag spelled with underscores: "  --max_tokens" would start a line.
    EXPECT_THAT(help.out, Not(ContainsRegex("\n  --[a-z-]*_"))) << b.name;
    EXPECT_EQ(RunCommand({testing::BinaryPath(b.name), "-h"}).out, help.out) << b.name;
  }
}

TEST(UsageTest, EveryBinaryPrintsItsVersionAndCommit) {
  for (const Binary& b : Binaries()) {
    const CommandResult version = RunCommand({testing::BinaryPath(b.name), "--version"});
    EXPECT_EQ(version.exit_code, 0) << b.name;
    EXPECT_THAT(
        version.out,
        MatchesRegex(b.name +
                     " [0-9]+\\.[0-9]+\\.[0-9]+ \\(git ([0-9a-f]{7,}(-dirty)?|unknown)\\)\n"));
    EXPECT_THAT(version.out, Not(HasSubstr("Debug build")));
  }
}

TEST(UsageTest, ACommandsHelpListsOnlyTheFlagsItTakes) {
  const CommandResult generate = RunCommand({testing::BinaryPath("pagoda"), "generate", "--help"});
  EXPECT_EQ(generate.exit_code, 0);
  // Flag entries start a line; the synopsis above them names every command's flags.
  for (const char* flag : {"--server=", "--stop=", "--stop-token-ids=", "--logprobs=",
                           "--temperature=", "--timeout="}) {
    EXPECT_THAT(generate.out, HasSubstr(std::string("\n  ") + flag));
  }
  EXPECT_THAT(generate.out, Not(HasSubstr("\n  --kv-cache-mb=")));  // run's
  EXPECT_THAT(generate.out, Not(HasSubstr("\n  --num-prompts=")));  // bench's
  const CommandResult bench = RunCommand({testing::BinaryPath("pagoda"), "bench", "--help"});
  EXPECT_THAT(bench.out, HasSubstr("\n  --request-rate="));
  EXPECT_THAT(bench.out, Not(HasSubstr("\n  --stop=")));
}

// This round's serving flags, where a user looks for them: the HTTP API's (--pooling and the
// CORS flags) on the router, which serves it; --compute-dtype on `pagoda run` and on the
// router for the workers it spawns. `pagoda run` serves no HTTP, so it names the API's flags
// as unknown rather than taking them and doing nothing.
TEST(UsageTest, ThisRoundsServingFlagsAreWhereTheyApply) {
  const CommandResult router = RunCommand({testing::BinaryPath("pagoda-router"), "--help"});
  for (const char* flag :
       {"--pooling=", "--allowed-origins=", "--allowed-methods=", "--allowed-headers=",
        "--allow-credentials", "--worker-compute-dtype="}) {
    EXPECT_THAT(router.out, HasSubstr(std::string("\n  ") + flag));
  }
  const CommandResult run = RunCommand({testing::BinaryPath("pagoda"), "run", "--help"});
  EXPECT_THAT(run.out, HasSubstr("\n  --compute-dtype="));
  for (const char* flag : {"pooling", "allowed-origins"}) {
    const CommandResult r =
        RunCommand({testing::BinaryPath("pagoda"), "run", "--model=/nonexistent", "--prompt=x",
                    absl::StrCat("--", flag, "=x")});
    EXPECT_NE(r.exit_code, 0) << flag;
    EXPECT_THAT(r.err, HasSubstr("Unknown command line flag")) << flag << ": " << r.err;
  }
}

TEST(UsageTest, GenerateWithoutARouterFailsAtOnceNamingTheAddress) {
  const std::string server = "127.0.0.1:" + std::to_string(UnusedPort());
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = RunCommand(
      {testing::BinaryPath("pagoda"), "generate", "--server=" + server, "--prompt=Once upon"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("error: cannot connect to " + server + ": UNAVAILABLE: "));
  EXPECT_THAT(r.err, Not(HasSubstr("(14)")));
  EXPECT_EQ(r.out, "") << "the prompt is echoed only once the call streams";
}

TEST(UsageTest, BenchWithoutARouterFailsAtOnceNamingTheAddress) {
  const std::string server = "127.0.0.1:" + std::to_string(UnusedPort());
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r =
      RunCommand({testing::BinaryPath("pagoda"), "bench", "--server=" + server});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("error: cannot connect to " + server + ": UNAVAILABLE: "));
  EXPECT_THAT(r.err, Not(HasSubstr("Deadline Exceeded")));
}

TEST(UsageTest, BadStopTokenIdsAreRefusedBeforeAnyCall) {
  const CommandResult r = RunCommand(
      {testing::BinaryPath("pagoda"), "generate", "--prompt=x", "--stop-token-ids=1,two"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--stop-token-ids: 'two' is not a token id"));
}

}  // namespace
}  // namespace pagoda
