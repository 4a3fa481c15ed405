#include "router/router_server.h"

#include <chrono>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/model_loader.h"
#include "common/model/weights_digest.h"
#include "common/process/grpc_security.h"
#include "common/process/progress_meter.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "lib/text/tokenizer_loader.h"
#include "router/api/generation_service.h"
#include "router/api/openai/openai_server.h"
#include "router/api/reflection_service.h"
#include "router/core/cluster_gauges.h"
#include "router/core/model_length.h"
#include "router/link/grpc_port_limits.h"
#include "router/link/worker_link_service.h"

namespace pagoda {
namespace {

// "stories260K" for .../stories260K.bin, "TinyLlama-1.1B" for .../TinyLlama-1.1B/.
std::string DefaultServedModelName(const std::string& model) {
  std::filesystem::path path(model);
  if (!path.has_filename()) path = path.parent_path();  // a trailing slash
  return std::filesystem::is_directory(path) ? path.filename().string() : path.stem().string();
}

std::string ServedModelName(const RouterServerOptions& options) {
  return options.served_model_name.empty() ? DefaultServedModelName(options.model)
                                           : options.served_model_name;
}

// The model's own chat template: the model directory's, else the one in the tokenizer file
// (GGUF). None when there is none or it does not parse: chat requests are then refused,
// everything else is served.
std::optional<jinja::ChatTemplate> ModelChatTemplate(const std::string& model,
                                                     const Tokenizer& tokenizer,
                                                     std::string* source_out) {
  std::string& source = *source_out;
  if (std::filesystem::is_directory(model)) {
    absl::StatusOr<std::string> found = jinja::LoadChatTemplate(model);
    if (found.ok()) source = *std::move(found);
  }
  if (source.empty()) source = tokenizer.chat_template();
  if (source.empty()) {
    LOG(WARNING) << "no chat template: /v1/chat/completions is refused (see --chat-template)";
    return std::nullopt;
  }
  absl::StatusOr<jinja::ChatTemplate> parsed = jinja::ChatTemplate::Create(source);
  if (!parsed.ok()) {
    LOG(WARNING) << "the model's chat template does not parse (" << parsed.status().message()
                 << "): /v1/chat/completions is refused";
    return std::nullopt;
  }
  return *std::move(parsed);
}

}  // namespace

absl::Status RouterServer::CheckOptions(const RouterServerOptions& options) {
  if (options.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (!options.worker_tls.ca.empty() && options.worker_tls.cert.empty()) {
    return absl::InvalidArgumentError("--tls-ca needs --tls-cert and --tls-key");
  }
  RETURN_IF_ERROR(CheckLocalWorkersOptions(options.local_workers));
  if (options.cluster.stall_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--stall-timeout-s must be above 0");
  }
  // A call of n samples pauses as one: a smaller cap would cancel it whenever it pauses.
  const int max_n = options.cluster.engine.max_n;
  for (const auto& [flag, cap] :
       {std::pair{"--max-paused-per-connection", options.cluster.paused_caps.max_per_connection},
        std::pair{"--max-paused-per-client", options.cluster.paused_caps.max_per_client},
        std::pair{"--max-paused-sequences", options.cluster.paused_caps.max_total}}) {
    if (cap != 0 && cap < max_n) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " = ", cap, ": must be 0 (no cap) or at least n's limit, ", max_n));
    }
  }
  if (!options.worker_tls.cert.empty() && options.local_workers.num_workers > 0) {
    return absl::InvalidArgumentError(
        "--spawn-workers dials 127.0.0.1 in plaintext; TLS is for remote workers");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(RouterServerOptions options) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<RouterServer> server(new RouterServer(std::move(options)));
  RETURN_IF_ERROR(server->Load());
  RETURN_IF_ERROR(server->Listen());
  return server;
}

RouterServer::RouterServer(RouterServerOptions options)
    : options_(std::move(options)),
      served_name_(ServedModelName(options_)),
      registry_(MetricLabels{{"model_name", served_name_}}),
      metrics_(&registry_) {}

