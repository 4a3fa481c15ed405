// pagoda-router: the public pagoda.v1.Generation service (plus grpc.health.v1 and reflection)
// on --port, the WorkerLink stream for workers on --worker-port, and the Cluster between them.
// --spawn-workers=N also starts N local pagoda-worker processes: the one-command deployment.
// --http-port (8000) serves the OpenAI-compatible HTTP API over the same Cluster.
//
// Health (grpc.health.v1 on --port): "liveness" is SERVING while the process serves; "" (and
// "pagoda.v1.Generation") is SERVING while at least one worker that is not draining is
// connected. SIGTERM or SIGINT: readiness goes NOT_SERVING, new calls are refused, and the
// streams in flight get up to --shutdown-grace-s to finish before the router exits 0.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/command_line.h"
#include "common/http_server.h"
#include "common/jinja/chat_template.h"
#include "common/metrics.h"
#include "common/model/model_loader.h"
#include "common/model/weights_digest.h"
#include "common/secret.h"
#include "common/text/tokenizer_loader.h"
#include "glog/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/generation_service.h"
#include "router/openai_server.h"
#include "router/router_metrics.h"
#include "router/worker_link_service.h"

ABSL_FLAG(int, port, 50051, "public port (pagoda.v1.Generation, grpc.health.v1)");
ABSL_FLAG(int, worker_port, 50052, "port workers dial");
ABSL_FLAG(int, http_port, 8000, "OpenAI-compatible HTTP API (/v1/...); 0 = off");
ABSL_FLAG(std::string, chat_template, "",
          "Jinja chat template file for /v1/chat/completions; default: the model's own");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on");
ABSL_FLAG(std::string, model, "",
          "a llama2.c checkpoint (.bin, with tokenizer.bin beside it) or a Hugging Face model "
          "directory; workers must serve the same");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer file; default: the model's");
ABSL_FLAG(std::string, served_model_name, "",
          "the name in GetModelInfo and the metrics' model_name label; default: the model's "
          "file name without extension, or its directory's name");
ABSL_FLAG(int, spawn_workers, 0, "start this many local workers as child processes");
ABSL_FLAG(std::string, worker_kv_cache_mb, "auto",
          "--kv-cache-mb of spawned workers; auto: they share half the memory available");
ABSL_FLAG(std::string, worker_weight_dtype, "auto",
          "--weight-dtype of spawned workers: auto, f32, bf16 or int8");
ABSL_FLAG(std::string, worker_kv_cache_dtype, "auto",
          "--kv-cache-dtype of spawned workers: auto, f32, bf16 or f16");
ABSL_FLAG(int, worker_threads, 0, "--threads of spawned workers; 0 = the cores split between them");
ABSL_FLAG(std::string, placement, "prefix", "prefix | round_robin | least_loaded");
ABSL_FLAG(int, max_model_len, 0, "prompt + output tokens per sequence; 0 = the model's context");
ABSL_FLAG(int, max_num_batched_tokens, 512,
          "tokens per step and worker: a longer prompt is prefilled in chunks, and a chunk holds "
          "every decode of its step (docs/BENCHMARKS.md §8)");
