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
#include <mutex>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/dtype_flags.h"
#include "common/model/model_loader.h"
#include "common/model/weights_digest.h"
#include "common/process/command_line.h"
#include "common/process/secret.h"
#include "glog/logging.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/kv_puller_service.h"
#include "worker/kv_transfer_service.h"
#include "worker/worker_options.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50052", "the router's worker port, host:port");
ABSL_FLAG(std::string, model, "",
          "a GGUF file, a llama2.c checkpoint (.bin) or a Hugging Face model directory "
          "(safetensors); the router's");
ABSL_FLAG(std::string, kv_cache_mb, "auto",
          "KV cache size in MiB, or auto: --kv-cache-memory-fraction of the memory available "
          "after the weights load, at most --max-num-seqs sequences of the model's context");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "K/V element type: f32, bf16 or f16 (half the bytes: twice the tokens in --kv-cache-mb; "
          "attention still sums in f32), int8 (a scale per token and head: ~4x f32's tokens), "
          "or auto: f32 (16-bit and int8 K/V change tokens: ask for them)");
ABSL_FLAG(double, kv_cache_memory_fraction, 0.5, "the share of available memory auto takes");
ABSL_FLAG(int, num_kv_blocks, 0, "KV blocks; > 0 overrides --kv-cache-mb");
ABSL_FLAG(int, block_size, 16, "tokens per KV block");
ABSL_FLAG(std::string, weight_dtype, "auto",
          "how the matrices are stored: f32, bf16 (half the bytes), int8 (Q8_0's blocks of 32) "
          "or int4 (Q4_0's blocks); auto: each tensor as its file stores it (F32 and F16: f32, "
          "BF16: bf16, Q8_0: int8, Q4_0/Q4_K: int4, Q6_K: q6_k)");
ABSL_FLAG(std::string, compute_dtype, "auto",
          "what bf16 weights are multiplied in: bf16 (activations rounded to bf16, f32 sums; "
          "needs AVX512_BF16), f32 (exact products), or auto: bf16 where the CPU has it");
ABSL_FLAG(int, max_num_batched_tokens, 2048, "the largest step, in tokens");
ABSL_FLAG(int, max_num_seqs, 256, "the most sequences in one step");
ABSL_FLAG(int, threads, 0, "compute threads; 0 = all cores");
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
ABSL_FLAG(double, drain_timeout_s, 25.0,
          "on SIGTERM, wait this long for the sequences here to finish before leaving");

namespace {

pagoda::ProgramUsage Usage() {
  return {"pagoda-worker",
          "pagoda-worker --router=HOST:PORT --model=M [--kv-cache-mb=MB] [--threads=T] [flags]\n"
          "Holds the weights and a shard of the KV pool; runs the steps the router sends.\n",
          {
              {"Router and model", {"router", "model", "name", "weight_dtype", "compute_dtype"}},
              {"KV cache and steps",
               {"kv_cache_mb", "kv_cache_dtype", "kv_cache_memory_fraction", "num_kv_blocks",
                "block_size", "max_num_batched_tokens", "max_num_seqs", "threads"}},
              {"Health and shutdown", {"health_port", "drain_timeout_s"}},
              {"KV transfer", {"kv_transfer_port", "advertise_address"}},
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
      std::lock_guard<std::mutex> lock(mu_);
      if (service_ == nullptr) {
        LOG(INFO) << "signal " << signal << " before serving: exiting";
        std::_Exit(0);
      }
      LOG(INFO) << "signal " << signal << ": draining";
      service_->Drain();
    });
  }
  ~StopSignals() {
    exiting_ = true;
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes its sigwait if still there
    thread_.join();
  }
  void Serving(pagoda::WorkerService* service) {
    std::lock_guard<std::mutex> lock(mu_);
    service_ = service;
  }