RouterServer::~RouterServer() { ShutdownWithin(absl::ZeroDuration()); }

absl::Status RouterServer::Load() {
  // The router holds no weights: the checkpoint's header gives the shape and fingerprint.
  ASSIGN_OR_RETURN(config_, LoadModelConfig(options_.model));
  RETURN_IF_ERROR(ApplyRopeScalingFlag(options_.rope_scaling, &config_));
  RETURN_IF_ERROR(CheckMaxModelLen(options_.cluster.engine.max_model_len, config_));
  // The weights' digest makes the fingerprint tell fine-tunes of one base model apart.
  {
    // Every byte of the weights is read once for the fingerprint: minutes for a large model on
    // a cold disk, so it shows its progress as a worker's load does.
    std::optional<ProgressMeter> progress;  // from the first read, which knows the total
    ASSIGN_OR_RETURN(
        config_.weights_digest, WeightsDigest(options_.model, [&](int64_t done, int64_t total) {
          if (!progress) {
            progress.emplace("hashing the model's weights", total, ProgressMeter::ForStderr());
          }
          progress->Add(done - progress->done());
        }));
  }
  ASSIGN_OR_RETURN(tokenizer_, LoadModelTokenizer(options_.model, options_.tokenizer, config_));
  std::string source = options_.chat_template_source;
  chat_template_ = options_.chat_template ? options_.chat_template
                                          : ModelChatTemplate(options_.model, *tokenizer_, &source);
  if (!chat_template_) source.clear();
  tool_call_format_ = options_.tool_call_format.value_or(DetectToolCallFormat(source));
  reasoning_format_ = options_.reasoning_format.value_or(DetectReasoningFormat(source));
  LOG(INFO) << "chat outputs: tool calls " << ToolCallFormatName(tool_call_format_)
            << ", reasoning " << ReasoningFormatName(reasoning_format_)
            << (options_.tool_call_format ? "" : " (tool calls detected from the template)");
  ClusterOptions cluster = options_.cluster;
  cluster.metrics = &metrics_;
  cluster_ = std::make_unique<Cluster>(config_, cluster);
  AddClusterGauges(&registry_, cluster_.get());
  return absl::OkStatus();
}

