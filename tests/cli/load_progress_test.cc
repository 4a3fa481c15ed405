// Loading weights shows its progress where a person watches (a terminal: one line redrawn in
// place, ending at 100%), and writes no terminal codes where a program reads (a pipe).
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace pagoda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> RunArgs() {
  return {testing::BinaryPath("pagoda"),
          "run",
          "--model=" + testing::Stories260KModel(),
          "--tokenizer=" + testing::Stories260KTokenizer(),
          "--prompt=Once upon a time",
          "--max-tokens=4"};
}

// Runs `argv` with a pseudo-terminal as its stdin, stdout and stderr; returns what it wrote.
std::string RunOnATerminal(const std::vector<std::string>& argv, int* exit_code) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0);
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(terminal, buffer, sizeof(buffer));
    if (n <= 0) break;  // EIO once the child has closed its side
    out.append(buffer, static_cast<size_t>(n));
  }
  close(terminal);
  int status = 0;
  waitpid(pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST(LoadProgressTest, ATerminalSeesTheLoadRedrawnInPlaceToOneHundredPercent) {
  int exit_code = -1;
  const std::string out = RunOnATerminal(RunArgs(), &exit_code);
  EXPECT_EQ(exit_code, 0) << out;
  EXPECT_THAT(out, HasSubstr("\rloading weights: "));
  EXPECT_THAT(out, HasSubstr(" MB (100%) in "));
}

TEST(LoadProgressTest, APipeGetsNoTerminalCodes) {
  const testing::CommandResult r = testing::RunCommand(RunArgs());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("\r")));
  EXPECT_THAT(r.err, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(r.out, Not(HasSubstr("loading weights")));
}

}  // namespace
}  // namespace pagoda
