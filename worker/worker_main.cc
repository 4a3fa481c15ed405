// pagoda-worker: holds the weights and a shard of the KV pool, and executes the steps the
// router sends. Dials the router (--router) and keeps reconnecting when it goes away.
// SIGTERM or SIGINT drains it: the sequences it holds finish (or, after --drain-timeout-s,
// move to other workers) and it exits 0. --health-port serves grpc.health.v1: "liveness" is
// SERVING once the model is loaded, "" (readiness) while the router has it and it is not
// draining.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/model_loader.h"
#include "glog/logging.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50052", "the router's worker port, host:port");
ABSL_FLAG(std::string, model, "", "llama2.c checkpoint (.bin)");
ABSL_FLAG(int, kv_cache_mb, 256, "KV cache size in MiB");
ABSL_FLAG(int, num_kv_blocks, 0, "KV blocks; > 0 overrides --kv_cache_mb");
ABSL_FLAG(int, block_size, 16, "tokens per KV block");
ABSL_FLAG(int, max_num_batched_tokens, 2048, "the largest step, in tokens");
ABSL_FLAG(int, max_num_seqs, 256, "the most sequences in one step");
ABSL_FLAG(int, threads, 0, "compute threads; 0 = all cores");
ABSL_FLAG(std::string, name, "", "name in the router's logs; default host:pid");
ABSL_FLAG(int, health_port, 0, "serve grpc.health.v1 on this port; 0 = none");
ABSL_FLAG(double, drain_timeout_s, 25.0,
          "on SIGTERM, wait this long for the sequences here to finish before leaving");

int main(int argc, char** argv) {
  // Termination signals are taken by a thread of ours (sigwait), never by a handler: block
  // them before any other thread exists, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  pagoda::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "error: --model is required\n";
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
  absl::StatusOr<pagoda::ModelWeights> weights = pagoda::LoadModelWeights(model);
  if (!weights.ok()) {
    std::cerr << "error: " << weights.status().message() << "\n";
    return 1;
  }
  pagoda::WorkerOptions options;
  options.kv_cache_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_mb)) << 20;
  options.num_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  options.block_size = absl::GetFlag(FLAGS_block_size);
  options.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  options.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.threads = absl::GetFlag(FLAGS_threads);
  auto engine = pagoda::WorkerEngine::Create(*std::move(weights), options);
  if (!engine.ok()) {
    std::cerr << "error: " << engine.status().message() << "\n";
    return 1;
  }
  LOG(INFO) << "model loaded: " << model;
  if (health) health->SetServingStatus("liveness", true);
  pagoda::WorkerServiceOptions service_options;
  service_options.router_address = absl::GetFlag(FLAGS_router);
  char host[256] = "worker";
  gethostname(host, sizeof(host) - 1);
  service_options.name = absl::GetFlag(FLAGS_name).empty() ? absl::StrCat(host, ":", getpid())
                                                           : absl::GetFlag(FLAGS_name);
  service_options.drain_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(absl::GetFlag(FLAGS_drain_timeout_s) * 1000));
  if (health) {
    service_options.on_ready = [health](bool ready) { health->SetServingStatus("", ready); };
  }
  pagoda::WorkerService service(*std::move(engine), service_options);
  std::atomic<bool> exiting{false};
  std::thread signal_thread([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (exiting) return;
    LOG(INFO) << "signal " << signal << ": draining";
    service.Drain();
  });
  const int code = service.Run();
  exiting = true;
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // wakes its sigwait if still there
  signal_thread.join();
  if (health_server) health_server->Shutdown(std::chrono::system_clock::now());
  return code;
}