absl::Status RouterServer::Listen() {
  const std::string& host = options_.host;
  if (options_.metrics_port) {
    // /health: 200 while readiness (service "") is SERVING, else 503.
    auto started = HttpServer::Start(
        host, *options_.metrics_port,
        {{"/metrics",
          [this] {
            return HttpResponse{"text/plain; version=0.0.4; charset=utf-8", registry_.Render()};
          }},
         {"/health", [this] {
            return ready_ ? HttpResponse{"text/plain", "ready\n", 200}
                          : HttpResponse{"text/plain", "not ready: no worker\n", 503};
          }}});
    if (!started.ok()) {
      return absl::Status(started.status().code(),
                          absl::StrCat("metrics: ", started.status().message()));
    }
    metrics_server_ = *std::move(started);
  }

  WorkerLinkOptions link;
  link.heartbeat_timeout = options_.heartbeat_timeout;
  link.step_timeout = options_.step_timeout;
  link.metrics = &metrics_;
  if (options_.insecure_worker_port) {
    LOG(WARNING) << "--insecure-worker-port: anyone who reaches port " << options_.worker_port
                 << " can join as a worker";
  } else {
    link.worker_token = options_.worker_token;
    if (link.worker_token.empty()) {
      link.worker_token = RandomToken();
      LOG(INFO) << "no --worker-token or $" << kWorkerTokenEnv
                << ": made a random one, so only the workers this router spawns can connect";
    }
  }
  worker_link_ = std::make_unique<WorkerLinkService>(cluster_.get(), link);
  grpc::ServerBuilder worker_builder;
  worker_builder.AddListeningPort(absl::StrCat(host, ":", options_.worker_port),
                                  ServerCredentialsFor(options_.worker_tls), &worker_port_);
  worker_builder.RegisterService(worker_link_.get());
  // One handler thread per connected worker, and brief ones for calls refused or timed out
  // before their Hello: bounded, so strangers cannot keep a real worker out.
  GrpcPortLimits worker_limits;
  worker_limits.name = "pagoda-worker-port";
  worker_limits.max_threads = options_.cluster.worker_limits.max_workers + 64;
  worker_limits.max_streams_per_connection = 4;  // a worker needs one
  ApplyGrpcPortLimits(worker_limits, &worker_builder);
  worker_server_ = worker_builder.BuildAndStart();
  if (!worker_server_ || worker_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on worker port ", options_.worker_port));
  }

  generation_ = std::make_unique<GenerationService>(
      cluster_.get(), tokenizer_.get(), served_name_, &metrics_, options_.api_key,
      options_.h2_proxy.empty()
          ? std::pair<std::string, std::string>()
          : std::pair<std::string, std::string>(kProxyClientHeader, kProxyConnectionHeader));
  grpc::EnableDefaultHealthCheckService(true);  // after the worker port's server: not there
  grpc::ServerBuilder builder;
  // Behind the proxy the router's own server is on a loopback port only the proxy dials.
  const bool proxied = !options_.h2_proxy.empty();
  builder.AddListeningPort(
      proxied ? std::string("127.0.0.1:0") : absl::StrCat(host, ":", options_.port),
      grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(generation_.get());
  if (options_.enable_reflection) {
    // Our own: gRPC's would describe every linked proto, worker.proto too. gRPC's built-in
    // health service registers no descriptor; naming ours links health.proto's in.
    reflection_ = std::make_unique<PublicReflection>(std::vector<std::string>{
        v1::Generation::service_full_name(),
        grpc::health::v1::HealthCheckRequest::descriptor()->file()->service(0)->full_name(),
        grpc::reflection::v1::ServerReflection::service_full_name(),
        grpc::reflection::v1alpha::ServerReflection::service_full_name()});
    builder.RegisterService(&reflection_->v1);
    builder.RegisterService(&reflection_->v1alpha);
  }
  GrpcPortLimits public_limits;
  public_limits.name = "pagoda-public-port";
  public_limits.max_streams_per_connection = options_.max_streams_per_connection;
  ApplyGrpcPortLimits(public_limits, &builder);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on port ", options_.port));
  }
  if (proxied) {
    const int own_port = port_;
    ASSIGN_OR_RETURN(h2_proxy_,
                     H2Proxy::Start({.haproxy = options_.h2_proxy,
                                     .host = host,
                                     .port = options_.port,
                                     .backend_port = own_port,
                                     .max_requests_per_s = options_.h2_proxy_max_requests_per_s}));
    port_ = h2_proxy_->port();
    LOG(INFO) << "HTTP/2 flood guard: HAProxy (" << options_.h2_proxy << ", pid "
              << h2_proxy_->pid() << ") serves the public gRPC port " << host << ":" << port_
              << " and forwards to the router on 127.0.0.1:" << own_port
              << " (--h2-proxy=off to serve it directly, e.g. behind another proxy)";
  } else {
    LOG(WARNING) << "no HTTP/2 flood guard: gRPC serves the public port " << host << ":" << port_
                 << " directly, with no bound on rapid reset or CONTINUATION floods (gRPC 1.51); "
                    "put a proxy in front, or install haproxy and use --h2-proxy=auto";
  }

  if (options_.http_port) {
    OpenAiServerOptions http;
    http.host = host;
    http.port = *options_.http_port;
    http.model_name = served_name_;
    http.api_key = options_.api_key;
    http.fingerprint = absl::StrCat("fp_", config_.weights_digest.substr(0, 16));
    http.ready = [this] { return ready_.load(); };
    http.registry = &registry_;
    http.metrics = &metrics_;
    http.cors = options_.cors;
    http.pooling = options_.pooling;
    http.tool_format = tool_call_format_;
    http.reasoning_format = reasoning_format_;
    http.web_ui = options_.web_ui;
    ASSIGN_OR_RETURN(http_, OpenAiServer::Start(cluster_.get(), tokenizer_.get(),
                                                chat_template_ ? &*chat_template_ : nullptr, http));
  }
  {
    absl::MutexLock lock(&mu_);
    SetReadyLocked(false);
  }
  server_->GetHealthCheckService()->SetServingStatus("liveness", true);
  LOG(INFO) << "listening on " << host << ":" << port_ << " (workers: " << worker_port_
            << "), model " << options_.model;

  LocalWorkersRouter router;
  router.model = options_.model;
  router.rope_scaling = options_.rope_scaling;
  router.worker_port = worker_port_;
  router.worker_token = link.worker_token;
  router.max_num_batched_tokens = options_.cluster.engine.max_num_batched_tokens;
  router.max_num_seqs = options_.cluster.engine.max_num_seqs;
  ASSIGN_OR_RETURN(local_workers_, LocalWorkers::Start(options_.local_workers, router));
  return absl::OkStatus();
}

