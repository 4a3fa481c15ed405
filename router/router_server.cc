#include "router/router_server.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "common/process/grpc_security.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "router/api/generation_service.h"
#include "router/api/openai/openai_server.h"
#include "router/api/reflection_service.h"
#include "router/link/grpc_port_limits.h"
#include "router/link/worker_link_service.h"

namespace pagoda {

absl::Status RouterServer::CheckOptions(const RouterServerOptions& options) {
  if (options.models.empty() && options.model.empty()) {
    return absl::InvalidArgumentError("--model is required");
  }
  if (!options.models.empty()) {
    for (const ModelHostOptions& m : options.models) {
      if (m.path.empty()) return absl::InvalidArgumentError("--model: a model needs a path");
    }
    // Each of several models takes these from its own files.
    const std::pair<const char*, bool> per_model[] = {
        {"--tokenizer", !options.tokenizer.empty()},
        {"--served-model-name", !options.served_model_name.empty()},
        {"--rope-scaling", !options.rope_scaling.empty()},
        {"--chat-template", options.chat_template.has_value()}};
    if (options.models.size() > 1) {
      for (const auto& [flag, given] : per_model) {
        if (given) {
          return absl::InvalidArgumentError(
              absl::StrCat(flag,
                           " names one model's; with several --model, each takes its own from its "
                           "files (name them --model=NAME=PATH)"));
        }
      }
    }
  }
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

RouterServer::RouterServer(RouterServerOptions options) : options_(std::move(options)) {}

RouterServer::~RouterServer() { ShutdownWithin(absl::ZeroDuration()); }

absl::Status RouterServer::Load() {
  std::vector<ModelHostOptions> models = options_.models;
  if (models.empty()) {
    models.push_back({.path = options_.model,
                      .tokenizer = options_.tokenizer,
                      .rope_scaling = options_.rope_scaling,
                      .name = options_.served_model_name,
                      .chat_template = options_.chat_template,
                      .chat_template_source = options_.chat_template_source,
                      .tool_call_format = options_.tool_call_format,
                      .reasoning_format = options_.reasoning_format});
  } else {
    // The parsers given on the command line hold for every model.
    for (ModelHostOptions& m : models) {
      if (options_.tool_call_format) m.tool_call_format = options_.tool_call_format;
      if (options_.reasoning_format) m.reasoning_format = options_.reasoning_format;
    }
  }
  for (ModelHostOptions& m : models) {
    const std::string path = m.path;
    absl::StatusOr<std::unique_ptr<ModelHost>> host =
        ModelHost::Load(std::move(m), options_.cluster);
    if (!host.ok()) {
      // Name the model when there are several: which file failed is the first question.
      if (models.size() < 2) return host.status();
      return absl::Status(host.status().code(),
                          absl::StrCat("--model=", path, ": ", host.status().message()));
    }
    for (const auto& other : hosts_) {
      if (other->config().Fingerprint() == (*host)->config().Fingerprint()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--model: ", other->name(), " and ", (*host)->name(),
                         " are the same model (one fingerprint): serve it once"));
      }
    }
    RETURN_IF_ERROR(models_.Add((*host)->served()));
    hosts_.push_back(*std::move(host));
  }
  std::vector<LoraBase> bases;
  for (const auto& host : hosts_)
    bases.push_back({.name = host->name(), .config = &host->config()});
  const std::string& lora_dir = options_.local_workers.lora_dir;
  ASSIGN_OR_RETURN(
      std::vector<std::vector<LoraModule>> loras,
      AssignLoraModules(options_.lora_modules, bases,
                        lora_dir.empty() ? std::vector<std::string>() : std::vector{lora_dir}));
  lora_roots_ = LoraRoots(lora_dir, loras);
  for (size_t i = 0; i < hosts_.size(); ++i) hosts_[i]->SetLoraModules(std::move(loras[i]));
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
            return HttpResponse{"text/plain; version=0.0.4; charset=utf-8", RenderMetrics()};
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
  link.metrics = hosts_.front()->metrics();
  link.max_calls = options_.cluster.worker_limits.max_workers + 64;
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
  std::vector<Cluster*> clusters;
  for (const auto& host : hosts_) clusters.push_back(host->cluster());
  worker_link_ = std::make_unique<WorkerLinkService>(std::move(clusters), link);
  grpc::ServerBuilder worker_builder;
  worker_builder.AddListeningPort(absl::StrCat(host, ":", options_.worker_port),
                                  ServerCredentialsFor(options_.worker_tls), &worker_port_);
  worker_builder.RegisterService(worker_link_.get());
  // Workers' calls take no thread (the callback API; WorkerLinkService bounds them by
  // max_calls); the sync threads serve Loading reports, one brief call each.
  GrpcPortLimits worker_limits;
  worker_limits.name = "pagoda-worker-port";
  worker_limits.max_threads = 64;
  worker_limits.max_streams_per_connection = 4;  // a worker needs one
  ApplyGrpcPortLimits(worker_limits, &worker_builder);
  worker_server_ = worker_builder.BuildAndStart();
  if (!worker_server_ || worker_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on worker port ", options_.worker_port));
  }

