#include "worker/transfer/stage_link_service.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/process/grpc_security.h"

namespace pagoda {

grpc::Status StageLinkService::Push(grpc::ServerContext* context,
                                    grpc::ServerReader<v1::ActivationChunk>* reader,
                                    v1::PushReply*) {
  if (!CallCarriesToken(*context, worker_token_)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the transfer port needs the cluster's worker token");
  }
  v1::ActivationChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first chunk must be a header");
  }
  const v1::ActivationHeader header = chunk.header();
  if (header.rows() < 1 || header.rows() > max_rows_ || header.dim() != dim_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("activations of ", header.rows(), " rows of ", header.dim(),
                                     ": this stage takes 1 to ", max_rows_, " rows of ", dim_));
  }
  std::vector<float> hidden(static_cast<size_t>(header.rows()) * dim_);
  const int64_t bytes = static_cast<int64_t>(hidden.size() * sizeof(float));
  int64_t received = 0;
  while (reader->Read(&chunk)) {
    if (chunk.has_header() || chunk.offset() != received ||
        static_cast<int64_t>(chunk.data().size()) > bytes - received) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("step ", header.step_id(), ": a chunk at ", chunk.offset(), " of ",
                       chunk.data().size(), " bytes where ", received, " of ", bytes, " came"));
    }
    std::memcpy(reinterpret_cast<char*>(hidden.data()) + received, chunk.data().data(),
                chunk.data().size());
    received += static_cast<int64_t>(chunk.data().size());
  }
  if (received != bytes) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("step ", header.step_id(), ": ", received, " bytes of ", bytes));
  }
  mailbox_->Put(header.step_id(), std::move(hidden));
  return grpc::Status::OK;
}

}  // namespace pagoda
