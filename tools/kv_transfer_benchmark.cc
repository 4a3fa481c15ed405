// Worker-to-worker KV block transfer over loopback gRPC (issue 28): a sender's pool served by
// KvTransferService, pulled by GrpcKvPuller into a receiver's pool, as two workers do, timed
// per pull. Only the KV pools exist (no weights): the shape is pagoda-make-model's named one.
// Checks the received bytes equal the sent ones.
//   kv_transfer_benchmark [--shape=1B] [--tokens=1000] [--block_size=16] [--kv_dtype=f32]
//                         [--iterations=20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/model/random_weights.h"
#include "worker/transfer/kv_puller_service.h"
#include "worker/transfer/kv_transfer_service.h"
#include "worker/worker_options.h"

ABSL_FLAG(std::string, shape, "1B", "the model shape (pagoda-make-model's --shape)");
ABSL_FLAG(int, tokens, 1000, "the prefix moved, in tokens");
ABSL_FLAG(int, block_size, 16, "tokens per KV block");
ABSL_FLAG(std::string, kv_dtype, "f32", "f32, bf16, f16 or int8");
ABSL_FLAG(int, iterations, 20, "timed pulls (after one warm-up)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  pagoda::ModelConfig config;
  if (!pagoda::NamedModelConfig(absl::GetFlag(FLAGS_shape), &config)) {
    std::fprintf(stderr, "error: unknown --shape\n");
    return 2;
  }
  absl::StatusOr<pagoda::KvDtype> dtype = pagoda::ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!dtype.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(dtype.status().message()).c_str());
    return 2;
  }
  const int block_size = absl::GetFlag(FLAGS_block_size);
  const int num_blocks = (absl::GetFlag(FLAGS_tokens) + block_size - 1) / block_size;
  pagoda::KvPool sender(config, num_blocks, block_size, *dtype);
  pagoda::KvPool receiver(config, num_blocks, block_size, *dtype);
  uint64_t x = 88172645463325252ULL;  // xorshift: bytes no compression could shrink
  for (int b = 0; b < num_blocks; ++b) {
    for (int l = 0; l < sender.num_layers(); ++l) {
      for (auto part : {pagoda::KvPool::Part::kK, pagoda::KvPool::Part::kV}) {
        for (std::byte& byte : sender.MutableBlockBytes(b, l, part)) {
          x ^= x << 13, x ^= x >> 7, x ^= x << 17;
          byte = static_cast<std::byte>(x);
        }
      }
    }
  }
  const std::string token = "bench-token";
  pagoda::KvTransferService service(&sender, token);
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      pagoda::StartKvTransferServer("127.0.0.1:0", &service, {}, &port);
  if (!server) return 1;
  pagoda::GrpcKvPuller puller({.worker_token = token});
  pagoda::BlockPull pull{.transfer_id = 1, .peer_address = absl::StrCat("127.0.0.1:", port)};
  for (int b = 0; b < num_blocks; ++b) {
    pull.src_block_ids.push_back(b);
    pull.dst_block_ids.push_back(num_blocks - 1 - b);  // anywhere in the receiver's pool
  }
  std::vector<double> seconds;
  int64_t bytes = 0;
  for (int i = 0; i <= absl::GetFlag(FLAGS_iterations); ++i) {
    pagoda::PullCancel cancel;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<int64_t> got = puller.Pull(pull, &receiver, &cancel);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!got.ok()) {
      std::fprintf(stderr, "error: %s\n", got.status().ToString().c_str());
      return 1;
    }
    bytes = *got;
    if (i > 0) seconds.push_back(s);  // the first dials the channel
  }
  for (int b = 0; b < num_blocks; ++b) {
    for (int l = 0; l < sender.num_layers(); ++l) {
      for (auto part : {pagoda::KvPool::Part::kK, pagoda::KvPool::Part::kV}) {
        auto sent = sender.BlockBytes(b, l, part);
        auto got = receiver.BlockBytes(num_blocks - 1 - b, l, part);
        if (!std::equal(sent.begin(), sent.end(), got.begin(), got.end())) {
          std::fprintf(stderr, "error: block %d layer %d differs\n", b, l);
          return 1;
        }
      }
    }
  }
  server->Shutdown(std::chrono::system_clock::now());
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf(
      "shape %s: %d layers x %d KV heads x %d dims, %s, blocks of %d tokens\n"
      "pull of %d blocks (%d tokens) = %.1f MB: median %.2f ms (min %.2f, max %.2f) over %zu\n"
      "%.0f blocks/s, %.0f tokens/s, %.2f GB/s; bytes equal\n",
      absl::GetFlag(FLAGS_shape).c_str(), config.num_layers, config.num_kv_heads, config.head_dim,
      pagoda::KvDtypeName(*dtype), block_size, num_blocks, num_blocks * block_size, bytes / 1e6,
      median * 1e3, seconds.front() * 1e3, seconds.back() * 1e3, seconds.size(),
      num_blocks / median, num_blocks * block_size / median, bytes / median / 1e9);
  return 0;
}
