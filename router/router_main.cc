// pagoda-router: the public pagoda.v1.Generation service (plus grpc.health.v1 and reflection)
// on --port, the WorkerLink stream for workers on --worker-port, and the Cluster between them.
// --spawn-workers=N also starts N local pagoda-worker processes: the one-command deployment.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/command_line.h"
#include "common/model_loader.h"
#include "glog/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/generation_service.h"
#include "router/worker_link_service.h"

ABSL_FLAG(int, port, 50051, "public port (pagoda.v1.Generation, grpc.health.v1)");
ABSL_FLAG(int, worker_port, 50052, "port workers dial");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on");
ABSL_FLAG(std::string, model, "", "llama2.c checkpoint (.bin); workers must serve the same");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer; default: tokenizer.bin beside the model");
ABSL_FLAG(int, spawn_workers, 0, "start this many local workers as child processes");
ABSL_FLAG(int, worker_kv_cache_mb, 256, "--kv_cache_mb of spawned workers");
ABSL_FLAG(int, worker_threads, 1, "--threads of spawned workers");
ABSL_FLAG(std::string, placement, "prefix", "prefix | round_robin | least_loaded");
ABSL_FLAG(int, max_model_len, 0, "prompt + output tokens per sequence; 0 = the model's context");
ABSL_FLAG(int, max_num_batched_tokens, 2048, "tokens per step and worker");
ABSL_FLAG(int, max_num_seqs, 256, "sequences per step and worker");
ABSL_FLAG(int, max_waiting, 1024, "queued requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(double, heartbeat_timeout_s, 5.0, "a worker silent this long is dead");

namespace {

pid_t SpawnWorker(const std::string& binary, const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // local workers die with their router
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "error: --model is required\n";
    return 2;
  }
  // The router holds no weights: the checkpoint's header gives the shape and fingerprint.
  absl::StatusOr<pagoda::ModelConfig> loaded = pagoda::LoadModelConfig(model);
  if (!loaded.ok()) {
    std::cerr << "error: " << loaded.status().message() << "\n";
    return 1;
  }
  const pagoda::ModelConfig config = *loaded;
  auto tokenizer = pagoda::LoadModelTokenizer(model, absl::GetFlag(FLAGS_tokenizer), config);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << "\n";
    return 1;
  }
  pagoda::ClusterOptions options;
  options.engine.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  options.engine.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  options.engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  const std::string placement = absl::GetFlag(FLAGS_placement);
  if (placement == "round_robin") {
    options.placement = pagoda::PlacementPolicy::kRoundRobin;
  } else if (placement == "least_loaded") {
    options.placement = pagoda::PlacementPolicy::kLeastLoaded;
  } else if (placement != "prefix") {
    std::cerr << "error: --placement must be prefix, round_robin or least_loaded\n";
    return 2;
  }
  pagoda::Cluster cluster(config, options);

  pagoda::WorkerLinkService worker_link(&cluster,
                                        absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout_s)));
  grpc::ServerBuilder worker_builder;
  const std::string host = absl::GetFlag(FLAGS_host);
  worker_builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_worker_port)),
                                  grpc::InsecureServerCredentials());
  worker_builder.RegisterService(&worker_link);
  std::unique_ptr<grpc::Server> worker_server = worker_builder.BuildAndStart();
  if (!worker_server) {
    std::cerr << "error: cannot listen on worker port " << absl::GetFlag(FLAGS_worker_port) << "\n";
    return 1;
  }

  pagoda::GenerationService generation(&cluster, tokenizer->get(), config.name);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_port)),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&generation);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "error: cannot listen on port " << absl::GetFlag(FLAGS_port) << "\n";
    return 1;
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);
  LOG(INFO) << "listening on " << host << ":" << absl::GetFlag(FLAGS_port)
            << " (workers: " << absl::GetFlag(FLAGS_worker_port) << "), model " << model;

  const std::string worker_binary =
      (std::filesystem::path(argv[0]).parent_path() / "pagoda-worker").string();
  for (int i = 0; i < absl::GetFlag(FLAGS_spawn_workers); ++i) {
    const pid_t pid = SpawnWorker(
        worker_binary,
        {absl::StrCat("--router=127.0.0.1:", absl::GetFlag(FLAGS_worker_port)), "--model=" + model,
         absl::StrCat("--kv_cache_mb=", absl::GetFlag(FLAGS_worker_kv_cache_mb)),
         absl::StrCat("--threads=", absl::GetFlag(FLAGS_worker_threads)),
         absl::StrCat("--max_num_batched_tokens=", absl::GetFlag(FLAGS_max_num_batched_tokens)),
         absl::StrCat("--max_num_seqs=", absl::GetFlag(FLAGS_max_num_seqs)),
         absl::StrCat("--name=local-", i)});
    LOG(INFO) << "spawned worker " << i << " (pid " << pid << ")";
  }

  // Ready (SERVING) exactly while at least one worker is connected.
  bool serving = false;
  pagoda::ClusterStats last;
  absl::Time last_log = absl::Now();
  for (;;) {
    const pagoda::ClusterStats stats = cluster.stats();
    if (absl::Now() - last_log > absl::Seconds(5) && stats.num_steps > last.num_steps) {
      // One line while busy, over the last interval (like vLLM's periodic stats).
      const double steps = static_cast<double>(stats.num_steps - last.num_steps);
      const double step_ms = (stats.step_seconds - last.step_seconds) / steps * 1e3;
      const double forward_ms = (stats.forward_seconds - last.forward_seconds) / steps * 1e3;
      LOG(INFO) << absl::StrFormat(
          "steps %.0f, step %.2f ms (forward %.2f, outside %.2f), running %d, waiting %d, KV "
          "usage %.1f%%",
          steps, step_ms, forward_ms, step_ms - forward_ms, stats.num_running, stats.num_waiting,
          stats.num_blocks ? 100.0 * stats.num_used_blocks / stats.num_blocks : 0.0);
      last = stats;
      last_log = absl::Now();
    }
    cluster.Tick(absl::Now());
    const bool now = stats.num_workers > 0;
    if (now != serving) {
      health->SetServingStatus(now);
      serving = now;
      LOG(INFO) << (now ? "serving" : "not serving: no worker connected");
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}
