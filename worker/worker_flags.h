// The flags that say what a worker engine is (WorkerOptions), defined once for the two
// programs that run one: pagoda-worker and `pagoda run` (a worker engine in process). Each
// program defines --model and --max-num-batched-tokens itself: their help and default differ
// (a worker's largest step against `pagoda run`'s step budget).
#ifndef PAGODA_WORKER_WORKER_FLAGS_H_
#define PAGODA_WORKER_WORKER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "worker/worker_options.h"

ABSL_DECLARE_FLAG(std::string, weight_dtype);
ABSL_DECLARE_FLAG(std::string, compute_dtype);
ABSL_DECLARE_FLAG(std::string, kv_cache_mb);
ABSL_DECLARE_FLAG(std::string, kv_cache_dtype);
ABSL_DECLARE_FLAG(double, kv_cache_memory_fraction);
ABSL_DECLARE_FLAG(int, num_kv_blocks);
ABSL_DECLARE_FLAG(int, block_size);
ABSL_DECLARE_FLAG(int, max_num_seqs);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(std::string, rope_scaling);
ABSL_DECLARE_FLAG(std::string, lora_modules);
ABSL_DECLARE_FLAG(int, max_loras);
ABSL_DECLARE_FLAG(int, max_cpu_loras);
ABSL_DECLARE_FLAG(std::string, lora_dir);

namespace pagoda {

// The flags above, by name, for a program's --help groups.
std::vector<std::string> WorkerEngineFlagNames();

// WorkerOptions from the flags above (max_num_batched_tokens left as WorkerOptions has it);
// INVALID_ARGUMENT naming the flag when one is malformed. --lora-modules repeats: pass every
// value (RepeatedFlagValues(argc, argv, "lora_modules")); empty reads the flag's last one.
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags(
    const std::vector<std::string>& lora_modules = {});

}  // namespace pagoda

#endif  // PAGODA_WORKER_WORKER_FLAGS_H_
