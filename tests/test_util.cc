#include "tests/test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "glog/logging.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace pagoda::testing {

std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("PAGODA_SHARED");
  const std::string root = env != nullptr ? env : PAGODA_DEFAULT_SHARED_DIR;
  return root + "/" + rel;
}

std::string Stories260KModel() { return SharedPath("models/stories260K/stories260K.bin"); }
std::string Stories260KTokenizer() { return SharedPath("models/stories260K/tok512.bin"); }
std::string BinaryPath(const std::string& name) { return std::string(PAGODA_BIN_DIR) + "/" + name; }

namespace {

std::string MakeTempDir(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');  // parameterized tests' names hold '/'
  std::string dir =
      (std::filesystem::temp_directory_path() / ("pagoda_test_" + name + "_XXXXXX")).string();
  CHECK(mkdtemp(dir.data()) != nullptr) << "mkdtemp " << dir << ": " << strerror(errno);
  return dir;
}

std::mutex temp_dir_mu;
std::string temp_dir;  // the running test's, or empty

class RemoveTempDirAfterEachTest : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(temp_dir_mu);
    if (temp_dir.empty()) return;
    if (info.result()->Passed()) {
      std::error_code ignored;
      std::filesystem::remove_all(temp_dir, ignored);
    } else {
      std::cerr << "the test's files are kept in " << temp_dir << "\n";
    }
    temp_dir.clear();
  }
};

const bool temp_dir_listener_added = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveTempDirAfterEachTest);
  return true;
}();

}  // namespace

std::string TempDir() {
  std::lock_guard<std::mutex> lock(temp_dir_mu);
  if (!temp_dir.empty()) return temp_dir;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir =
      MakeTempDir(info ? std::string(info->test_suite_name()) + "." + info->name() : "suite");
  if (info == nullptr) return dir;  // outside a test (SetUpTestSuite): its caller removes it
  temp_dir = dir;
  return temp_dir;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::string_view what, std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ADD_FAILURE() << "timed out after " << timeout.count() << " ms waiting until " << what;
      return false;
    }
    std::this_thread::sleep_for(poll);
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CHECK(in) << "cannot read " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
  CHECK(out) << "cannot write " << path;
}

namespace {

std::vector<int> Ints(const google::protobuf::Value& v) {
  std::vector<int> out;
  for (const auto& x : v.list_value().values()) out.push_back(static_cast<int>(x.number_value()));
  return out;
}

}  // namespace

std::vector<GoldenCase> LoadGoldenCases() {
  google::protobuf::Struct root;
  const auto status = google::protobuf::util::JsonStringToMessage(
      ReadFile(SharedPath("golden/stories260K_greedy.json")), &root);
  CHECK(status.ok()) << status.ToString();
  std::vector<GoldenCase> cases;
  for (const auto& c : root.fields().at("cases").list_value().values()) {
    const auto& f = c.struct_value().fields();
    const auto& s = f.at("stories260K").struct_value().fields();
    GoldenCase g;
    g.prompt = f.at("prompt").string_value();
    g.prompt_ids = Ints(s.at("prompt_ids"));
    g.greedy_ids = Ints(s.at("greedy_ids"));
    g.steps_total = static_cast<int>(s.at("steps_total").number_value());
    g.stdout_text = s.at("stdout").string_value();
    g.llama2_prompt_ids = Ints(f.at("llama2_tokenizer_prompt_ids"));
    cases.push_back(std::move(g));
  }
  CHECK(!cases.empty());
  return cases;
}

int StartProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
                 const std::string& stderr_path) {
  // Between fork and exec only async-signal-safe calls: a test that serves from a thread of its
  // own (an httplib server, gRPC) may hold the allocator's lock when it forks, and a child that
  // allocates then waits for it forever (a sanitizer run's BenchOpenAiTest once hung so).
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const bool same = stderr_path == stdout_path;
  const pid_t pid = fork();
  CHECK_GE(pid, 0);
  if (pid == 0) {
    const int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = same ? out : open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  const std::string dir = MakeTempDir("command");
  const std::string out_path = dir + "/stdout", err_path = dir + "/stderr";
  int status = 0;
  waitpid(StartProcess(argv, out_path, err_path), &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out_path);
  r.err = ReadFile(err_path);
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace pagoda::testing
