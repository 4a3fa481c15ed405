#include "worker/worker_flags.h"

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "common/dtype_flags.h"

ABSL_FLAG(std::string, weight_dtype, "auto",
          "how the matrices are stored: f32, bf16 (half the bytes), int8 (Q8_0's blocks of 32) "
          "or int4 (Q4_0's blocks of 32); auto: each tensor as its file stores it (F32 and F16: "
          "f32, BF16: bf16, Q8_0: int8, Q4_0/Q4_K: int4, Q6_K: q6_k)");
ABSL_FLAG(std::string, compute_dtype, "auto",
          "what bf16 weights are multiplied in: bf16 (activations rounded to bf16, f32 sums; "
          "needs AVX512_BF16), f32 (exact products), or auto: bf16 where the CPU has it");
ABSL_FLAG(std::string, kv_cache_mb, "auto",
          "KV cache size in MiB, or auto: --kv-cache-memory-fraction of the memory available "
          "after the weights load, at most --max-num-seqs sequences of the model's context");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "K/V element type: f32, bf16 or f16 (half the bytes: twice the tokens in --kv-cache-mb; "
          "attention still sums in f32, and multiplies a long prefill chunk's q and p in bf16 "
          "pairs where the CPU has AVX512_BF16, and bf16's decodes too), int8 (a scale per "
          "token and head: ~4x f32's tokens; its decodes in bf16 pairs as bf16's, else in int16 "
          "pairs), or auto: "
          "f32 (16-bit and int8 K/V change tokens: ask for them)");
ABSL_FLAG(double, kv_cache_memory_fraction, 0.5, "the share of available memory auto takes");
ABSL_FLAG(int, num_kv_blocks, 0, "KV blocks; > 0 overrides --kv-cache-mb");
ABSL_FLAG(int, block_size, 16, "tokens per KV block");
ABSL_FLAG(int, max_num_seqs, 256, "the most sequences in one step");
ABSL_FLAG(int, threads, 0, "compute threads; 0 = all cores");
ABSL_FLAG(std::string, rope_scaling, "",
          "RoPE scaling to stretch the model's context, as config.json's rope_scaling, e.g. "
          "'{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":32768}' "
          "(linear, llama3 or yarn; the context becomes original x factor); \"\": the model's "
          "own. The router and its workers must say the same");
// Repeatable: every --lora-modules=NAME=PATH is read from argv (RepeatedFlagValues).
ABSL_FLAG(std::string, lora_modules, "",
          "NAME=PATH: a LoRA adapter (a PEFT directory or a GGUF LoRA file) that requests name "
          "as NAME; repeat the flag for several");
ABSL_FLAG(int, max_loras, 4, "the most distinct LoRA adapters in one step");
ABSL_FLAG(int, max_cpu_loras, 8,
          "the most LoRA adapters held in memory (least recently used evicted, never one in "
          "use; an evicted one is read again when asked for); at least --max-loras");
ABSL_FLAG(std::string, lora_dtype, "auto",
          "what LoRA adapters are held and multiplied in: f32, bf16 (half the bytes each step "
          "reads), or auto: f32 over a model stored in f32, bf16 over any other");
ABSL_FLAG(std::string, lora_dir, "",
          "the directory LoRA adapter paths must lie in, symlinks resolved (loads at run time "
          "too); empty: the directories of the --lora-modules paths");

namespace pagoda {

std::vector<std::string> WorkerEngineFlagNames() {
  return {"weight_dtype",
          "compute_dtype",
          "kv_cache_mb",
          "kv_cache_dtype",
          "kv_cache_memory_fraction",
          "num_kv_blocks",
          "block_size",
          "max_num_seqs",
          "threads",
          "rope_scaling",
          "lora_modules",
          "max_loras",
          "max_cpu_loras",
          "lora_dtype",
          "lora_dir"};
}

absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags(const std::vector<std::string>& lora_modules) {
  WorkerOptions options;
  std::vector<std::string> modules = lora_modules;
  if (modules.empty() && !absl::GetFlag(FLAGS_lora_modules).empty()) {
    modules.push_back(absl::GetFlag(FLAGS_lora_modules));
  }
  for (const std::string& m : modules) {
    absl::StatusOr<WorkerOptions::LoraModule> module = ParseLoraModule(m);
    if (!module.ok()) return module.status();
    options.lora_modules.push_back(*std::move(module));
  }
  options.max_loras = absl::GetFlag(FLAGS_max_loras);
  options.max_cpu_loras = absl::GetFlag(FLAGS_max_cpu_loras);
  if (options.max_loras < 1 || options.max_cpu_loras < options.max_loras) {
    return absl::InvalidArgumentError(
        "--max-loras must be at least 1 and --max-cpu-loras at least --max-loras");
  }
  if (!absl::GetFlag(FLAGS_lora_dir).empty()) options.lora_dirs = {absl::GetFlag(FLAGS_lora_dir)};
  absl::StatusOr<std::optional<WeightDtype>> lora_dtype =
      ParseLoraDtype(absl::GetFlag(FLAGS_lora_dtype));
  if (!lora_dtype.ok()) return lora_dtype.status();
  options.lora_dtype = *lora_dtype;
  absl::StatusOr<std::optional<WeightDtype>> weight_dtype =
      ParseWeightDtype(absl::GetFlag(FLAGS_weight_dtype));
  if (!weight_dtype.ok()) return weight_dtype.status();
  options.weight_dtype = *weight_dtype;
  absl::StatusOr<ComputeDtype> compute_dtype =
      ParseComputeDtypeFlag("compute-dtype", absl::GetFlag(FLAGS_compute_dtype));
  if (!compute_dtype.ok()) return compute_dtype.status();
  options.compute_dtype = *compute_dtype;
  absl::StatusOr<KvDtype> kv_dtype = ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_cache_dtype));
  if (!kv_dtype.ok()) return kv_dtype.status();
  options.kv_cache_dtype = *kv_dtype;
  absl::StatusOr<int64_t> kv_bytes = ParseKvCacheMb(absl::GetFlag(FLAGS_kv_cache_mb));
  if (!kv_bytes.ok()) return kv_bytes.status();
  options.kv_cache_bytes = *kv_bytes;
  const double fraction = absl::GetFlag(FLAGS_kv_cache_memory_fraction);
  if (!(fraction > 0 && fraction <= 1)) {
    return absl::InvalidArgumentError("--kv-cache-memory-fraction must be in (0, 1]");
  }
  options.kv_cache_memory_fraction = fraction;
  options.num_blocks = absl::GetFlag(FLAGS_num_kv_blocks);
  options.block_size = absl::GetFlag(FLAGS_block_size);
  options.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.rope_scaling = absl::GetFlag(FLAGS_rope_scaling);
  return options;
}

}  // namespace pagoda