 private:
  sigset_t set_;
  std::thread thread_;
  std::atomic<bool> exiting_{false};
  std::mutex mu_;
  pagoda::WorkerService* service_ = nullptr;  // guarded by mu_
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
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "error: --model is required\n";
    return 2;
  }
  absl::StatusOr<std::optional<pagoda::WeightDtype>> weight_dtype =
      pagoda::ParseWeightDtype(absl::GetFlag(FLAGS_weight_dtype));
  if (!weight_dtype.ok()) {
    std::cerr << "error: " << weight_dtype.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<pagoda::ComputeDtype> compute_dtype =
      pagoda::ParseComputeDtypeFlag("compute-dtype", absl::GetFlag(FLAGS_compute_dtype));
  if (!compute_dtype.ok()) {
    std::cerr << "error: " << compute_dtype.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<pagoda::KvDtype> kv_dtype =
      pagoda::ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) {
    std::cerr << "error: " << kv_dtype.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<pagoda::TlsPem> tls = pagoda::ReadTlsPem(
      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca));
  if (!tls.ok()) {
    std::cerr << "error: " << tls.status().message() << "\n";
    return 2;
  }
  // The health server comes up before the (possibly long) model load, so a startup probe can
  // tell "loading" (liveness NOT_SERVING) from "dead" (no answer).
  std::unique_ptr<grpc::Server> health_server;
  grpc::HealthCheckServiceInterface* health = nullptr;
  grpc::CallbackGenericService unimplemented;  // gRPC wants one service of ours besides health
  if (const int port = absl::GetFlag(FLAGS_health_port); port > 0) {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&unimplemented);
    builder.AddListeningPort(absl::StrCat("0.0.0.0:", port), grpc::InsecureServerCredentials());
    health_server = builder.BuildAndStart();
    if (!health_server) {
      std::cerr << "error: cannot listen on health port " << port << "\n";
      return 1;
    }
    health = health_server->GetHealthCheckService();
    health->SetServingStatus("", false);
    health->SetServingStatus("liveness", false);
  }
  absl::StatusOr<std::unique_ptr<pagoda::WeightSource>> weights = pagoda::OpenWeightSource(model);
  if (!weights.ok()) {
    std::cerr << "error: " << weights.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> digest = pagoda::WeightsDigest(model);
  if (!digest.ok()) {
    std::cerr << "error: " << digest.status().message() << "\n";
    return 1;
  }
  (*weights)->set_weights_digest(*digest);  // the router asks for the same weights
  pagoda::WorkerOptions options;
  options.kv_cache_dtype = *kv_dtype;
  absl::StatusOr<int64_t> kv_bytes = pagoda::ParseKvCacheMb(absl::GetFlag(FLAGS_kv_cache_mb));
  const double fraction = absl::GetFlag(FLAGS_kv_cache_memory_fraction);
  if (!kv_bytes.ok() || !(fraction > 0 && fraction <= 1)) {
    std::cerr << "error: --kv-cache-mb must be auto or a positive number of MiB, and "
                 "--kv-cache-memory-fraction in (0, 1]\n";
    return 2;
  }
  options.kv_cache_bytes = *kv_bytes;
  options.kv_cache_memory_fraction = fraction;
  options.num_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  options.block_size = absl::GetFlag(FLAGS_block_size);
  options.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  options.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.weight_dtype = *weight_dtype;
  options.compute_dtype = *compute_dtype;
  auto engine = pagoda::WorkerEngine::Create(**weights, options);
  weights->reset();  // the file's mapping
  if (!engine.ok()) {
    std::cerr << "error: " << engine.status().message() << "\n";
    return 1;
  }
  LOG(INFO) << "model loaded: " << model;
  if (health) health->SetServingStatus("liveness", true);
  pagoda::WorkerServiceOptions service_options;
  service_options.router_address = absl::GetFlag(FLAGS_router);
  service_options.worker_token =
      pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_worker_token), pagoda::kWorkerTokenEnv);
  service_options.tls = !tls->ca.empty() || !tls->cert.empty();
  service_options.tls_pem = *tls;
  char host[256] = "worker";
  gethostname(host, sizeof(host) - 1);
  service_options.name = absl::GetFlag(FLAGS_name).empty() ? absl::StrCat(host, ":", getpid())
                                                           : absl::GetFlag(FLAGS_name);
  service_options.drain_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_drain_timeout_s) * 1000));
  // KV transfers: the same token and certificates as the router link (issue 28).
  std::unique_ptr<pagoda::KvTransferService> kv_service;
  std::unique_ptr<grpc::Server> kv_server;
  if (const int port = absl::GetFlag(FLAGS_kv_transfer_port); port < -1 || port > 65535) {
    std::cerr << "error: --kv-transfer-port=" << port << ": expected a port, 0 (off) or -1\n";
    return 2;
  } else if (port != 0) {
    const bool loopback = port == -1;
    if (service_options.tls && tls->cert.empty()) {
      std::cerr << "error: --kv-transfer-port with TLS needs --tls-cert and --tls-key: the "
                   "transfer port serves TLS with them\n";
      return 2;
    }
    kv_service = std::make_unique<pagoda::KvTransferService>(&(*engine)->kv_pool(),
                                                             service_options.worker_token);
    int bound = 0;
    kv_server = pagoda::StartKvTransferServer(
        loopback ? "127.0.0.1:0" : absl::StrCat("0.0.0.0:", port), kv_service.get(), *tls, &bound);
    if (!kv_server || bound == 0) {
      std::cerr << "error: cannot listen on KV transfer port " << port << "\n";
      return 1;
    }
    std::string advertise = absl::GetFlag(FLAGS_advertise_address);
    if (advertise.empty()) advertise = absl::StrCat(loopback ? "127.0.0.1" : host, ":", bound);
    (*engine)->EnableTransfers(std::make_unique<pagoda::GrpcKvPuller>(pagoda::GrpcKvPullerOptions{
                                   .worker_token = service_options.worker_token,
                                   .tls = service_options.tls,
                                   .tls_pem = *tls,
                               }),
                               advertise);
    LOG(INFO) << "KV transfer port " << bound << (service_options.tls ? " (TLS)" : "")
              << ", advertised as " << advertise
              << (service_options.worker_token.empty() ? "; no worker token: open to anyone" : "");
  }
  if (health) {
    service_options.on_ready = [health](bool ready) { health->SetServingStatus("", ready); };
  }
  pagoda::WorkerService service(*std::move(engine), service_options);
  stop_signals.Serving(&service);
  const int code = service.Run();
  stop_signals.Serving(nullptr);
  if (health_server) health_server->Shutdown(std::chrono::system_clock::now());
  // Before the engine (in `service`) and its pool go.
  if (kv_server) kv_server->Shutdown(std::chrono::system_clock::now());
  return code;
}
