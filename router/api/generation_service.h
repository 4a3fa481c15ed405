// pagoda.v1.Generation on gRPC's callback API: translation only. A request becomes the core's
// GenerationRequest (request_policy: prompt encoding, sampling defaults, the wait for a worker
// until just before the deadline), its GenerationStream validates and runs it, and one reactor
// per call writes the stream's chunks as GenerateResponses. Cancellation and deadlines abort
// the request, which frees its blocks within a step.
#ifndef PAGODA_ROUTER_API_GENERATION_SERVICE_H_
#define PAGODA_ROUTER_API_GENERATION_SERVICE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "lib/text/tokenizer.h"
#include "pagoda/v1/generation.grpc.pb.h"
#include "router/api/constraint_compiler.h"
#include "router/core/cluster.h"

namespace pagoda {

inline constexpr int kMaxRequestIdBytes = 256;

// The methods take and give raw bytes, so a request that is not a valid message is refused
// with INVALID_ARGUMENT and a message (gRPC's own parsing answers UNIMPLEMENTED, no message).
using RawGenerationService =
    v1::Generation::WithRawCallbackMethod_Generate<v1::Generation::WithRawCallbackMethod_Tokenize<
        v1::Generation::WithRawCallbackMethod_GetModelInfo<v1::Generation::Service>>>;

class GenerationService final : public RawGenerationService {
 public:
  // Not owned; all must outlive the service. `metrics` may be null. With an `api_key`, every
  // call must carry `authorization: Bearer <api_key>` or fails with UNAUTHENTICATED.
  // With `proxy_headers` (client, connection), a call's client and connection (for the paused
  // caps) are those metadata's values: the proxy in front of the port sets them
  // (router/link/h2_proxy.h), every call comes from it.
  GenerationService(Cluster* cluster, const Tokenizer* tokenizer, std::string model_name,
                    RouterMetrics* metrics = nullptr, std::string api_key = "",
                    std::pair<std::string, std::string> proxy_headers = {});

  // Generate(GenerateRequest) -> stream of GenerateResponse, Tokenize and GetModelInfo, each
  // with its messages serialized.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

  // The core request for a wire request, or INVALID_ARGUMENT naming the bad field; not yet
  // validated against the Cluster (the call's GenerationStream does that).
  absl::StatusOr<GenerationRequest> Translate(const v1::GenerateRequest& request) const;

  // OK when the API key is not required or `context` carries it.
  grpc::Status CheckApiKey(const grpc::CallbackServerContext& context) const;

  // The API key, then the request's bytes parsed into `request`: OK, or the call's status.
  grpc::Status Admit(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& bytes,
                     google::protobuf::Message* request) const;

  Cluster* cluster() const { return cluster_; }
  const Tokenizer* tokenizer() const { return tokenizer_; }
  RouterMetrics* metrics() const { return metrics_; }
  // Who made the call: its connection, and its client's address.
  RequestPeer Peer(const grpc::CallbackServerContext& context) const;

 private:
  Cluster* cluster_;            // Not owned.
  const Tokenizer* tokenizer_;  // Not owned.
  // Thread-safe; a pointer so that the const Translate may compile grammars.
  std::unique_ptr<ConstraintCompiler> constraints_;
  RouterMetrics* metrics_;  // Not owned; may be null.
  const std::string model_name_;
  const std::string api_key_;  // "" = calls need no key
  // Metadata keys naming the client and its connection; "": the gRPC peer's.
  const std::pair<std::string, std::string> proxy_headers_;
};

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_GENERATION_SERVICE_H_
