// pagoda-worker: holds the weights and a shard of the KV pool, and executes the steps the
// router sends. Dials the router (--router) and keeps reconnecting when it goes away.
// SIGTERM or SIGINT drains it: the sequences it holds finish (or, after --drain-timeout-s,
// move to other workers) and it exits 0. --health-port serves grpc.health.v1: "liveness" is
// SERVING once the model is loaded, "" (readiness) while the router has it and it is not
// draining.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "common/process/command_line.h"
#include "common/process/secret.h"
#include "glog/logging.h"
#include "worker/worker_flags.h"
#include "worker/worker_server.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50052", "the router's worker port, host:port");
ABSL_FLAG(std::string, model, "",
          "a GGUF file, a llama2.c checkpoint (.bin) or a Hugging Face model directory "
          "(safetensors); the router's");
ABSL_FLAG(int, max_num_batched_tokens, 2048, "the largest step, in tokens");
ABSL_FLAG(std::string, name, "", "name in the router's logs; default host:pid");
ABSL_FLAG(int, health_port, 0, "serve grpc.health.v1 on this port; 0 = none");
ABSL_FLAG(std::string, worker_token, "",
          "the cluster's secret the router asks for (default: $PAGODA_WORKER_TOKEN)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA that signed the router's certificate: dial with TLS");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate for a router that asks (mTLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(int, kv_transfer_port, 0,
          "serve this worker's KV blocks to peers on this port, and pull theirs when the router "
          "says (issue 28); 0 = off: it neither serves nor pulls; -1 = a free port on loopback "
          "(workers of one machine: a router's --spawn-workers)");
ABSL_FLAG(std::string, advertise_address, "",
          "host:port peers dial for KV transfers (in Kubernetes the pod IP); default: this "
          "host's name and --kv-transfer-port");
ABSL_FLAG(std::string, kv_cache_dir, "",
          "keep full KV blocks in this directory (a local disk or a mounted volume) across "
          "restarts: written when the router reuses a block and at drain, read back at start and "
          "offered to the router; one worker per directory (a LOCK file); \"\" = off");
ABSL_FLAG(double, kv_cache_dir_max_gib, 10.0,
          "--kv-cache-dir's bound in GiB: the least recently used blocks are removed past it");
ABSL_FLAG(double, kv_cache_dir_load_s, 30.0,
          "at start, read --kv-cache-dir for at most this long before joining the router");
ABSL_FLAG(std::string, layers, "",
          "A:B: hold only layers A..B-1 (0-based, half-open) as one pipeline stage of a model "
          "too large for one machine; the router serves the stages whose ranges tile the model "
          "as one worker (issue 40). Needs --kv-transfer-port: the stages send activations "
          "worker to worker on it. \"\" = every layer");
ABSL_FLAG(double, drain_timeout_s, 25.0,
          "on SIGTERM, wait this long for the sequences here to finish before leaving");

namespace {

std::vector<std::string> EngineFlags() {
  std::vector<std::string> names = pagoda::WorkerEngineFlagNames();
  names.push_back("max_num_batched_tokens");
  return names;
}

pagoda::ProgramUsage Usage() {
  return {
      "pagoda-worker",
      "pagoda-worker --router=HOST:PORT --model=M [--kv-cache-mb=MB] [--threads=T] [flags]\n"
      "Holds the weights and a shard of the KV pool; runs the steps the router sends.\n",
      {
          {"Router and model", {"router", "model", "name", "layers"}},
          {"Engine: weights, KV cache and steps", EngineFlags()},
          {"Health and shutdown", {"health_port", "drain_timeout_s"}},
          {"KV transfer", {"kv_transfer_port", "advertise_address"}},
          {"KV cache directory", {"kv_cache_dir", "kv_cache_dir_max_gib", "kv_cache_dir_load_s"}},
          {"Security", {"worker_token", "tls_ca", "tls_cert", "tls_key"}},
      }};
}

// Takes SIGTERM and SIGINT on a thread of its own (sigwait), never in a handler. Before the
// service runs there is nothing to drain and the process just exits (a model load can take
// minutes); afterwards the signal starts a drain.
class StopSignals {
 public:
  // Call first in main, before any other thread exists: every thread inherits the mask.
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] {
      int signal = 0;
      sigwait(&set_, &signal);
      if (exiting_) return;
      absl::MutexLock lock(&mu_);
      if (server_ == nullptr) {
        LOG(INFO) << "signal " << signal << " before serving: exiting";
        std::_Exit(0);
      }
      LOG(INFO) << "signal " << signal << ": draining";
      server_->Drain();
    });
  }
  ~StopSignals() {
    exiting_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait if still there
    thread_.join();
  }
  void Serving(pagoda::WorkerServer* server) {
    absl::MutexLock lock(&mu_);
    server_ = server;
  }

 private:
  sigset_t set_;
  std::thread thread_;
  std::atomic<bool> exiting_{false};
  absl::Mutex mu_;
  pagoda::WorkerServer* server_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// A worker shares its cores with the router, clients and other workers. OpenMP threads that
