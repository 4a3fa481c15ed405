#include "worker/transfer/stage_link_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/process/grpc_security.h"

namespace pagoda {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

}  // namespace

absl::Status GrpcStageLink::Receive(int64_t step_id, std::span<float> out) {
  return mailbox_.Take(step_id, out, options_.timeout);
}

absl::Status GrpcStageLink::Send(int64_t step_id, std::span<const float> hidden) {
  std::shared_ptr<v1::StageLink::Stub> stub;
  std::string next;
  {
    absl::MutexLock lock(&mu_);
    stub = stub_;
    next = next_;
  }
  if (stub == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step_id, ": the router has not wired this stage to the next"));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  AddBearerToken(options_.worker_token, &context);
  v1::PushReply reply;
  std::unique_ptr<grpc::ClientWriter<v1::ActivationChunk>> writer = stub->Push(&context, &reply);
  v1::ActivationChunk chunk;
  v1::ActivationHeader* header = chunk.mutable_header();
  header->set_step_id(step_id);
  header->set_rows(static_cast<int>(hidden.size() / options_.dim));
  header->set_dim(options_.dim);
  bool written = writer->Write(chunk);
  const char* bytes = reinterpret_cast<const char*>(hidden.data());
  const size_t total = hidden.size() * sizeof(float);
  for (size_t at = 0; written && at < total; at += kChunkBytes) {
    chunk.Clear();
    chunk.set_offset(static_cast<int64_t>(at));
    chunk.set_data(bytes + at, std::min(kChunkBytes, total - at));
    written = writer->Write(chunk);
  }
  if (written) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("step ", step_id, ": sending activations to ", next,
                                               ": ", status.error_message()));
  }
  return absl::OkStatus();
}

void GrpcStageLink::SetNext(const std::string& address) {
  std::shared_ptr<v1::StageLink::Stub> stub;
  if (!address.empty()) {
    stub = v1::StageLink::NewStub(
        grpc::CreateChannel(address, ChannelCredentialsFor(options_.tls, options_.tls_pem)));
  }
  absl::MutexLock lock(&mu_);
  next_ = address;
  stub_ = std::move(stub);
}

void GrpcStageLink::Reset() {
  mailbox_.Clear();
  SetNext("");
}

}  // namespace pagoda
