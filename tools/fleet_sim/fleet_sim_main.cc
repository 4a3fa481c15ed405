// fleet_sim: the real router driven by N simulated workers and M concurrent streams, to find
// where one router, not its workers, is the bottleneck (issue 38; docs/fleet.md; BENCHMARKS
// §30). A benchmark, not a test.
//
// The workers (sim_workers.h) speak the real step protocol over gRPC from this one process:
// each announces the fingerprint of --model (the router's model; only its config and weight
// digest are read here) and answers each step after the time a step-time model gives it
// (step_model.h: TinyLlama-1.1B f32 by default, --speed times faster), with random tokens.
// The clients are M closed-loop streams over gRPC Generate or the OpenAI HTTP API
// (streaming completions). With --router-bin the router is started here (its log in
// --router-log); else --grpc/--http/--worker-address/--metrics/--router-pid name a running one.
//
// After --warmup-s, for --duration-s, it reports one `name value` line each:
//   tokens_per_s            tokens the clients received, per second
//   router_cpu_s_per_1k     the router's user+system CPU seconds (/proc/PID/stat) per 1,000
//   router_cpu_cores        ... per wall second
//   client_cpu_cores        this process's (the workers and the clients)
//   added_step_ms_p50/p99   at a worker: from its result sent to its next command arriving,
//                           while it had sequences running (what the router and the two hops
//                           add to a step); worker_step_ms_p50 is the modelled step itself
//   router_outside_step_ms  the same from the router's metrics: a step's time in the loop
//                           minus the forward pass the worker reported
//   token_ms_p50/p99, ttft_ms_p50/p99   at the client
//   router_rss_mb, rss_per_stream_kb   (RSS under load - RSS with the workers alone) / M
//   lock_wait_us_per_report, lock_waited_fraction   the worker loops' Cluster lock waits
//   running, waiting        the router's sequences at the end (waiting ones are idle streams)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/model/model_loader.h"
#include "common/model/weights_digest.h"
#include "common/process/command_line.h"
#include "common/process/http_client.h"
#include "glog/logging.h"
#include "tools/fleet_sim/grpc_load.h"
#include "tools/fleet_sim/http_load.h"
#include "tools/fleet_sim/sim_workers.h"

ABSL_FLAG(std::string, model, "", "the router's model (its fingerprint is what workers announce)");
ABSL_FLAG(std::string, router_bin, "", "start this pagoda-router here; \"\" = use a running one");
ABSL_FLAG(std::string, router_flags, "",
          "more flags for the started router, space-separated (e.g. \"--speculative=off\")");
ABSL_FLAG(std::string, router_log, "/tmp/fleet_sim_router.log", "the started router's log");
ABSL_FLAG(std::string, grpc, "127.0.0.1:50051", "a running router's public gRPC address");
ABSL_FLAG(std::string, http, "127.0.0.1:8000", "a running router's HTTP address");
ABSL_FLAG(std::string, worker_address, "127.0.0.1:50052", "a running router's worker port");
ABSL_FLAG(std::string, metrics, "127.0.0.1:9090", "a running router's --metrics-port address");
ABSL_FLAG(int, router_pid, 0, "a running router's pid (CPU and RSS from /proc)");
ABSL_FLAG(std::string, worker_token, "", "a running router's --worker-token");
ABSL_FLAG(int, workers, 8, "simulated workers (N)");
ABSL_FLAG(int, streams, 64, "concurrent client streams (M)");
ABSL_FLAG(std::string, api, "grpc", "grpc (Generate) | http (OpenAI /v1/completions, streaming)");
ABSL_FLAG(double, warmup_s, 3, "seconds of load before measuring");
ABSL_FLAG(double, duration_s, 10, "seconds measured");
ABSL_FLAG(double, speed, 1.0, "the simulated workers' speed over the modelled 1.1B f32 CPU");
ABSL_FLAG(int, max_seqs, 256, "max_num_seqs each worker announces");
ABSL_FLAG(int, num_blocks, 16384, "KV blocks each worker announces (16 tokens each)");
ABSL_FLAG(int, prompt_tokens, 64, "prompt tokens per request");
ABSL_FLAG(int, shared_prompt_tokens, 32, "of those, the same in every request");
ABSL_FLAG(int, max_tokens, 128, "output tokens per request (ignore_eos)");