// spin at a barrier while the thread they wait for has lost its core stall every step
// (docs/BENCHMARKS.md §7: a decode step of 32 sequences 7x slower under load), so workers wait
// passively unless told otherwise. libgomp reads the variable when it loads, before main:
// set it and start again.
void WaitPassivelyAtBarriers(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace

int main(int argc, char** argv) {
  WaitPassivelyAtBarriers(argv);
  StopSignals stop_signals;
  pagoda::ParseCommandLine(argc, argv, Usage());
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  pagoda::WorkerServerOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  absl::StatusOr<pagoda::WorkerOptions> engine =
      pagoda::WorkerOptionsFromFlags(pagoda::RepeatedFlagValues(argc, argv, "lora_modules"));
  absl::StatusOr<pagoda::TlsPem> tls = pagoda::ReadTlsPem(
      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca));
  for (const absl::Status& status : {engine.status(), tls.status()}) {
    if (!status.ok()) {
      std::cerr << "error: " << status.message() << "\n";
      return 2;
    }
  }
  options.engine = *engine;
  if (const std::string layers = absl::GetFlag(FLAGS_layers); !layers.empty()) {
    absl::StatusOr<pagoda::LayerRange> range = pagoda::ParseLayerRange(layers);
    if (!range.ok()) {
      std::cerr << "error: --" << range.status().message() << "\n";
      return 2;
    }
    options.engine.layers = *range;
  }
  options.engine.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  options.service.router_address = absl::GetFlag(FLAGS_router);
  options.service.name = absl::GetFlag(FLAGS_name);
  options.service.worker_token =
      pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_worker_token), pagoda::kWorkerTokenEnv);
  options.service.tls = !tls->ca.empty() || !tls->cert.empty();
  options.service.tls_pem = *tls;
  options.service.drain_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_drain_timeout_s) * 1000));
  options.health_port = absl::GetFlag(FLAGS_health_port);
  options.kv_transfer_port = absl::GetFlag(FLAGS_kv_transfer_port);
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.kv_cache_dir.dir = absl::GetFlag(FLAGS_kv_cache_dir);
  options.kv_cache_dir.max_bytes =
      static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_dir_max_gib) * (int64_t{1} << 30));
  options.kv_cache_dir.max_load = absl::Seconds(absl::GetFlag(FLAGS_kv_cache_dir_load_s));

  pagoda::WorkerServer server(std::move(options));
  if (absl::Status valid = server.Validate(); !valid.ok()) {
    std::cerr << "error: " << valid.message() << "\n";
    return 2;
  }
  if (absl::Status started = server.Start(); !started.ok()) {
    std::cerr << "error: " << started.message() << "\n";
    return 1;
  }
  stop_signals.Serving(&server);
  const int code = server.Run();
  stop_signals.Serving(nullptr);
  server.Shutdown();
  return code;
}