ABSL_FLAG(int, max_num_seqs, 256, "sequences per step and worker");
ABSL_FLAG(int, max_waiting, 1024, "queued requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(double, heartbeat_timeout_s, 5.0, "a worker silent this long is dead");
ABSL_FLAG(std::string, kv_reservation, "on-demand",
          "on-demand: KV blocks as tokens arrive (paged); max-len: prompt + max_tokens reserved "
          "at admission (the contiguous baseline)");
ABSL_FLAG(bool, enable_prefix_caching, true, "reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(int, metrics_port, 0,
          "serve Prometheus metrics at http://HOST:PORT/metrics and readiness at /health; 0 = off");
ABSL_FLAG(double, shutdown_grace_s, 25.0, "on SIGTERM, how long in-flight streams may take");
ABSL_FLAG(
    std::string, worker_token, "",
    "the cluster's secret: workers must present it to connect (default: $PAGODA_WORKER_TOKEN; "
    "if neither is set, a random one for --spawn-workers only)");
ABSL_FLAG(bool, insecure_worker_port, false,
          "accept any worker that reaches --worker-port, without a token");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate: TLS on --worker-port (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: with --tls-cert, workers must present a client certificate it signed (mTLS)");
ABSL_FLAG(std::string, api_key, "",
          "every public call must carry authorization: Bearer KEY (default: $PAGODA_API_KEY; "
          "none = open). Health and reflection stay open");
ABSL_FLAG(double, step_timeout_s, 30.0,
          "a worker that does not answer a step this long is failed over like a dead one");
ABSL_FLAG(int, max_streams_per_connection, 256,
          "concurrent calls on one client connection; more wait in the client");

namespace {

pagoda::ProgramUsage Usage() {
  return {
      "pagoda-router",
      "pagoda-router --model=M [--port=50051 --worker-port=50052] [--spawn-workers=N] [flags]\n"
      "Serves pagoda.v1.Generation (and grpc.health.v1) on --port, the OpenAI API on --http-port;\n"
      "workers dial --worker-port.\n",
      {
          {"Model", {"model", "tokenizer", "served_model_name", "max_model_len", "chat_template"}},
          {"Network", {"host", "port", "http_port", "worker_port", "metrics_port"}},
          {"Local workers",
           {"spawn_workers", "worker_kv_cache_mb", "worker_kv_cache_dtype", "worker_threads",
            "worker_weight_dtype"}},
          {"Scheduling",
           {"placement", "max_num_batched_tokens", "max_num_seqs", "max_waiting", "kv_reservation",
            "enable_prefix_caching"}},
          {"Failure and shutdown", {"heartbeat_timeout_s", "step_timeout_s", "shutdown_grace_s"}},
          {"Security",
           {"worker_token", "insecure_worker_port", "tls_cert", "tls_key", "tls_ca", "api_key",
            "max_streams_per_connection"}},
      }};
}

// "stories260K" for .../stories260K.bin, "TinyLlama-1.1B" for .../TinyLlama-1.1B/.
std::string DefaultServedModelName(const std::string& model) {
  std::filesystem::path path(model);
  if (!path.has_filename()) path = path.parent_path();  // a trailing slash
  return std::filesystem::is_directory(path) ? path.filename().string() : path.stem().string();
}

// Gauges of the current state, read from the cluster at each scrape.
void AddStateGauges(pagoda::MetricsRegistry* registry, const pagoda::Cluster* cluster) {
  using Values = std::vector<std::pair<pagoda::MetricLabels, double>>;
  registry->AddGaugeFamily("pagoda_num_requests_running", "Sequences running on workers.",
                           [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_running}};
                           });
  registry->AddGaugeFamily("pagoda_num_requests_waiting",
                           "Sequences waiting for a worker or in a scheduler's queue.", [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_waiting}};
                           });
  registry->AddGaugeFamily("pagoda_num_workers", "Connected workers (draining ones included).",
                           [cluster] {
                             return Values{{{}, 1.0 * cluster->stats().num_workers}};
                           });
  auto per_worker = [cluster](auto value) {
    return [cluster, value] {
      Values out;
      for (const pagoda::WorkerStats& w : cluster->worker_stats()) {
        out.push_back({{{"worker", std::to_string(w.id)}}, value(w)});
      }
      return out;
    };
  };
  registry->AddGaugeFamily(
      "pagoda_kv_cache_usage", "Fraction of a worker's KV blocks in use (0..1).",
      per_worker([](const pagoda::WorkerStats& w) {
        return w.num_blocks ? static_cast<double>(w.num_used_blocks) / w.num_blocks : 0.0;
      }));
  registry->AddGaugeFamily(
      "pagoda_kv_cache_utilization",
      "KV slots the running sequences fill over the slots their block tables reserve (0..1; 0 "
      "when nothing runs).",
      per_worker([](const pagoda::WorkerStats& w) {
        return w.num_slots_reserved > 0
                   ? static_cast<double>(w.num_slots_used) / w.num_slots_reserved
                   : 0.0;
      }));
}

