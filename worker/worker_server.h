// The whole worker as one object, the twin of the router's RouterServer: options in, then
// Start (the health port, the weights, the KV transfer port), Run (the stream to the router,
// until drained or refused) and Shutdown. pagoda-worker's main only reads flags into
// WorkerServerOptions and turns signals into Drain.
#ifndef PAGODA_WORKER_WORKER_SERVER_H_
#define PAGODA_WORKER_WORKER_SERVER_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/worker_options.h"
#include "worker/worker_service.h"

namespace grpc {
class CallbackGenericService;
class Server;
class HealthCheckServiceInterface;
}  // namespace grpc

namespace pagoda {

class GrpcStageLink;
class KvTransferService;
class StageLinkService;

struct WorkerServerOptions {
  // A GGUF file, a llama2.c checkpoint or a Hugging Face directory; the router asks for the
  // same weights by their digest.
  std::string model;
  WorkerOptions engine;
  // The stream to the router: its address, this worker's name, the cluster's token and TLS,
  // the drain timeout. on_ready is WorkerServer's own (the readiness probe).
  WorkerServiceOptions service;
  int health_port = 0;  // grpc.health.v1 on 0.0.0.0:port; 0 = none
  // Serve this worker's KV blocks to peers and pull theirs: 0 = off, -1 = a free port on
  // loopback (a router's --spawn-workers), else 0.0.0.0:port.
  int kv_transfer_port = 0;
  std::string advertise_address;  // host:port peers dial; "" = this host and the bound port
  // --kv-cache-dir: full blocks kept on disk across restarts (issue 38); dir "" = off.
  KvDiskCacheOptions kv_cache_dir;
};

class WorkerServer {
 public:
  explicit WorkerServer(WorkerServerOptions options);
  ~WorkerServer();  // Shutdown()

  // The options alone: INVALID_ARGUMENT naming the flag for a command line that cannot work
  // (no model, a port out of range, TLS on the transfer port without a certificate).
  absl::Status Validate() const;

  // Validate(), then brings the health port up first (liveness NOT_SERVING while the weights load,
  // so a startup probe tells "loading" from "dead"), loads the weights and what --kv-cache-dir
  // keeps, then binds the KV transfer port. UNAVAILABLE for a port that cannot be bound, the
  // loader's error for weights it cannot read, FAILED_PRECONDITION for a KV cache directory
  // another worker holds.
  absl::Status Start();

  // Serves the router until drained (0) or refused by it (1: another model or token), then
  // writes the pool's blocks to --kv-cache-dir. REQUIRES: Start() succeeded.
  int Run();

  // Starts a drain; thread-safe, returns at once. Between Start and Run, Run then returns at
  // once; before Start there is nothing to drain.
  void Drain();

  // Stops the health and transfer ports (after Run returned). Idempotent.
  void Shutdown();

  int kv_transfer_port() const { return kv_transfer_bound_; }

 private:
  absl::Status StartHealth();
  absl::Status StartKvTransfers(WorkerEngine* engine);

  WorkerServerOptions options_;
  std::unique_ptr<grpc::CallbackGenericService> unimplemented_;  // gRPC wants one besides health
  std::unique_ptr<grpc::Server> health_server_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;  // health_server_'s
  std::unique_ptr<KvTransferService> kv_service_;
  // A pipeline stage's (--layers): its activations' port service; the link is the engine's.
  std::unique_ptr<StageLinkService> stage_service_;
  GrpcStageLink* stage_link_ = nullptr;  // the engine's
  std::unique_ptr<grpc::Server> kv_server_;
  int kv_transfer_bound_ = 0;

  absl::Mutex mu_;
  std::unique_ptr<WorkerService> service_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_SERVER_H_
