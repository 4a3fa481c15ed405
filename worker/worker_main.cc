// pagoda-worker: holds the weights and a shard of the KV pool, and executes the steps the
// router sends. Dials the router (--router) and keeps reconnecting when it goes away.
#include <unistd.h>

#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/command_line.h"
#include "common/model_loader.h"
#include "glog/logging.h"
#include "worker/worker_service.h"

ABSL_FLAG(std::string, router, "127.0.0.1:50052", "the router's worker port, host:port");
ABSL_FLAG(std::string, model, "", "llama2.c checkpoint (.bin)");
ABSL_FLAG(int, kv_cache_mb, 256, "KV cache size in MiB");
ABSL_FLAG(int, num_kv_blocks, 0, "KV blocks; > 0 overrides --kv_cache_mb");
ABSL_FLAG(int, block_size, 16, "tokens per KV block");
ABSL_FLAG(int, max_num_batched_tokens, 2048, "the largest step, in tokens");
ABSL_FLAG(int, max_num_seqs, 256, "the most sequences in one step");
ABSL_FLAG(int, threads, 0, "compute threads; 0 = all cores");
ABSL_FLAG(std::string, name, "", "name in the router's logs; default host:pid");

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "error: --model is required\n";
    return 2;
  }
  absl::StatusOr<pagoda::ModelWeights> weights = pagoda::LoadModelWeights(model);
  if (!weights.ok()) {
    std::cerr << "error: " << weights.status().message() << "\n";
    return 1;
  }
  pagoda::WorkerOptions options;
  options.kv_cache_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_mb)) << 20;
  options.num_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  options.block_size = absl::GetFlag(FLAGS_block_size);
  options.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  options.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.threads = absl::GetFlag(FLAGS_threads);
  auto engine = pagoda::WorkerEngine::Create(*std::move(weights), options);
  if (!engine.ok()) {
    std::cerr << "error: " << engine.status().message() << "\n";
    return 1;
  }
  LOG(INFO) << "model loaded: " << model;
  pagoda::WorkerServiceOptions service_options;
  service_options.router_address = absl::GetFlag(FLAGS_router);
  char host[256] = "worker";
  gethostname(host, sizeof(host) - 1);
  service_options.name = absl::GetFlag(FLAGS_name).empty() ? absl::StrCat(host, ":", getpid())
                                                           : absl::GetFlag(FLAGS_name);
  pagoda::WorkerService service(*std::move(engine), service_options);
  return service.Run();
}
