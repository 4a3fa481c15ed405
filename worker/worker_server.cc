#include "worker/worker_server.h"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_loader.h"
#include "common/model/weights_digest.h"
#include "glog/logging.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "worker/load_report_client.h"
#include "worker/transfer/kv_puller_service.h"
#include "worker/transfer/kv_transfer_service.h"
#include "worker/transfer/stage_link_client.h"
#include "worker/transfer/stage_link_service.h"

namespace pagoda {
namespace {

std::string HostName() {
  char host[256] = "worker";
  gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

WorkerServer::WorkerServer(WorkerServerOptions options) : options_(std::move(options)) {}

WorkerServer::~WorkerServer() { Shutdown(); }

absl::Status WorkerServer::StartHealth() {
  if (options_.health_port == 0) return absl::OkStatus();
  unimplemented_ = std::make_unique<grpc::CallbackGenericService>();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterCallbackGenericService(unimplemented_.get());
  builder.AddListeningPort(absl::StrCat("0.0.0.0:", options_.health_port),
                           grpc::InsecureServerCredentials());
  health_server_ = builder.BuildAndStart();
  if (!health_server_) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on health port ", options_.health_port));
  }
  health_ = health_server_->GetHealthCheckService();
  health_->SetServingStatus("", false);
  health_->SetServingStatus("liveness", false);
  return absl::OkStatus();
}

absl::Status WorkerServer::StartKvTransfers(WorkerEngine* engine) {
  const int port = options_.kv_transfer_port;
  if (port == 0) return absl::OkStatus();
  const WorkerServiceOptions& link = options_.service;
  const bool loopback = port == -1;
  kv_service_ = std::make_unique<KvTransferService>(&engine->kv_pool(), link.worker_token);
  // A pipeline stage takes the stage before's activations on the same port, and sends its own
  // to the next stage's with the same token and certificates.
  const ModelConfig& config = engine->config();
  if (!engine->layers().whole(config.num_layers)) {
    auto stage_link = std::make_unique<GrpcStageLink>(GrpcStageLinkOptions{
        .worker_token = link.worker_token,
        .tls = link.tls,
        .tls_pem = link.tls_pem,
        .dim = config.dim,
    });
    stage_link_ = stage_link.get();
    stage_service_ = std::make_unique<StageLinkService>(stage_link->mailbox(),
                                                        engine->info().max_num_batched_tokens,
                                                        config.dim, link.worker_token);
    engine->SetStageLink(std::move(stage_link));
  }
  kv_server_ = StartKvTransferServer(loopback ? "127.0.0.1:0" : absl::StrCat("0.0.0.0:", port),
                                     kv_service_.get(), link.tls_pem, &kv_transfer_bound_,
                                     stage_service_.get());
  if (!kv_server_ || kv_transfer_bound_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on KV transfer port ", port));
  }
  std::string advertise = options_.advertise_address;
  if (advertise.empty()) {
    advertise = absl::StrCat(loopback ? "127.0.0.1" : HostName(), ":", kv_transfer_bound_);
  }
  // The same token and certificates as the router link (issue 28).
  engine->EnableTransfers(std::make_unique<GrpcKvPuller>(GrpcKvPullerOptions{
                              .worker_token = link.worker_token,
                              .tls = link.tls,
                              .tls_pem = link.tls_pem,
                          }),
                          advertise);
  LOG(INFO) << "KV transfer port " << kv_transfer_bound_ << (link.tls ? " (TLS)" : "")
            << ", advertised as " << advertise
            << (link.worker_token.empty() ? "; no worker token: open to anyone" : "");
  return absl::OkStatus();
}

absl::Status WorkerServer::Validate() const {
  if (options_.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (const int port = options_.kv_transfer_port; port < -1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-transfer-port=", port, ": expected a port, 0 (off) or -1"));
  }
  if (options_.kv_transfer_port != 0 && options_.service.tls &&
      options_.service.tls_pem.cert.empty()) {
    return absl::InvalidArgumentError(
        "--kv-transfer-port with TLS needs --tls-cert and --tls-key: the transfer port serves "
        "TLS with them");
  }
  if (!options_.kv_cache_dir.dir.empty() && options_.kv_cache_dir.max_bytes <= 0) {
    return absl::InvalidArgumentError("--kv-cache-dir-max-gib must be > 0");
  }
  if (options_.kv_cache_dir.max_load < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--kv-cache-dir-load-s must be >= 0");
  }
  if (options_.engine.layers && options_.kv_transfer_port == 0) {
    return absl::InvalidArgumentError(
        "--layers needs --kv-transfer-port (or -1 on one machine): a pipeline stage takes and "
        "sends activations worker to worker on it");
  }
  if (options_.health_port < 0 || options_.health_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health-port=", options_.health_port, ": expected a port, or 0"));
  }
  return absl::OkStatus();
}

absl::Status WorkerServer::Start() {
  // Options first: nothing loads for a command line that cannot work.
  if (absl::Status valid = Validate(); !valid.ok()) return valid;
  if (options_.service.name.empty())
    options_.service.name = absl::StrCat(HostName(), ":", getpid());
  if (absl::Status health = StartHealth(); !health.ok()) return health;

  absl::StatusOr<std::unique_ptr<WeightSource>> weights = OpenWeightSource(options_.model);
  if (!weights.ok()) return weights.status();
  if (absl::Status s = (*weights)->ApplyRopeScaling(options_.engine.rope_scaling); !s.ok()) {
    return s;
  }
  // The router's log shows how far the load is (hashing, then packing the weights), every
  // few seconds of it.
  std::optional<LoadReportClient> reporter;
  std::function<void(int64_t, int64_t)> hashed;
  WorkerOptions engine_options = options_.engine;
  if (!options_.service.router_address.empty()) {
    reporter.emplace(options_.service);
    hashed = [&reporter](int64_t done, int64_t total) {
      reporter->Progress("hashing weights", done, total);
    };
    engine_options.on_load_progress = [&reporter](int64_t done, int64_t total) {
      reporter->Progress("loading weights", done, total);
    };
  }
  absl::StatusOr<std::string> digest = WeightsDigest(options_.model, hashed);
  if (!digest.ok()) return digest.status();
  (*weights)->set_weights_digest(*digest);  // the router asks for the same weights
  absl::StatusOr<std::unique_ptr<WorkerEngine>> engine =
      WorkerEngine::Create(**weights, engine_options);
  reporter.reset();
  weights->reset();  // the file's mapping
  if (!engine.ok()) return engine.status();
  LOG(INFO) << "model loaded: " << options_.model;
  if (!options_.kv_cache_dir.dir.empty()) {
    // Before the Hello: it offers what was loaded, as after a router restart.
    if (absl::Status disk = (*engine)->EnableDiskCache(options_.kv_cache_dir); !disk.ok()) {
      return disk;
    }
  }
  if (health_ != nullptr) health_->SetServingStatus("liveness", true);

  if (absl::Status transfers = StartKvTransfers(engine->get()); !transfers.ok()) return transfers;
  WorkerServiceOptions service_options = options_.service;
  if (health_ != nullptr) {
    grpc::HealthCheckServiceInterface* health = health_;
    service_options.on_ready = [health](bool ready) { health->SetServingStatus("", ready); };
  }
  if (stage_link_ != nullptr) {
    GrpcStageLink* stage_link = stage_link_;
    service_options.on_stage_wiring = [stage_link](const std::string& next) {
      LOG(INFO) << "pipeline stage wired: activations go to "
                << (next.empty() ? "nobody (the last stage)" : next);
      stage_link->SetNext(next);
    };
  }
  absl::MutexLock lock(&mu_);
  service_ = std::make_unique<WorkerService>(*std::move(engine), service_options);
  return absl::OkStatus();
}

int WorkerServer::Run() {
  WorkerService* service = nullptr;
  {
    absl::MutexLock lock(&mu_);
    service = service_.get();
  }
  CHECK(service != nullptr) << "WorkerServer::Run before a successful Start";
  return service->Run();
}

void WorkerServer::Drain() {
  absl::MutexLock lock(&mu_);
  if (service_ != nullptr) service_->Drain();
}

void WorkerServer::Shutdown() {
  const auto now = std::chrono::system_clock::now();
  if (health_server_) health_server_->Shutdown(now);
  // Before the engine (in service_) and its pool go.
  if (kv_server_) kv_server_->Shutdown(now);
  kv_server_.reset();
  kv_service_.reset();
}

}  // namespace pagoda
