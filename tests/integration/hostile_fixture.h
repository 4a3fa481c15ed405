// The fixture of issue 23's gRPC tests: a real router on loopback, its memory and threads read
// from /proc, and clients that open calls and never read them.
#ifndef PAGODA_TESTS_INTEGRATION_HOSTILE_FIXTURE_H_
#define PAGODA_TESTS_INTEGRATION_HOSTILE_FIXTURE_H_

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/serving_fixture.h"

namespace pagoda {

// The text of /proc/<pid>/<name>: empty when the process is gone, even while it is read (an
// ifstream's read of an exited process's file throws: ESRCH).
inline std::string ReadProcFile(pid_t pid, const char* name) {
  const int fd = open(absl::StrCat("/proc/", pid, "/", name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return n < 0 ? "" : text;
}

// A field of /proc/<pid>/status (VmRSS in kB, Threads), or -1.
inline int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::istringstream in(ReadProcFile(pid, "status"));
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

  // `streams` calls of `n` samples each, on a connection of their own whose client never
  // reads: its receive window is small and never grows, so the router's writes stall and the
  // calls pause.
  struct Stalled {
    std::unique_ptr<v1::Generation::Stub> stub;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>>> readers;
  };
  Stalled StartStalledReaders(int streams, int n) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8192);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // not another channel's connection
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

}  // namespace pagoda

#endif  // PAGODA_TESTS_INTEGRATION_HOSTILE_FIXTURE_H_