int RouterServer::http_port() const { return http_ ? http_->port() : 0; }
int RouterServer::metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

void RouterServer::SetReadyLocked(bool ready) {
  ready_ = ready;  // first: whoever sees gRPC's readiness sees the HTTP /health's too
  serving_ = ready;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", ready);
  health->SetServingStatus(v1::Generation::service_full_name(), ready);
}

void RouterServer::Run() {
  stats_line_.emplace(&metrics_, absl::Now());
  while (!stopped_.HasBeenNotified()) {
    Tick();
    stopped_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
  }
}

void RouterServer::Tick() {
  const ClusterStats stats = cluster_->stats();
  if (std::optional<std::string> line = stats_line_->Next(stats, absl::Now())) {
    LOG(INFO) << *line;
  }
  cluster_->Tick(absl::Now());
  if (h2_proxy_) h2_proxy_->Reap();  // restarts an HAProxy that died
  WaitLine::State wait;
  {
    // Ready (SERVING) exactly while at least one worker that is not draining is connected and
    // the HAProxy in front of the public port (if any) runs.
    absl::MutexLock lock(&mu_);
    const bool proxy_up = h2_proxy_ == nullptr || h2_proxy_->running();
    const bool ready =
        !shutting_down_ && stats.num_workers > stats.num_draining_workers && proxy_up;
    if (ready != serving_) {
      SetReadyLocked(ready);
      LOG(INFO) << (ready       ? "serving"
                    : !proxy_up ? "not serving: HAProxy is down"
                                : "not serving: no worker ready");
    }
    wait.serving = ready;
    wait.shutting_down = shutting_down_;
    wait.proxy_down = !proxy_up;
  }
  wait.num_workers = stats.num_workers;
  wait.num_running = stats.num_running;
  wait.num_spawned = options_.local_workers.num_workers;
  wait.worker_port = worker_port_;
  if (!wait.serving) wait.loading = worker_link_->loading().Loading(absl::Now());
  if (stats.num_draining_workers > 0) {
    for (const WorkerStats& w : cluster_->worker_stats()) {
      if (w.draining) wait.draining.emplace_back(w.id, w.load.num_running + w.load.num_waiting);
    }
  }
  if (std::optional<std::string> line = wait_line_.Next(wait, absl::Now())) LOG(INFO) << *line;
  local_workers_->Reap();
}

void RouterServer::Shutdown() { ShutdownWithin(options_.shutdown_grace); }

void RouterServer::ShutdownWithin(absl::Duration grace) {
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    first = !shutting_down_;
    shutting_down_ = true;
    if (first && server_) SetReadyLocked(false);
  }
  if (!first) {
    stopped_.WaitForNotification();
    return;
  }
  if (server_) {
    LOG(INFO) << "refusing new calls; in-flight streams have " << absl::ToDoubleSeconds(grace)
              << " s to finish";
    server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  }
  if (http_) http_->Stop();
  // Workers lose their stream and reconnect to whichever router comes next.
  if (worker_server_) worker_server_->Shutdown(std::chrono::system_clock::now());
  if (server_) LOG(INFO) << "stopped";
  stopped_.Notify();
}

}  // namespace pagoda
