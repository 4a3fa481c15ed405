#include "worker/worker_options.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dtype_flags.h"

namespace pagoda {
absl::StatusOr<std::optional<WeightDtype>> ParseWeightDtype(const std::string& flag) {
  return ParseWeightDtypeFlag("weight-dtype", flag);
}

WeightDtype AutoWeightDtype(GgmlType stored) {
  switch (stored) {
    case GgmlType::kF32:
    case GgmlType::kF16:
      return WeightDtype::kF32;
    case GgmlType::kBF16:
      return WeightDtype::kBf16;
    case GgmlType::kQ8_0:
      return WeightDtype::kInt8;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_K:
      return WeightDtype::kInt4;  // the blocks copied (worker/int4_pack.h)
    case GgmlType::kQ6_K:
      return WeightDtype::kQ6K;  // the blocks copied (worker/q6k_pack.h)
  }
  return WeightDtype::kF32;
}

absl::StatusOr<std::optional<WeightDtype>> ParseLoraDtype(const std::string& flag) {
  if (flag == "auto") return std::nullopt;
  if (flag == "f32") return WeightDtype::kF32;
  if (flag == "bf16") return WeightDtype::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("--lora-dtype=", flag, ": expected auto, f32 or bf16"));
}

absl::StatusOr<WorkerOptions::LoraModule> ParseLoraModule(const std::string& flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-modules=", flag, ": expected NAME=PATH"));
  }
  return WorkerOptions::LoraModule{flag.substr(0, eq), flag.substr(eq + 1)};
}

absl::StatusOr<int64_t> ParseKvCacheMb(const std::string& flag) {
  if (flag == "auto") return 0;
  int64_t mb = 0;
  if (!absl::SimpleAtoi(flag, &mb) || mb <= 0 || mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-cache-mb=", flag, ": expected auto or a positive number of MiB"));
  }
  return mb << 20;
}

absl::StatusOr<KvDtype> ParseKvCacheDtype(const std::string& flag) {
  absl::StatusOr<std::optional<KvDtype>> dtype = ParseKvDtypeFlag("kv-cache-dtype", flag);
  if (!dtype.ok()) return dtype.status();
  return dtype->value_or(KvDtype::kF32);
}

int64_t AutoKvCacheBytes(int64_t available_bytes, double fraction, int64_t bytes_per_token,
                         int64_t max_tokens) {
  const auto by_memory = static_cast<int64_t>(static_cast<double>(available_bytes) * fraction);
  return std::min(by_memory, bytes_per_token * max_tokens);
}

namespace {

// The value of a "Key:   1234 kB" line of a /proc file, in bytes; 0 where absent.
int64_t ProcKibField(const char* path, const char* format) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), format, &kib) == 1) return kib << 10;
  }
  return 0;
}

}  // namespace

int64_t MemAvailableBytes() { return ProcKibField("/proc/meminfo", "MemAvailable: %lld kB"); }

int64_t PeakResidentBytes() { return ProcKibField("/proc/self/status", "VmHWM: %lld kB"); }

}  // namespace pagoda
