// The router's side of the WorkerLink stream (gRPC's callback API: no thread per worker; a
// worker's messages arrive on gRPC's threads and go straight to its WorkerConnection). The
// call's token is checked before anything is read, and the Hello must follow within
// hello_timeout; at most max_calls calls are open at once. A worker's Hello names its model by
// fingerprint, which picks the Cluster of the router's model it serves (a router may serve
// several); an accepted worker becomes a Cluster worker whose Executor (WorkerConnection) writes
// StepCommands to the stream and waits for the matching StepResult. A broken stream, or no message
// for `heartbeat_timeout` (CallDeadlines), makes the worker dead: Execute fails and the Cluster
// moves its sequences. A worker that sends Drain gets no new requests; once it holds nothing it is
// sent Drained, and it closes the stream. Before it connects, a worker still loading its model
// reports how far it is (Loading, same token): logged, and kept on a LoadingBoard for the router's
// wait line. A worker whose Hello holds a range of its model's layers is a pipeline stage: it waits
// for stages that tile the model, and they serve as one worker (StageGroups).
#ifndef PAGODA_ROUTER_LINK_WORKER_LINK_SERVICE_H_
#define PAGODA_ROUTER_LINK_WORKER_LINK_SERVICE_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/process/secret.h"
#include "pagoda/v1/worker.grpc.pb.h"
#include "router/core/cluster.h"
#include "router/link/call_deadlines.h"
#include "router/link/loading_board.h"
#include "router/link/stage_groups.h"

namespace pagoda {

struct WorkerLinkOptions {
  absl::Duration heartbeat_timeout = absl::Seconds(5);  // silent this long: dead
  // The Hello must come this long after the call opens (a worker sends it at once).
  absl::Duration hello_timeout = absl::Seconds(10);
  // A step unanswered this long (a hung forward pass): the worker is failed over like a dead
  // one. Far above the slowest legitimate step.
  absl::Duration step_timeout = absl::Seconds(30);
  // Workers must present `authorization: Bearer <worker_token>` on Connect; "" leaves the port
  // open to anyone who reaches it (--insecure-worker-port).
  std::string worker_token;
  // Calls open at once (connected workers and calls before their Hello); beyond them a call is
  // refused with RESOURCE_EXHAUSTED, so strangers cannot keep a real worker out for long.
  int max_calls = 256 + 64;
  RouterMetrics* metrics = nullptr;  // refusals are counted when set; not owned
};

class WorkerLinkService final
    : public v1::WorkerLink::WithCallbackMethod_Connect<v1::WorkerLink::Service> {
 public:
  // One Cluster a served model (at least one); not owned, they outlive the service.
  WorkerLinkService(std::vector<Cluster*> clusters, const WorkerLinkOptions& options);
  ~WorkerLinkService() override;

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  grpc::Status Loading(grpc::ServerContext* context, const v1::LoadingReport* report,
                       v1::LoadingReply* reply) override;

  int num_connected() const { return num_connected_.load(); }
  int num_calls() const { return num_calls_.load(); }  // open, Hello or not
  const LoadingBoard& loading() const { return loading_; }

 private:
  class Call;  // one worker's call (worker_link_service.cc)

  // The Cluster whose model has the Hello's fingerprint; with none, the first (whose AddWorker
  // refuses it).
  Cluster* ClusterFor(const std::string& fingerprint) const;

  const std::vector<Cluster*> clusters_;  // Not owned.
  const WorkerLinkOptions options_;
  LoadingBoard loading_;
  StageGroups stages_;  // workers holding a range of their model's layers (issue 40)
  std::atomic<int> num_connected_{0};
  std::atomic<int> num_calls_{0};  // open, Hello or not
  CallDeadlines deadlines_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LINK_WORKER_LINK_SERVICE_H_
