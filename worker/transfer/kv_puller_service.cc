#include "worker/transfer/kv_puller_service.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/process/grpc_security.h"
#include "pagoda/v1/kv_transfer.grpc.pb.h"
#include "worker/transfer/kv_transfer_service.h"

namespace pagoda {
namespace {

std::string Describe(const v1::KvGeometry& g) {
  return absl::StrCat(g.num_layers(), " layers x ", g.num_kv_heads(), " KV heads x ", g.head_dim(),
                      " dims, blocks of ", g.block_size(), " tokens, ", g.dtype());
}

// Reads the stream into the dst blocks: the header, then chunks that continue it exactly.
// *ended: the stream ended (rather than the receiver stopping reading it).
absl::StatusOr<int64_t> Receive(grpc::ClientReader<v1::PullBlocksChunk>* reader,
                                const BlockPull& pull, KvPool* pool, bool* ended) {
  v1::PullBlocksChunk chunk;
  *ended = true;
  if (!reader->Read(&chunk)) return absl::UnavailableError("the stream ended before its header");
  *ended = false;
  if (!chunk.has_header() || !chunk.data().empty())
    return absl::UnavailableError("the stream does not start with a header");
  const v1::KvGeometry here = KvGeometryOf(*pool);
  const v1::KvGeometry& there = chunk.header();
  if (there.SerializeAsString() != here.SerializeAsString()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "KV geometry differs: the peer's is ", Describe(there), ", this worker's ", Describe(here),
        " (no conversion: pull between workers of one KV dtype and block size)"));
  }
  const int num_layers = pool->num_layers();
  const int64_t segment = static_cast<int64_t>(pool->block_bytes());  // one layer's K or V
  const int64_t total = static_cast<int64_t>(pull.dst_block_ids.size()) * 2 * num_layers * segment;
  int64_t received = 0;
  for (;;) {
    if (!reader->Read(&chunk)) {
      *ended = true;
      break;
    }
    const std::string& data = chunk.data();
    if (chunk.has_header() || chunk.offset() != received || data.empty() ||
        static_cast<int64_t>(data.size()) > total - received) {
      return absl::UnavailableError(absl::StrCat("a chunk of ", data.size(), " bytes at offset ",
                                                 chunk.offset(), " does not continue byte ",
                                                 received, " of ", total));
    }
    // The stream is, per block, per layer, K then V (kv_transfer.proto).
    for (size_t done = 0; done < data.size();) {
      const int64_t index = received / segment, within = received % segment;
      const int block = pull.dst_block_ids[index / (2 * num_layers)];
      const int layer = static_cast<int>(index / 2 % num_layers);
      const KvPool::Part part = index % 2 == 0 ? KvPool::Part::kK : KvPool::Part::kV;
      const size_t take = std::min<size_t>(data.size() - done, segment - within);
      std::memcpy(pool->MutableBlockBytes(block, layer, part).data() + within, data.data() + done,
                  take);
      done += take;
      received += static_cast<int64_t>(take);
    }
  }
  if (received != total) {
    return absl::UnavailableError(
        absl::StrCat("the stream ended after ", received, " of ", total, " bytes"));
  }
  return received;
}

}  // namespace

std::shared_ptr<grpc::Channel> GrpcKvPuller::ChannelTo(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (channel == nullptr) {
    if (channels_.size() > 256) {  // peers come and go: keep the cache bounded
      channels_.clear();
      return ChannelTo(address);
    }
    channel = grpc::CreateChannel(address, ChannelCredentialsFor(options_.tls, options_.tls_pem));
  }
  return channel;
}

absl::StatusOr<int64_t> GrpcKvPuller::Pull(const BlockPull& pull, KvPool* pool,
                                           PullCancel* cancel) {
  auto stub = v1::KvTransfer::NewStub(ChannelTo(pull.peer_address));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(options_.timeout));
  AddBearerToken(options_.worker_token, &context);
  v1::PullBlocksRequest request;
  request.mutable_block_ids()->Add(pull.src_block_ids.begin(), pull.src_block_ids.end());
  cancel->OnCancel([&context] { context.TryCancel(); });
  std::unique_ptr<grpc::ClientReader<v1::PullBlocksChunk>> reader = stub->Pull(&context, request);
  bool ended = false;
  absl::StatusOr<int64_t> bytes = Receive(reader.get(), pull, pool, &ended);
  cancel->OnCancel(nullptr);
  if (!ended) context.TryCancel();  // Finish would wait for the rest of the stream
  const grpc::Status status = reader->Finish();
  auto error = [&](absl::StatusCode code, absl::string_view message) {
    return absl::Status(code, absl::StrCat("pull from ", pull.peer_address, ": ", message));
  };
  if (!bytes.ok()) {
    // The peer's own status says why a stream ended early, when it has one.
    if (ended && !status.ok()) {
      return error(static_cast<absl::StatusCode>(status.error_code()),
                   absl::StrCat(bytes.status().message(), ": ", status.error_message()));
    }
    return error(bytes.status().code(), bytes.status().message());
  }
  if (!status.ok()) {
    return error(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return bytes;
}

}  // namespace pagoda
