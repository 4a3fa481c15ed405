// KvPuller over gRPC: dials the peer's KV transfer port (kv_transfer_service.h) with the
// worker link's token and TLS, and writes the streamed bytes into the dst blocks. Everything
// from the wire is checked first: the header's geometry must equal this pool's, and each chunk
// must continue the stream exactly and stay within what was asked.
// Thread-safe: one Pull per transfer thread, channels shared between them.
#ifndef PAGODA_WORKER_TRANSFER_KV_PULLER_SERVICE_H_
#define PAGODA_WORKER_TRANSFER_KV_PULLER_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/process/secret.h"
#include "grpcpp/grpcpp.h"
#include "worker/transfer/kv_puller.h"

namespace pagoda {

struct GrpcKvPullerOptions {
  std::string worker_token;  // sent as authorization: Bearer <token>; "" = none
  // Dial peers with TLS (roots: tls_pem.ca, else the system's), presenting tls_pem.cert / key
  // as a client certificate when given. A peer's certificate must name the address it
  // advertises (an IP SAN for a pod IP).
  bool tls = false;
  TlsPem tls_pem = {};
  absl::Duration timeout = absl::Seconds(60);  // a whole pull, dial included
};

class GrpcKvPuller final : public KvPuller {
 public:
  explicit GrpcKvPuller(GrpcKvPullerOptions options) : options_(std::move(options)) {}

  // UNAVAILABLE (or the peer's status) naming the peer on any failure; FAILED_PRECONDITION when
  // the peer's KV geometry or dtype differs from `pool`'s.
  absl::StatusOr<int64_t> Pull(const BlockPull& pull, KvPool* pool, PullCancel* cancel) override;

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);

  const GrpcKvPullerOptions options_;
  absl::Mutex mu_;
  // One channel (HTTP/2 connection) per peer, reused by later pulls.
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_TRANSFER_KV_PULLER_SERVICE_H_
