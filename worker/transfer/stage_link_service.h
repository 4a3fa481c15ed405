// The receiving side of pipeline stages' activations (issue 40): pagoda.v1.StageLink on the
// worker's transfer port. The token is checked before anything is read; the header is checked
// (rows within the worker's largest step, its model's width) before anything is allocated;
// data must arrive in order and add up exactly. A step's activations go to the stage's mailbox,
// where its step takes them.
#ifndef PAGODA_WORKER_TRANSFER_STAGE_LINK_SERVICE_H_
#define PAGODA_WORKER_TRANSFER_STAGE_LINK_SERVICE_H_

#include <string>

#include "pagoda/v1/kv_transfer.grpc.pb.h"
#include "worker/stage_mailbox.h"

namespace pagoda {

class StageLinkService final : public v1::StageLink::Service {
 public:
  // `mailbox` is not owned and outlives the service's server. "" token: open to anyone.
  StageLinkService(StageMailbox* mailbox, int max_rows, int dim, std::string worker_token)
      : mailbox_(mailbox), max_rows_(max_rows), dim_(dim), worker_token_(std::move(worker_token)) {}

  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<v1::ActivationChunk>* reader,
                    v1::PushReply* reply) override;

 private:
  StageMailbox* const mailbox_;
  const int max_rows_, dim_;
  const std::string worker_token_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_STAGE_LINK_SERVICE_H_
