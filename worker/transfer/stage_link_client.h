// A pipeline stage's StageLink over gRPC (issue 40): it receives from its own mailbox, which
// its transfer port's StageLinkService fills, and sends to the next stage's transfer port,
// which the router names when it wires the group (StageWiring). Send is a client-streamed Push
// of 1 MiB chunks with the worker link's token and TLS.
#ifndef PAGODA_WORKER_TRANSFER_STAGE_LINK_CLIENT_H_
#define PAGODA_WORKER_TRANSFER_STAGE_LINK_CLIENT_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/process/secret.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/kv_transfer.grpc.pb.h"
#include "worker/stage_link.h"
#include "worker/stage_mailbox.h"

namespace pagoda {

struct GrpcStageLinkOptions {
  std::string worker_token;  // sent as authorization: Bearer <token>; "" = none
  bool tls = false;          // dial the next stage with TLS (as the KV puller does)
  TlsPem tls_pem = {};
  // How long a step waits for the stage before's activations, and a Push may take: past it
  // the step fails and the router fails the group over.
  absl::Duration timeout = absl::Seconds(30);
  int dim = 0;  // the model's hidden size: a row's floats
};

class GrpcStageLink final : public StageLink {
 public:
  explicit GrpcStageLink(GrpcStageLinkOptions options) : options_(std::move(options)) {}

  absl::Status Receive(int64_t step_id, std::span<float> out) override;
  // FAILED_PRECONDITION before the router wired the next stage; the Push's status, naming the
  // next stage, otherwise.
  absl::Status Send(int64_t step_id, std::span<const float> hidden) override;
  void Reset() override;
  void Interrupt() override { mailbox_.Interrupt(); }

  // Where Send goes (StageWiring.next_stage_address); "" = nowhere. Thread-safe.
  void SetNext(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // What the transfer port's StageLinkService fills.
  StageMailbox* mailbox() { return &mailbox_; }

 private:
  const GrpcStageLinkOptions options_;
  StageMailbox mailbox_;
  absl::Mutex mu_;
  std::string next_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<v1::StageLink::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_STAGE_LINK_CLIENT_H_
