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
#include "router/api/served_models.h"

namespace pagoda {

inline constexpr int kMaxRequestIdBytes = 256;

// The methods take and give raw bytes, so a request that is not a valid message is refused
// with INVALID_ARGUMENT and a message (gRPC's own parsing answers UNIMPLEMENTED, no message).
using RawGenerationService =
    v1::Generation::WithRawCallbackMethod_Generate<v1::Generation::WithRawCallbackMethod_Tokenize<
        v1::Generation::WithRawCallbackMethod_GetModelInfo<
            v1::Generation::WithRawCallbackMethod_ListModels<v1::Generation::Service>>>>;

class GenerationService final : public RawGenerationService {
 public:
  // `models` is not owned and must outlive the service: a call's `model` picks one (the
  // default when empty; NOT_FOUND naming the served ones otherwise). With an `api_key`, every
  // call must carry `authorization: Bearer <api_key>` or fails with UNAUTHENTICATED.
  // With `proxy_headers` (client, connection), a call's client and connection (for the paused
  // caps) are those metadata's values: the proxy in front of the port sets them
  // (router/link/h2_proxy.h), every call comes from it.
  explicit GenerationService(const ServedModels* models, std::string api_key = "",
                             std::pair<std::string, std::string> proxy_headers = {});

  // Generate(GenerateRequest) -> stream of GenerateResponse, Tokenize, GetModelInfo and
  // ListModels, each with its messages serialized.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

  // The core request for a wire request to `model`, or INVALID_ARGUMENT naming the bad field;
  // not yet validated against its Cluster (the call's GenerationStream does that).
  absl::StatusOr<GenerationRequest> Translate(const v1::GenerateRequest& request,
                                              const ServedModel& model) const;

  // OK when the API key is not required or `context` carries it.
  grpc::Status CheckApiKey(const grpc::CallbackServerContext& context) const;

  // The API key, then the request's bytes parsed into `request`: OK, or the call's status.
  grpc::Status Admit(const grpc::CallbackServerContext& context, const grpc::ByteBuffer& bytes,
                     google::protobuf::Message* request) const;

  // Who made the call: its connection, and its client's address.
  RequestPeer Peer(const grpc::CallbackServerContext& context) const;

 private:
  const ServedModels* const models_;  // Not owned.
  const std::string api_key_;         // "" = calls need no key
  // Metadata keys naming the client and its connection; "": the gRPC peer's.
  const std::pair<std::string, std::string> proxy_headers_;
};

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_GENERATION_SERVICE_H_