// Starts a local worker with `env` added to the router's environment (the worker token goes
// there, not on the command line, which any local user can read).
pid_t SpawnWorker(const std::string& binary, const std::vector<std::string>& args,
                  const std::vector<std::string>& env) {
  std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // local workers die with their router
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

// The chat template: --chat-template's file, else the model directory's, else the one in the
// tokenizer file (GGUF). Null when there is none, or the model's own does not parse (chat
// requests are then refused, everything else is served).
absl::StatusOr<std::unique_ptr<pagoda::jinja::ChatTemplate>> LoadTemplate(
    const std::string& flag, const std::string& model, const pagoda::Tokenizer& tokenizer) {
  std::string source;
  if (!flag.empty()) {
    std::ifstream in(flag, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("--chat-template: cannot read ", flag));
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else if (std::filesystem::is_directory(model)) {
    absl::StatusOr<std::string> found = pagoda::jinja::LoadChatTemplate(model);
    if (found.ok()) source = *std::move(found);
  }
  if (source.empty()) source = tokenizer.chat_template();
  if (source.empty()) {
    LOG(WARNING) << "no chat template: /v1/chat/completions is refused (see --chat-template)";
    return nullptr;
  }
  absl::StatusOr<pagoda::jinja::ChatTemplate> parsed = pagoda::jinja::ChatTemplate::Create(source);
  if (!parsed.ok()) {
    if (!flag.empty()) return parsed.status();
    LOG(WARNING) << "the model's chat template does not parse (" << parsed.status().message()
                 << "): /v1/chat/completions is refused";
    return nullptr;
  }
  return std::make_unique<pagoda::jinja::ChatTemplate>(*std::move(parsed));
}

// Idle connections each hold a descriptor: the common soft limit of 1024 runs out long before
// the hard one, and gRPC's listener does not recover from EMFILE.
void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    LOG(INFO) << "file descriptor limit raised from " << before << " to " << limit.rlim_max;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Termination signals are read by the main loop (sigtimedwait), never by a handler: block
  // them before any other thread exists, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  pagoda::ParseCommandLine(argc, argv, Usage());
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  RaiseFileLimit();
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
  // The weights' digest makes the fingerprint tell fine-tunes of one base model apart.
  absl::StatusOr<std::string> digest = pagoda::WeightsDigest(model);
  if (!digest.ok()) {
    std::cerr << "error: " << digest.status().message() << "\n";
    return 1;
  }
  loaded->weights_digest = *digest;
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
  options.engine.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  const std::string reservation = absl::GetFlag(FLAGS_kv_reservation);
  if (reservation == "max-len") {
    options.engine.kv_reservation = pagoda::KvReservation::kMaxLen;
  } else if (reservation != "on-demand") {
    std::cerr << "error: --kv-reservation must be on-demand or max-len\n";
    return 2;
  }
  const std::string placement = absl::GetFlag(FLAGS_placement);
  if (placement == "round_robin") {
    options.placement = pagoda::PlacementPolicy::kRoundRobin;
  } else if (placement == "least_loaded") {
    options.placement = pagoda::PlacementPolicy::kLeastLoaded;
  } else if (placement != "prefix") {
    std::cerr << "error: --placement must be prefix, round_robin or least_loaded\n";
    return 2;
  }
  std::string served_name = absl::GetFlag(FLAGS_served_model_name);
  if (served_name.empty()) served_name = DefaultServedModelName(model);
  pagoda::MetricsRegistry registry(pagoda::MetricLabels{{"model_name", served_name}});
  pagoda::RouterMetrics metrics(&registry);
  options.metrics = &metrics;
  pagoda::Cluster cluster(config, options);
  AddStateGauges(&registry, &cluster);
  // --metrics-port's /health: 200 while readiness (service "") is SERVING, else 503.
  std::atomic<bool> ready{false};  // declared before the server, which reads it
  std::unique_ptr<pagoda::HttpServer> metrics_server;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port > 0) {
    auto started = pagoda::HttpServer::Start(
        absl::GetFlag(FLAGS_host), port,
        {{"/metrics",
          [&registry] {
            return pagoda::HttpResponse{"text/plain; version=0.0.4; charset=utf-8",
                                        registry.Render()};
          }},
         {"/health", [&ready] {
            return ready ? pagoda::HttpResponse{"text/plain", "ready\n", 200}
                         : pagoda::HttpResponse{"text/plain", "not ready: no worker\n", 503};
          }}});
    if (!started.ok()) {
      std::cerr << "error: metrics: " << started.status().message() << "\n";
      return 1;
    }
    metrics_server = *std::move(started);
  }

  pagoda::WorkerLinkOptions link_options;
  link_options.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout_s));
  link_options.step_timeout = absl::Seconds(absl::GetFlag(FLAGS_step_timeout_s));
  link_options.metrics = &metrics;
  if (!absl::GetFlag(FLAGS_insecure_worker_port)) {
    link_options.worker_token =
        pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_worker_token), pagoda::kWorkerTokenEnv);
    if (link_options.worker_token.empty()) {
      link_options.worker_token = pagoda::RandomToken();
      LOG(INFO) << "no --worker-token or $" << pagoda::kWorkerTokenEnv
                << ": made a random one, so only the workers this router spawns can connect";
    }
  } else {
    LOG(WARNING) << "--insecure-worker-port: anyone who reaches port "
                 << absl::GetFlag(FLAGS_worker_port) << " can join as a worker";
  }
  pagoda::WorkerLinkService worker_link(&cluster, link_options);
  absl::StatusOr<pagoda::TlsPem> tls = pagoda::ReadTlsPem(
      absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca));
  if (tls.ok() && !tls->ca.empty() && tls->cert.empty()) {
    tls = absl::InvalidArgumentError("--tls-ca needs --tls-cert and --tls-key");
  }
  if (!tls.ok()) {
    std::cerr << "error: " << tls.status().message() << "\n";
    return 2;
  }
  if (const std::string d = absl::GetFlag(FLAGS_worker_weight_dtype);
      d != "auto" && d != "f32" && d != "bf16" && d != "int8") {
    std::cerr << "error: --worker-weight-dtype=" << d << ": expected auto, f32, bf16 or int8\n";
    return 2;
  }
  // Checked here too, so a typo stops the router rather than every worker it spawns.
  if (const std::string dtype = absl::GetFlag(FLAGS_worker_kv_cache_dtype);
      dtype != "auto" && dtype != "f32" && dtype != "bf16" && dtype != "f16") {
    std::cerr << "error: --worker-kv-cache-dtype=" << dtype
              << ": expected auto, f32, bf16 or f16\n";
    return 2;
  }
  if (!tls->cert.empty() && absl::GetFlag(FLAGS_spawn_workers) > 0) {
    std::cerr << "error: --spawn-workers dials 127.0.0.1 in plaintext; TLS is for remote workers\n";
    return 2;
  }
  grpc::ServerBuilder worker_builder;
  const std::string host = absl::GetFlag(FLAGS_host);
  worker_builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_worker_port)),
                                  pagoda::WorkerPortCredentials(*tls));
  worker_builder.RegisterService(&worker_link);
  std::unique_ptr<grpc::Server> worker_server = worker_builder.BuildAndStart();
  if (!worker_server) {
    std::cerr << "error: cannot listen on worker port " << absl::GetFlag(FLAGS_worker_port) << "\n";
    return 1;
  }

  pagoda::GenerationService generation(
      &cluster, tokenizer->get(), served_name, &metrics,
      pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_api_key), pagoda::kApiKeyEnv));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_port)),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&generation);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             absl::GetFlag(FLAGS_max_streams_per_connection));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "error: cannot listen on port " << absl::GetFlag(FLAGS_port) << "\n";
    return 1;
  }
  auto chat_template = LoadTemplate(absl::GetFlag(FLAGS_chat_template), model, **tokenizer);
  if (!chat_template.ok()) {
    std::cerr << "error: " << chat_template.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<pagoda::OpenAiServer> http;
  if (const int port = absl::GetFlag(FLAGS_http_port); port > 0) {
    pagoda::OpenAiServerOptions http_options;
    http_options.host = host;
    http_options.port = port;
    http_options.model_name = served_name;
    http_options.api_key =
        pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_api_key), pagoda::kApiKeyEnv);
    http_options.fingerprint = absl::StrCat("fp_", config.weights_digest.substr(0, 16));
    http_options.ready = [&ready] { return ready.load(); };
    http_options.registry = &registry;
    http_options.metrics = &metrics;
    auto started =
        pagoda::OpenAiServer::Start(&cluster, tokenizer->get(), chat_template->get(), http_options);
    if (!started.ok()) {
      std::cerr << "error: " << started.status().message() << "\n";
      return 1;
    }
    http = *std::move(started);
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  auto set_ready = [health, &ready](bool now_ready) {
    health->SetServingStatus("", now_ready);
    health->SetServingStatus(pagoda::v1::Generation::service_full_name(), now_ready);
    ready = now_ready;
  };
  set_ready(false);
  health->SetServingStatus("liveness", true);
  LOG(INFO) << "listening on " << host << ":" << absl::GetFlag(FLAGS_port)
            << " (workers: " << absl::GetFlag(FLAGS_worker_port) << "), model " << model;

  const std::string worker_binary =
      (std::filesystem::path(argv[0]).parent_path() / "pagoda-worker").string();
  const int num_spawned = absl::GetFlag(FLAGS_spawn_workers);
  // Local workers share the machine: the cores, and (auto) the worker's default half of the
  // available memory, each its part.
  const int worker_threads =
      absl::GetFlag(FLAGS_worker_threads) > 0
          ? absl::GetFlag(FLAGS_worker_threads)
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                            std::max(1, num_spawned));
  for (int i = 0; i < num_spawned; ++i) {
    const pid_t pid = SpawnWorker(
        worker_binary,
        {absl::StrCat("--router=127.0.0.1:", absl::GetFlag(FLAGS_worker_port)), "--model=" + model,
         absl::StrCat("--kv_cache_mb=", absl::GetFlag(FLAGS_worker_kv_cache_mb)),
         absl::StrCat("--kv_cache_memory_fraction=", 0.5 / num_spawned),
         absl::StrCat("--kv_cache_dtype=", absl::GetFlag(FLAGS_worker_kv_cache_dtype)),
         absl::StrCat("--threads=", worker_threads),
         "--weight_dtype=" + absl::GetFlag(FLAGS_worker_weight_dtype),
         absl::StrCat("--max_num_batched_tokens=", absl::GetFlag(FLAGS_max_num_batched_tokens)),
         absl::StrCat("--max_num_seqs=", absl::GetFlag(FLAGS_max_num_seqs)),
         absl::StrCat("--name=local-", i)},
        {absl::StrCat(pagoda::kWorkerTokenEnv, "=", link_options.worker_token)});
    LOG(INFO) << "spawned worker " << i << " (pid " << pid << ")";
  }

  // Ready (SERVING) exactly while at least one worker that is not draining is connected.
  bool serving = false;
  pagoda::ClusterStats last;
  absl::Time last_log = absl::Now();
  double last_prompt = 0, last_generated = 0, last_queries = 0, last_hits = 0;
  std::thread shutdown;  // runs Server::Shutdown, which waits for the streams in flight
  std::atomic<bool> streams_done{false};
  for (;;) {
    const pagoda::ClusterStats stats = cluster.stats();
    if (absl::Now() - last_log > absl::Seconds(5) && stats.num_steps > last.num_steps) {
      // One line while busy, over the last interval (like vLLM's periodic stats).
      const double steps = static_cast<double>(stats.num_steps - last.num_steps);
      const double step_ms = (stats.step_seconds - last.step_seconds) / steps * 1e3;
      const double forward_ms = (stats.forward_seconds - last.forward_seconds) / steps * 1e3;
      const double seconds = absl::ToDoubleSeconds(absl::Now() - last_log);
      const double prompt = metrics.prompt_tokens->value();
      const double generated = metrics.generation_tokens->value();
      const double queries = metrics.prefix_cache_queries->value();
      const double hits = metrics.prefix_cache_hits->value();
      LOG(INFO) << absl::StrFormat(
          "prompt %.1f tok/s, generation %.1f tok/s, running %d, waiting %d, KV usage %.1f%%, "
          "prefix hit rate %.1f%%; steps %.0f, step %.2f ms (forward %.2f, outside %.2f)",
          (prompt - last_prompt) / seconds, (generated - last_generated) / seconds,
          stats.num_running, stats.num_waiting,
          stats.num_blocks ? 100.0 * stats.num_used_blocks / stats.num_blocks : 0.0,
          queries > last_queries ? 100.0 * (hits - last_hits) / (queries - last_queries) : 0.0,
          steps, step_ms, forward_ms, step_ms - forward_ms);
      last = stats;
      last_log = absl::Now();
      last_prompt = prompt;
      last_generated = generated;
      last_queries = queries;
      last_hits = hits;
    }
    cluster.Tick(absl::Now());
    const bool now = !shutdown.joinable() && stats.num_workers > stats.num_draining_workers;
    if (now != serving) {
      set_ready(now);
      serving = now;
      LOG(INFO) << (now ? "serving" : "not serving: no worker ready");
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (streams_done) break;
    // The loop's 100 ms tick doubles as the wait for a termination signal.
    const timespec tick = {0, 100'000'000};
    siginfo_t info;
    if (sigtimedwait(&stop_signals, &info, &tick) > 0 && !shutdown.joinable()) {
      const double grace = absl::GetFlag(FLAGS_shutdown_grace_s);
      LOG(INFO) << "signal " << info.si_signo << ": refusing new calls; in-flight streams have "
                << grace << " s to finish";
      set_ready(false);
      serving = false;
      shutdown = std::thread([&, grace] {
        server->Shutdown(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(grace * 1000)));
        if (http) http->Stop();
        streams_done = true;
      });
    }
  }
  shutdown.join();
  // Workers lose their stream and reconnect to whichever router comes next.
  worker_server->Shutdown(std::chrono::system_clock::now());
  LOG(INFO) << "stopped";
  return 0;
}
