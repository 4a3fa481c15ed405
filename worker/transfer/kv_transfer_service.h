// The serving side of worker-to-worker KV transfer (proto/pagoda/v1/kv_transfer.proto): a
// peer pulls blocks of this worker's pool over a server stream. Read only: nothing on this port
// writes into the pool. The token is checked before the request is looked at; every id is
// checked against the pool before a byte is read.
//
// Thread-safety: one handler thread per call (sync API); it reads the pool while the engine's
// thread runs steps, which by the router's contract never write the blocks being pulled.
#ifndef PAGODA_WORKER_TRANSFER_KV_TRANSFER_SERVICE_H_
#define PAGODA_WORKER_TRANSFER_KV_TRANSFER_SERVICE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "common/process/secret.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/kv_transfer.grpc.pb.h"
#include "worker/kv_pool.h"

namespace pagoda {

// The most payload bytes in one chunk: far under gRPC's 4 MiB default message limit.
inline constexpr size_t kKvTransferChunkBytes = size_t{1} << 20;

// What a stream's header says of `pool`.
v1::KvGeometry KvGeometryOf(const KvPool& pool);

class KvTransferService final : public v1::KvTransfer::Service {
 public:
  // `pool` is not owned and must outlive the service. Calls must carry
  // `authorization: Bearer <worker_token>`; "" admits any caller (tests, an open cluster).
  KvTransferService(const KvPool* pool, std::string worker_token);

  grpc::Status Pull(grpc::ServerContext* context, const v1::PullBlocksRequest* request,
                    grpc::ServerWriter<v1::PullBlocksChunk>* writer) override;

 private:
  const KvPool* const pool_;  // Not owned.
  const std::string worker_token_;
};

// Serves `service`, and `also` when set (a pipeline stage's StageLink service), neither owned
// and both outliving the server, on `address` ("host:port", port 0 picks one, returned in
// *bound_port). nullptr when the port cannot be bound.
std::unique_ptr<grpc::Server> StartKvTransferServer(const std::string& address,
                                                    KvTransferService* service, const TlsPem& pem,
                                                    int* bound_port, grpc::Service* also = nullptr);

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_KV_TRANSFER_SERVICE_H_