namespace pagoda::fleet {
namespace {

struct Proc {
  double cpu_s = 0;  // user + system
  double rss_mb = 0;
};

Proc ReadProc(int pid) {
  Proc p;
  if (pid <= 0) return p;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = all.rfind(')');
  if (paren == std::string::npos) return p;
  std::vector<std::string> f = absl::StrSplit(all.substr(paren + 2), ' ');
  // After "pid (comm) ": state is field 3, utime 14, stime 15 (1-based in proc(5)).
  double ut = 0, st = 0;
  if (f.size() > 13 && absl::SimpleAtod(f[11], &ut) && absl::SimpleAtod(f[12], &st)) {
    p.cpu_s = (ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) p.rss_mb = std::atof(line.c_str() + 6) / 1024.0;
  }
  return p;
}

double SelfCpu() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// The sums of the router's metrics by name (labels summed over).
std::map<std::string, double> Scrape(const std::string& address) {
  std::map<std::string, double> out;
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return out;
  }
  const HttpResult r = HttpGet(address.substr(0, colon), port, "/metrics");
  if (r.status != 200) return out;
  for (absl::string_view line : absl::StrSplit(r.body, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    const size_t space = line.rfind(' ');
    double v = 0;
    if (name_end == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &v)) {
      continue;
    }
    out[std::string(line.substr(0, name_end))] += v;
  }
  return out;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

pid_t StartRouter(const std::vector<std::string>& args, const std::string& log) {
  // Between fork and exec only async-signal-safe calls: the simulated workers' threads may hold
  // the allocator's lock when this forks.
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  PCHECK(pid >= 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int Run() {
  const std::string model = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelConfig> config = LoadModelConfig(model);
  absl::StatusOr<std::string> digest = WeightsDigest(model);
  if (!config.ok() || !digest.ok()) {
    std::cerr << "fleet_sim: --model: "
              << (config.ok() ? digest.status() : config.status()).message() << "\n";
    return 2;
  }
  config->weights_digest = *digest;
  const int streams = absl::GetFlag(FLAGS_streams);
  const bool http = absl::GetFlag(FLAGS_api) == "http";
  if (!http && absl::GetFlag(FLAGS_api) != "grpc") {
    std::cerr << "fleet_sim: --api is grpc or http\n";
    return 2;
  }

  std::string grpc_address = absl::GetFlag(FLAGS_grpc);
  std::string http_address = absl::GetFlag(FLAGS_http);
  std::string worker_address = absl::GetFlag(FLAGS_worker_address);
  std::string metrics_address = absl::GetFlag(FLAGS_metrics);
  int router_pid = absl::GetFlag(FLAGS_router_pid);
  pid_t child = 0;
  if (const std::string bin = absl::GetFlag(FLAGS_router_bin); !bin.empty()) {
    const int port = FreePort(), worker_port = FreePort(), http_port = FreePort(),
              metrics_port = FreePort();
    grpc_address = absl::StrCat("127.0.0.1:", port);
    http_address = absl::StrCat("127.0.0.1:", http_port);
    worker_address = absl::StrCat("127.0.0.1:", worker_port);
    metrics_address = absl::StrCat("127.0.0.1:", metrics_port);
    std::vector<std::string> args = {bin,
                                     "--model=" + model,
                                     "--host=127.0.0.1",
                                     absl::StrCat("--port=", port),
                                     absl::StrCat("--worker_port=", worker_port),
                                     absl::StrCat("--http_port=", http_port),
                                     absl::StrCat("--metrics_port=", metrics_port),
                                     "--insecure_worker_port",
                                     absl::StrCat("--max_waiting=", std::max(1024, 2 * streams))};
    for (absl::string_view f :
         absl::StrSplit(absl::GetFlag(FLAGS_router_flags), ' ', absl::SkipEmpty())) {
      args.emplace_back(f);
    }
    child = StartRouter(args, absl::GetFlag(FLAGS_router_log));
    router_pid = child;
  }
  const auto stop_router = [&] {
    if (child <= 0) return;
    kill(child, SIGKILL);  // a benchmark's router: nothing to drain
    waitpid(child, nullptr, 0);
    child = 0;
  };

  const int vocab = config->vocab_size;
  const int token_lo = std::min(259, vocab / 2);
  SimWorkersOptions w;
  w.router_address = worker_address;
  w.worker_token = absl::GetFlag(FLAGS_worker_token);
  w.num_workers = absl::GetFlag(FLAGS_workers);
  w.info.model_fingerprint = config->Fingerprint();
  w.info.num_blocks = absl::GetFlag(FLAGS_num_blocks);
  w.info.block_size = 16;
  w.info.max_num_batched_tokens = 512;
  w.info.max_num_seqs = absl::GetFlag(FLAGS_max_seqs);
  w.info.kv_cache_dtype = "bf16";
  w.model.speed = absl::GetFlag(FLAGS_speed);
  w.token_lo = token_lo;
  w.token_hi = vocab;
  auto workers = std::make_unique<SimWorkers>(w);
  workers->Start();
  bool connected = false;
  for (int i = 0; i < 600 && !connected; ++i) {
    connected = workers->WaitConnected(absl::Milliseconds(100));
    if (workers->num_refused() > 0) break;
    if (child > 0 && waitpid(child, nullptr, WNOHANG) == child) {
      child = 0;  // it exited
      break;
    }
  }
  if (!connected) {
    std::cerr << "fleet_sim: " << workers->num_connected() << " of " << w.num_workers
              << " workers connected, " << workers->num_refused()
              << " refused (router log: " << absl::GetFlag(FLAGS_router_log) << ")\n";
    workers.reset();
    stop_router();
    return 1;
  }
  absl::SleepFor(absl::Milliseconds(300));  // the router's Tick marks it ready
  const Proc base = ReadProc(router_pid);

  LoadOptions l;
  l.address = http ? http_address : grpc_address;
  l.model = config->name.empty() ? "model" : config->name;
  if (child > 0 || l.model.empty()) {
    // The router serves the model under its file's or directory's name by default.
    std::string name = model;
    while (!name.empty() && name.back() == '/') name.pop_back();
    name = name.substr(name.rfind('/') + 1);
    if (const size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0) {
      name = name.substr(0, dot);
    }
    l.model = name;
  }
  l.streams = streams;
  l.prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  l.shared_prompt_tokens = absl::GetFlag(FLAGS_shared_prompt_tokens);
  l.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  l.token_lo = token_lo;
  l.token_hi = vocab;
  LoadStats stats;
  std::unique_ptr<GrpcLoad> grpc_load;
  std::unique_ptr<HttpLoad> http_load;
  if (http) {
    http_load = std::make_unique<HttpLoad>(l, &stats);
    http_load->Start();
  } else {
    grpc_load = std::make_unique<GrpcLoad>(l, &stats);
    grpc_load->Start();
  }

  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_warmup_s)));
  const int64_t tokens0 = stats.tokens.load();
  const int64_t requests0 = stats.requests.load();
  const Proc p0 = ReadProc(router_pid);
  const double self0 = SelfCpu();
  std::map<std::string, double> m0 = Scrape(metrics_address);
  const absl::Time t0 = absl::Now();
  stats.token_ms.Clear();
  stats.ttft_ms.Clear();
  stats.recording.store(true);
  workers->Record(true);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_duration_s)));
  workers->Record(false);
  stats.recording.store(false);
  const double wall = absl::ToDoubleSeconds(absl::Now() - t0);
  const int64_t tokens = stats.tokens.load() - tokens0;
  const int64_t requests = stats.requests.load() - requests0;
  const Proc p1 = ReadProc(router_pid);
  const double self1 = SelfCpu();
  std::map<std::string, double> m1 = Scrape(metrics_address);

  if (grpc_load) grpc_load->Stop();
  if (http_load) http_load->Stop();
  workers->Stop();  // merges the workers' last samples
  stop_router();

  const auto delta = [&](const std::string& name) { return m1[name] - m0[name]; };
  const double cpu = p1.cpu_s - p0.cpu_s;
  const double steps = delta("pagoda_cluster_steps_total");
  const double reports = delta("pagoda_cluster_loop_reports_total");
  std::ostringstream out;
  out << "workers " << w.num_workers << "\n"
      << "streams " << streams << "\n"
      << "api " << (http ? "http" : "grpc") << "\n"
      << "speed " << w.model.speed << "\n"
      << "seconds " << wall << "\n"
      << "tokens " << tokens << "\n"
      << "requests " << requests << "\n"
      << "failures " << stats.failures.load() << "\n"
      << "tokens_per_s " << tokens / wall << "\n"
      << "router_cpu_s_per_1k " << (tokens > 0 ? cpu / tokens * 1e3 : 0.0) << "\n"
      << "router_cpu_cores " << cpu / wall << "\n"
      << "client_cpu_cores " << (self1 - self0) / wall << "\n"
      << "worker_steps " << steps << "\n"
      << "router_outside_step_ms "
      << (steps > 0 ? (delta("pagoda_cluster_step_seconds_total") -
                       delta("pagoda_cluster_forward_seconds_total")) /
                          steps * 1e3
                    : 0.0)
      << "\n"
      << "lock_wait_us_per_report "
      << (reports > 0 ? delta("pagoda_cluster_loop_lock_wait_seconds_total") / reports * 1e6 : 0.0)
      << "\n"
      << "lock_waited_fraction "
      << (reports > 0 ? delta("pagoda_cluster_loop_lock_waits_total") / reports : 0.0) << "\n"
      << "added_step_ms_p50 " << workers->added_step_ms().Quantile(0.5) << "\n"
      << "added_step_ms_p99 " << workers->added_step_ms().Quantile(0.99) << "\n"
      << "added_step_samples " << workers->added_step_ms().size() << "\n"
      << "worker_step_ms_p50 " << workers->step_ms().Quantile(0.5) << "\n"
      << "token_ms_p50 " << stats.token_ms.Quantile(0.5) << "\n"
      << "token_ms_p99 " << stats.token_ms.Quantile(0.99) << "\n"
      << "ttft_ms_p50 " << stats.ttft_ms.Quantile(0.5) << "\n"
      << "ttft_ms_p99 " << stats.ttft_ms.Quantile(0.99) << "\n"
      << "running " << m1["pagoda_num_requests_running"] << "\n"
      << "waiting " << m1["pagoda_num_requests_waiting"] << "\n"
      << "router_rss_mb " << p1.rss_mb << "\n"
      << "router_rss_base_mb " << base.rss_mb << "\n"
      << "rss_per_stream_kb " << (p1.rss_mb - base.rss_mb) * 1024.0 / streams << "\n";
  std::cout << out.str();
  return 0;
}

}  // namespace
}  // namespace pagoda::fleet

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(
      argc, argv,
      {"fleet_sim",
       "fleet_sim --model=M --router-bin=build/bin/pagoda-router --workers=N --streams=M "
       "[--api=grpc|http] [--speed=X] [flags]\n"
       "The router under N simulated workers (the real step protocol, no compute) and M "
       "streams;\nprints one `name value` line per figure (see the top of "
       "tools/fleet_sim/fleet_sim_main.cc).\n",
       {{"Router",
         {"model", "router_bin", "router_flags", "router_log", "grpc", "http", "worker_address",
          "metrics", "router_pid", "worker_token"}},
        {"Fleet", {"workers", "max_seqs", "num_blocks", "speed"}},
        {"Load",
         {"streams", "api", "prompt_tokens", "shared_prompt_tokens", "max_tokens", "warmup_s",
          "duration_s"}}}});
  return pagoda::fleet::Run();
}
