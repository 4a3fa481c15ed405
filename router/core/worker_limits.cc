#include "router/core/worker_limits.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/model/lora_adapter.h"
#include "common/status_macros.h"
#include "common/step.h"

namespace pagoda {

absl::Status ValidateWorkerInfo(const WorkerInfo& info, const WorkerLimits& limits) {
  auto check = [](const char* field, int64_t value, int64_t max) -> absl::Status {
    if (value >= 1 && value <= max) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("Hello.", field, " = ", value, ": must be in [1, ", max, "]"));
  };
  RETURN_IF_ERROR(check("num_blocks", info.num_blocks, limits.max_num_blocks));
  RETURN_IF_ERROR(check("block_size", info.block_size, limits.max_block_size));
  RETURN_IF_ERROR(
      check("max_num_batched_tokens", info.max_num_batched_tokens, limits.max_num_batched_tokens));
  RETURN_IF_ERROR(check("max_num_seqs", info.max_num_seqs, limits.max_num_seqs));
  // Slots (block * block_size + offset) are 32-bit on both sides.
  if (static_cast<int64_t>(info.num_blocks) * info.block_size > INT32_MAX) {
    return absl::InvalidArgumentError("Hello: num_blocks x block_size exceeds 2^31 slots");
  }
  // A host:port peers dial (issue 28): printable, no spaces.
  if (info.kv_transfer_address.size() > kMaxPeerAddressBytes ||
      !std::all_of(info.kv_transfer_address.begin(), info.kv_transfer_address.end(),
                   [](char c) { return c > ' ' && c < 127; })) {
    return absl::InvalidArgumentError(absl::StrCat("Hello.kv_transfer_address: at most ",
                                                   kMaxPeerAddressBytes, " printable characters"));
  }
  // Only logged, but it comes off the wire: short and plain.
  if (info.kv_cache_dtype.size() > 16 ||
      !std::all_of(info.kv_cache_dtype.begin(), info.kv_cache_dtype.end(),
                   [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(
        "Hello.kv_cache_dtype: at most 16 letters and digits, like \"bf16\"");
  }
  // LoRA adapters (issue 39): named as requests name them, so short and plain.
  if (info.adapters.size() > static_cast<size_t>(kMaxWorkerAdapters)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello.adapters: ", info.adapters.size(), "; at most ", kMaxWorkerAdapters));
  }
  for (const AdapterInfo& a : info.adapters) {
    if (!IsLoraAdapterName(a.name) || a.rank < 1 || a.rank > 256 || a.digest.size() > 64) {
      return absl::InvalidArgumentError(
          "Hello.adapters: each a name of 1 to 128 [A-Za-z0-9._:/-], a rank in [1, 256] and a "
          "digest of at most 64 characters");
    }
  }
  if (info.max_loras < 0 || info.max_cpu_loras < 0 || info.max_loras > 1024 ||
      info.max_cpu_loras > 1024) {
    return absl::InvalidArgumentError("Hello.max_loras, max_cpu_loras: must be in [0, 1024]");
  }
  return absl::OkStatus();
}

absl::Status CheckRoomFor(const WorkerInfo& info, int live_workers, int64_t live_blocks,
                          const WorkerLimits& limits) {
  if (live_workers >= limits.max_workers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the router has ", live_workers, " workers, its limit"));
  }
  const int64_t blocks = live_blocks + info.num_blocks;
  if (blocks > limits.max_total_blocks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("Hello.num_blocks = ", info.num_blocks, ": the workers would hold ", blocks,
                     " blocks, over the router's budget of ", limits.max_total_blocks));
  }
  return absl::OkStatus();
}

absl::Status ValidateCachedBlocks(std::span<const CachedBlock> cached, const WorkerInfo& info,
                                  int vocab_size) {
  if (static_cast<int64_t>(cached.size()) * info.block_size > kMaxCachedBlockTokens ||
      static_cast<int64_t>(cached.size()) > info.num_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("Hello.cached_blocks: ", cached.size(), " blocks; at most ",
                     std::min<int64_t>(info.num_blocks, kMaxCachedBlockTokens / info.block_size)));
  }
  std::vector<bool> seen(info.num_blocks);
  for (size_t i = 0; i < cached.size(); ++i) {
    const CachedBlock& c = cached[i];
    const auto bad = [i](const char* field, const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("Hello.cached_blocks[", i, "].", field, ": ", what));
    };
    if (c.block < 0 || c.block >= info.num_blocks || seen[c.block]) {
      return bad("block", absl::StrCat(c.block, " is not a block of the pool or repeats one"));
    }
    seen[c.block] = true;
    if (c.parent < -1 || c.parent >= static_cast<int>(i)) {
      return bad("parent", absl::StrCat(c.parent, ": must be -1 or an earlier entry's index"));
    }
    if (static_cast<int>(c.tokens.size()) != info.block_size) {
      return bad("tokens", absl::StrCat(c.tokens.size(), " ids; a block holds ", info.block_size));
    }
    for (int t : c.tokens) {
      if (t < 0 || t >= vocab_size) return bad("tokens", absl::StrCat("id ", t, " out of range"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagoda
