#include "worker/lora_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/dtype_names.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pagoda {
namespace {

constexpr size_t kMaxNameBytes = 128;

}  // namespace

LoraRegistry::LoraRegistry(const ModelConfig& config, int max_cpu_loras, int max_loras,
                           LoraReadOptions read_options, WeightDtype dtype)
    : config_(config),
      max_cpu_loras_(max_cpu_loras),
      max_loras_(max_loras),
      read_options_(std::move(read_options)),
      dtype_(dtype) {
  CHECK(max_loras >= 1 && max_loras <= max_cpu_loras)
      << "max_loras " << max_loras << ", max_cpu_loras " << max_cpu_loras;
}

absl::StatusOr<std::pair<AdapterInfo, std::shared_ptr<const PackedLora>>> LoraRegistry::Read(
    const std::string& name, const std::string& path, const std::string& digest) const {
  LoraReadOptions options = read_options_;
  options.max_rank = std::min(options.max_rank, kMaxLoraRank);
  ASSIGN_OR_RETURN(const LoraAdapter adapter, ReadLoraAdapter(path, config_, options));
  if (!digest.empty() && adapter.digest != digest) {
    return absl::FailedPreconditionError(
        absl::StrCat("adapter ", name, ": ", path, " changed since it was loaded"));
  }
  auto packed = std::make_shared<const PackedLora>(adapter, config_, dtype_);
  LOG(INFO) << "LoRA adapter " << name << ": " << adapter.format << " rank " << adapter.rank
            << " scale " << adapter.scale << ", " << packed->weight_bytes() / 1024 << " KiB of "
            << WeightDtypeName(dtype_) << ", from " << path;
  return std::make_pair(AdapterInfo{name, adapter.rank, adapter.digest}, std::move(packed));
}

absl::Status LoraRegistry::MakeRoom(std::span<const PackedLora* const> releasing) {
  while (num_in_memory() >= max_cpu_loras_) {
    Entry* victim = nullptr;
    for (auto& [name, e] : entries_) {
      // Only the registry holds it once `releasing` goes: no sequence runs on it.
      const long holds = e.packed == nullptr ? 0 : e.packed.use_count();
      const long going = std::count(releasing.begin(), releasing.end(), e.packed.get());
      if (e.packed != nullptr && holds - going == 1 &&
          (victim == nullptr || e.last_used < victim->last_used)) {
        victim = &e;
      }
    }
    if (victim == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("all ", max_cpu_loras_, " adapters in memory are in use (--max-cpu-loras)"));
    }
    VLOG(1) << "evicting LoRA adapter " << victim->info.name;
    victim->packed = nullptr;
  }
  return absl::OkStatus();
}

absl::Status LoraRegistry::Load(const std::string& name, const std::string& path) {
  if (!IsLoraAdapterName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter name \"", name.substr(0, kMaxNameBytes),
                     "\": 1 to 128 bytes of letters, digits and . _ : / -"));
  }
  if (Has(name)) return absl::AlreadyExistsError(absl::StrCat("adapter ", name, " is loaded"));
  ASSIGN_OR_RETURN(auto read, Read(name, path, ""));
  RETURN_IF_ERROR(MakeRoom({}));
  entries_[name] = Entry{path, std::move(read.first), std::move(read.second), ++clock_};
  return absl::OkStatus();
}

absl::Status LoraRegistry::Unload(const std::string& name) {
  if (entries_.erase(name) == 0) return absl::NotFoundError(absl::StrCat("no adapter ", name));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const PackedLora>> LoraRegistry::Acquire(
    const std::string& name, std::span<const PackedLora* const> releasing) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no adapter ", name));
  Entry& e = it->second;
  if (e.packed == nullptr) {
    RETURN_IF_ERROR(MakeRoom(releasing));
    ASSIGN_OR_RETURN(auto read, Read(name, e.path, e.info.digest));
    e.packed = std::move(read.second);
  }
  e.last_used = ++clock_;
  return e.packed;
}

std::vector<AdapterInfo> LoraRegistry::List() const {
  std::vector<AdapterInfo> list;
  for (const auto& [name, e] : entries_) list.push_back(e.info);
  return list;
}

int LoraRegistry::num_in_memory() const {
  int n = 0;
  for (const auto& [name, e] : entries_) n += e.packed != nullptr;
  return n;
}

}  // namespace pagoda
