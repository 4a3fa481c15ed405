// Shared helpers for Pagoda's tests: where the shared models and golden files live, and the
// golden outputs of llama2.c's run.c.
#ifndef PAGODA_TESTS_TEST_UTIL_H_
#define PAGODA_TESTS_TEST_UTIL_H_

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::testing {

// `rel` under the shared data folder: $PAGODA_SHARED, else ../shared beside the source tree.
std::string SharedPath(const std::string& rel);
std::string Stories260KModel();      // stories260K.bin
std::string Stories260KTokenizer();  // tok512.bin
// The built binaries (build/bin).
std::string BinaryPath(const std::string& name);
// A fresh directory for the running test's files, the same one on every call during a test
// (made by mkdtemp, so no earlier run's files can be in it), removed when the test passes
// and kept, with its path printed, when it fails.
std::string TempDir();

struct GoldenCase {
  std::string prompt;
  std::vector<int> prompt_ids;         // run.c's encoding with tok512.bin, BOS first
  std::vector<int> greedy_ids;         // run.c's greedy continuation
  int steps_total = 0;                 // run.c's -n: positions computed
  std::string stdout_text;             // what run.c printed
  std::vector<int> llama2_prompt_ids;  // the 32000-token tokenizer's encoding, BOS first
};
std::vector<GoldenCase> LoadGoldenCases();

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs `argv` (no shell) and collects its output.
CommandResult RunCommand(const std::vector<std::string>& argv);
// Starts `argv` (no shell) with stdout and stderr going to files (the same one if equal).
// Returns its pid; the caller waits for it.
int StartProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
                 const std::string& stderr_path);

// Polls `condition` every `poll` until it holds or `timeout` passes; then fails the running test
// with "timed out waiting until <what>". Returns whether it held. For state another thread or
// process changes and that has nothing to wait on (a counter, a gauge); never as a sleep. A
// condition that costs a call to a server (a health check, a /metrics scrape) takes a longer
// `poll`, so the waiting does not load the machine it waits on.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::string_view what,
               std::chrono::milliseconds poll = std::chrono::milliseconds(1));

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_TEST_UTIL_H_
