#include "worker/transfer/kv_transfer_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/process/grpc_security.h"
#include "common/step.h"
#include "glog/logging.h"

namespace pagoda {

v1::KvGeometry KvGeometryOf(const KvPool& pool) {
  v1::KvGeometry g;
  g.set_num_layers(pool.num_layers());
  g.set_num_kv_heads(pool.num_kv_heads());
  g.set_head_dim(pool.head_dim());
  g.set_block_size(pool.block_size());
  g.set_dtype(KvLayoutName(pool.dtype()));
  g.set_block_bytes(2 * static_cast<int64_t>(pool.num_layers()) * pool.block_bytes());
  return g;
}

KvTransferService::KvTransferService(const KvPool* pool, std::string worker_token)
    : pool_(pool), worker_token_(std::move(worker_token)) {}

grpc::Status KvTransferService::Pull(grpc::ServerContext* context,
                                     const v1::PullBlocksRequest* request,
                                     grpc::ServerWriter<v1::PullBlocksChunk>* writer) {
  if (!CallCarriesToken(*context, worker_token_)) {
    LOG_EVERY_N(WARNING, 100) << "refused a KV pull from " << context->peer()
                              << ": no or wrong worker token (" << google::COUNTER << " so far)";
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the KV transfer port needs the cluster's worker token");
  }
  const int n = request->block_ids_size();
  if (n == 0 || n > kMaxBlocksPerPull) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("block_ids: ", n, " ids; 1 to ", kMaxBlocksPerPull));
  }
  for (int b : request->block_ids()) {
    if (b < 0 || b >= pool_->num_blocks()) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("block_ids: block ", b, " outside the pool of ", pool_->num_blocks()));
    }
  }
  v1::PullBlocksChunk chunk;
  *chunk.mutable_header() = KvGeometryOf(*pool_);
  if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "puller gone");
  chunk.Clear();
  std::string* data = chunk.mutable_data();
  data->reserve(kKvTransferChunkBytes);
  int64_t offset = 0;  // of `data` in the stream
  auto flush = [&] {
    chunk.set_offset(offset);
    offset += static_cast<int64_t>(data->size());
    const bool ok = writer->Write(chunk);
    data->clear();
    return ok;
  };
  for (int b : request->block_ids()) {
    for (int l = 0; l < pool_->num_layers(); ++l) {
      for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
        std::span<const std::byte> bytes = pool_->BlockBytes(b, l, part);
        while (!bytes.empty()) {
          const size_t take = std::min(bytes.size(), kKvTransferChunkBytes - data->size());
          data->append(reinterpret_cast<const char*>(bytes.data()), take);
          bytes = bytes.subspan(take);
          if (data->size() == kKvTransferChunkBytes && !flush())
            return grpc::Status(grpc::StatusCode::CANCELLED, "puller gone");
        }
      }
    }
  }
  if (!data->empty() && !flush()) return grpc::Status(grpc::StatusCode::CANCELLED, "puller gone");
  VLOG(1) << "served " << n << " blocks (" << offset << " bytes) to " << context->peer();
  return grpc::Status::OK;
}

std::unique_ptr<grpc::Server> StartKvTransferServer(const std::string& address,
                                                    KvTransferService* service, const TlsPem& pem,
                                                    int* bound_port, grpc::Service* also) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, ServerCredentialsFor(pem), bound_port);
  builder.RegisterService(service);
  if (also != nullptr) builder.RegisterService(also);
  // A handler thread per pull; a bound keeps a flood of calls from spawning thousands.
  grpc::ResourceQuota quota("kv_transfer");
  quota.SetMaxThreads(32);
  builder.SetResourceQuota(quota);
  return builder.BuildAndStart();
}

}  // namespace pagoda