  generation_ = std::make_unique<GenerationService>(
      &models_, options_.api_key,
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
    ASSIGN_OR_RETURN(
        h2_proxy_,
        H2Proxy::Start({.haproxy = options_.h2_proxy,
                        .host = host,
                        .port = options_.port,
                        .backend_port = own_port,
                        .max_requests_per_s = options_.h2_proxy_max_requests_per_s,
                        .max_streams_per_connection = std::min(options_.max_streams_per_connection,
                                                               kMaxProxiedStreamsPerConnection)}));
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
    http.api_key = options_.api_key;
    http.ready = [this] { return ready_.load(); };
    http.render_metrics = [this] { return RenderMetrics(); };
    http.cors = options_.cors;
    http.pooling = options_.pooling;
    http.web_ui = options_.web_ui;
    if (options_.allow_runtime_lora_updating) {
      http.change_adapter = [this](const std::string& name, const std::string& path) {
        return ChangeAdapter(name, path);
      };
    }
    ASSIGN_OR_RETURN(http_, OpenAiServer::Start(&models_, http));
  }
  {
    absl::MutexLock lock(&mu_);
    SetReadyLocked(false);
  }
  server_->GetHealthCheckService()->SetServingStatus("liveness", true);
  for (const auto& model : hosts_) {
    LOG(INFO) << "listening on " << host << ":" << port_ << " (workers: " << worker_port_
              << "), model " << model->name() << " = " << model->path();
  }

  LocalWorkersRouter router;
  router.worker_port = worker_port_;
  router.worker_token = link.worker_token;
  router.max_num_batched_tokens = options_.cluster.engine.max_num_batched_tokens;
  router.max_num_seqs = options_.cluster.engine.max_num_seqs;
  router.num_models = static_cast<int>(hosts_.size());
  for (const auto& model : hosts_) {
    router.model_name = model->name();
    RETURN_IF_ERROR(model->SpawnWorkers(options_.local_workers, router));
  }
  return absl::OkStatus();
}

absl::Status RouterServer::ChangeAdapter(const std::string& name, const std::string& path) {
  // The model: the one holding `name` to unload it; the one the file fits to load it.
  ModelHost* host = nullptr;
  for (const auto& h : hosts_) {
    if (h->cluster()->loras().Known(name)) host = h.get();
  }
  AdapterChange change{.name = name, .path = path};
  if (path.empty()) {
    if (host == nullptr) {
      return absl::NotFoundError(absl::StrCat("the LoRA adapter `", name, "` cannot be found"));
    }
  } else {
    if (host != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("the LoRA adapter `", name, "` has already been loaded"));
    }
    if (lora_roots_.empty()) {
      return absl::FailedPreconditionError(
          "no directory to load LoRA adapters from: start pagoda-router with --lora-dir");
    }
    std::vector<LoraBase> bases;
    for (const auto& h : hosts_) bases.push_back({.name = h->name(), .config = &h->config()});
    absl::StatusOr<std::vector<std::vector<LoraModule>>> assigned =
        AssignLoraModules({absl::StrCat(name, "=", path)}, bases, lora_roots_);
    if (!assigned.ok()) {
      // In the API's words: lora_name and lora_path, not the flag.
      return absl::InvalidArgumentError(absl::StrReplaceAll(
          assigned.status().message(), {{absl::StrCat("--lora-modules=", name, "=", path), name}}));
    }
    for (size_t i = 0; i < hosts_.size(); ++i) {
      if (!(*assigned)[i].empty()) {
        host = hosts_[i].get();
        change.name = (*assigned)[i][0].name;  // without a MODEL: prefix
      }
    }
  }
  auto answered = std::make_shared<absl::Notification>();
  auto result = std::make_shared<absl::Status>();
  host->cluster()->ChangeAdapter(change, [answered, result](absl::Status s) {
    *result = std::move(s);
    answered->Notify();
  });
  if (!answered->WaitForNotificationWithTimeout(absl::Minutes(2))) {
    return absl::DeadlineExceededError("the workers did not answer within 2 minutes");
  }
  if (result->ok()) {
    LOG(INFO) << (path.empty() ? "unloaded" : "loaded") << " LoRA adapter " << change.name << " of "
              << host->name();
  }
  return *result;
}

std::string RouterServer::RenderMetrics() const {
  std::vector<const MetricsRegistry*> registries;
  for (const auto& host : hosts_) registries.push_back(&host->registry());
  return MetricsRegistry::RenderAll(registries);
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
  while (!stopped_.HasBeenNotified()) {
    Tick();
    stopped_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
  }
}

void RouterServer::Tick() {
  const absl::Time now = absl::Now();
  ClusterStats stats;  // over every model: only the counts below are read
  for (const auto& model : hosts_) {
    const ClusterStats s = model->cluster()->stats();
    if (std::optional<std::string> line = model->NextStatsLine(s, now, hosts_.size() > 1)) {
      LOG(INFO) << *line;
    }
    model->cluster()->Tick(now);
    stats.num_workers += s.num_workers;
    stats.num_draining_workers += s.num_draining_workers;
    stats.num_running += s.num_running;
  }
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
  wait.num_spawned = options_.local_workers.num_workers * static_cast<int>(hosts_.size());
  wait.worker_port = worker_port_;
  if (!wait.serving) wait.loading = worker_link_->loading().Loading(now);
  if (stats.num_draining_workers > 0) {
    for (const auto& model : hosts_) {
      for (const WorkerStats& w : model->cluster()->worker_stats()) {
        if (w.draining) wait.draining.emplace_back(w.id, w.load.num_running + w.load.num_waiting);
      }
    }
  }
  if (std::optional<std::string> line = wait_line_.Next(wait, now)) LOG(INFO) << *line;
  for (const auto& model : hosts_) model->ReapWorkers();
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
