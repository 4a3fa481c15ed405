// The LoRA adapters a worker holds, by name (issue 39 item 2): each registered with its path and
// digest, and at most max_cpu_loras of them packed in memory. Asking for one that was evicted
// reads it again (refused if its files changed since); the least recently used adapters no
// sequence holds are evicted to make room, never one a sequence holds (a sequence keeps its
// shared_ptr until it finishes, so unloading one in use lets its sequences finish on it).
// Not thread-safe: the worker's step loop owns it.
#ifndef PAGODA_WORKER_LORA_REGISTRY_H_
#define PAGODA_WORKER_LORA_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/executor.h"
#include "common/model/lora_adapter.h"
#include "common/model/model_config.h"
#include "worker/packed_lora.h"

namespace pagoda {

class LoraRegistry {
 public:
  // REQUIRES: 1 <= options.max_loras <= max_cpu_loras (WorkerOptions' parser checks the flags).
  // `dtype`: what adapters are packed in (PackedLora's kF32 or kBf16).
  LoraRegistry(const ModelConfig& config, int max_cpu_loras, int max_loras,
               LoraReadOptions read_options, WeightDtype dtype = WeightDtype::kF32);

  // Reads, checks and packs the adapter at `path` as `name` (ReadLoraAdapter's errors),
  // evicting as Acquire does; ALREADY_EXISTS when `name` is taken, INVALID_ARGUMENT for a name
  // that is empty, longer than 128 bytes or not of [A-Za-z0-9._:/-].
  absl::Status Load(const std::string& name, const std::string& path);
  // Forgets `name` (NOT_FOUND when unknown); sequences running on it keep it until they end.
  absl::Status Unload(const std::string& name);
  bool Has(const std::string& name) const { return entries_.contains(name); }

  // The packed adapter, marked most recently used. NOT_FOUND for an unknown name;
  // RESOURCE_EXHAUSTED when it must be read again and every adapter in memory is in use;
  // FAILED_PRECONDITION when its files changed since it was loaded. `releasing`: holds about to
  // go (a step's finished sequences'), one entry per hold; those adapters may be evicted.
  absl::StatusOr<std::shared_ptr<const PackedLora>> Acquire(
      const std::string& name, std::span<const PackedLora* const> releasing = {});

  // Every adapter held, by name.
  std::vector<AdapterInfo> List() const;
  int max_loras() const { return max_loras_; }
  int max_cpu_loras() const { return max_cpu_loras_; }
  int num_in_memory() const;

 private:
  struct Entry {
    std::string path;
    AdapterInfo info;
    std::shared_ptr<const PackedLora> packed;  // null: evicted
    uint64_t last_used = 0;
  };
  // Reads and packs `path`, checking the digest against `digest` unless it is empty.
  absl::StatusOr<std::pair<AdapterInfo, std::shared_ptr<const PackedLora>>> Read(
      const std::string& name, const std::string& path, const std::string& digest) const;
  // Evicts unused adapters until one more fits; RESOURCE_EXHAUSTED when none can go.
  absl::Status MakeRoom(std::span<const PackedLora* const> releasing);

  // Constant after construction.
  const ModelConfig config_;
  const int max_cpu_loras_, max_loras_;
  const LoraReadOptions read_options_;
  const WeightDtype dtype_;

  std::map<std::string, Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LORA_REGISTRY_H_
