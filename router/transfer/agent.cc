#include "router/transfer/agent.h"

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "router/core/engine.h"

namespace pagoda {

TransferAgent::TransferAgent(Scheduler* scheduler, Arrive arrive)
    : scheduler_(scheduler), arrive_(std::move(arrive)) {}

void TransferAgent::Hold(HoldOrder order) { holds_.push_back(std::move(order)); }

void TransferAgent::ServeHolds() {
  KVCacheManager& kv = scheduler_->mutable_kv();
  std::erase_if(holds_, [&](HoldOrder& order) {
    std::vector<int> blocks = kv.HoldCachedPrefix(order.tokens, order.block_hashes);
    const size_t cached = blocks.size();
    if (cached < order.block_hashes.size() &&
        scheduler_->IsComputingBlock(static_cast<int>(cached), order.block_hashes[cached],
                                     /*waiting_too=*/true)) {
      kv.Release(blocks);  // asked again after the step that computes it
      return false;
    }
    VLOG(1) << "hold for transfer " << order.transfer_id << ": " << cached << " of "
            << order.block_hashes.size() << " blocks cached";
    num_held_blocks_ += static_cast<int64_t>(blocks.size());
    events_.held.push_back({.transfer_id = order.transfer_id, .blocks = std::move(blocks)});
    return true;
  });
}

void TransferAgent::Release(std::span<const int> blocks) {
  scheduler_->mutable_kv().Release(blocks);
  num_held_blocks_ -= static_cast<int64_t>(blocks.size());
}

void TransferAgent::CountHeld(int64_t num_blocks) { num_held_blocks_ += num_blocks; }

void TransferAgent::AddPull(int64_t request_id, const GenerationRequest& request, PullPlan plan) {
  const int bs = scheduler_->options().block_size;
  const size_t num_full = plan.block_hashes.size();
  CHECK_EQ(plan.tokens.size(), num_full * bs) << "a pull plan covers whole blocks";
  CHECK_EQ(plan.src_blocks.size(), num_full + (plan.tail_tokens > 0 ? 1 : 0));
  CHECK(!pulls_.contains(plan.transfer_id)) << "transfer " << plan.transfer_id << " twice";
  const int64_t id = plan.transfer_id;
  Pull& pull = pulls_[id];
  pull.plan = std::move(plan);
  pull.request_id = request_id;
  pull.request = std::make_shared<const GenerationRequest>(request);
}

void TransferAgent::Abort(int64_t request_id, int seq_index) {
  for (auto& [id, pull] : pulls_) {
    const GenerationRequest& r = *pull.request;
    pull.aborted |=
        pull.request_id == request_id &&
        (seq_index < 0 || (seq_index >= r.first_seq_index && seq_index < r.first_seq_index + r.n));
  }
}

bool TransferAgent::has_pulls_in_flight() const {
  for (const auto& [id, pull] : pulls_) {
    if (pull.started) return true;
  }
  return false;
}

std::vector<BlockPull> TransferAgent::BeforeSchedule() {
  ServeHolds();
  std::vector<BlockPull> out;
  std::vector<std::pair<int64_t, std::string>> ended;  // with why ("": a local hit)
  KVCacheManager& kv = scheduler_->mutable_kv();
  for (auto& [id, pull] : pulls_) {
    if (pull.started) continue;
    const PullPlan& plan = pull.plan;
    const int num_full = static_cast<int>(plan.block_hashes.size());
    pull.num_local = kv.NumCachedBlocks(plan.tokens, plan.block_hashes);
    // A tail continues the full blocks: it comes along however many of them are here.
    const int need = num_full - pull.num_local + (plan.tail_tokens > 0 ? 1 : 0);
    if (pull.aborted || need == 0) {
      ended.emplace_back(id, pull.aborted ? "aborted" : "");
      continue;
    }
    pull.dst = kv.HoldFreeBlocks(need);
    if (pull.dst.empty()) {
      ended.emplace_back(id, "no free blocks to receive into");  // computed instead
      continue;
    }
    pull.started = true;
    pull.start = absl::Now();
    out.push_back({.transfer_id = id,
                   .peer_address = plan.peer_address,
                   .src_block_ids = std::vector<int>(plan.src_blocks.begin() + pull.num_local,
                                                     plan.src_blocks.end()),
                   .dst_block_ids = pull.dst});
  }
  for (const auto& [id, why] : ended) EndPull(id, why.empty(), why, 0, 0);
  return out;
}

absl::Status TransferAgent::CheckResult(const StepResult& result) const {
  absl::flat_hash_set<int64_t> seen;
  for (const TransferResult& t : result.transfers) {
    auto it = pulls_.find(t.transfer_id);
    if (it == pulls_.end() || !it->second.started || !seen.insert(t.transfer_id).second) {
      return absl::InternalError(
          absl::StrCat("worker reported transfer ", t.transfer_id, ", which it was not running"));
    }
    if (t.bytes < 0 || !std::isfinite(t.seconds) || t.seconds < 0) {
      return absl::InternalError(absl::StrCat("worker reported transfer ", t.transfer_id, " of ",
                                              t.bytes, " bytes in ", t.seconds, " s"));
    }
  }
  return absl::OkStatus();
}

void TransferAgent::AfterPostprocess(const StepResult& result) {
  for (const TransferResult& t : result.transfers) {
    // Only logged: it comes off the wire.
    EndPull(t.transfer_id, t.ok, t.error.substr(0, 256), t.bytes, t.seconds);
  }
}

void TransferAgent::EndPull(int64_t transfer_id, bool ok, const std::string& error, int64_t bytes,
                            double seconds) {
  auto it = pulls_.find(transfer_id);
  Pull pull = std::move(it->second);
  pulls_.erase(it);
  KVCacheManager& kv = scheduler_->mutable_kv();
  const PullPlan& plan = pull.plan;
  const int bs = scheduler_->options().block_size;
  const int num_full = static_cast<int>(plan.block_hashes.size());
  const int num_pulled_full = pull.started ? num_full - pull.num_local : 0;
  std::optional<PulledTail> tail;
  if (ok && pull.started) {
    const std::span<const int> full = std::span(pull.dst).first(num_pulled_full);
    kv.CacheHeldBlocks(full, std::span(plan.tokens).subspan(pull.num_local * bs),
                       std::span(plan.block_hashes).subspan(pull.num_local));
    kv.Release(full);
    if (plan.tail_tokens > 0) {
      tail =
          PulledTail{.block = pull.dst.back(), .index = num_full, .num_tokens = plan.tail_tokens};
    }
  } else {
    kv.Release(pull.dst);
  }
  TransferEvents::Pulled& report = events_.pulled.emplace_back();
  report.transfer_id = transfer_id;
  report.ok = ok;
  report.error = error;
  report.num_blocks = ok ? static_cast<int>(pull.dst.size()) : 0;
  report.num_tokens = ok ? num_pulled_full * bs + (tail.has_value() ? tail->num_tokens : 0) : 0;
  report.bytes = bytes;
  report.seconds = pull.started ? seconds : 0;
  report.started = pull.started;
  if (!ok && pull.started) {
    LOG(WARNING) << "transfer " << transfer_id << " from " << plan.peer_address
                 << " failed; its tokens are computed instead: " << error;
  }
  if (pull.aborted) {
    if (tail.has_value()) kv.Release(std::span<const int>(&tail->block, 1));
    return;
  }
  if (const absl::Status added = arrive_(pull.request_id, *pull.request, tail); !added.ok()) {
    // Checked when it came; only a sequence added under the same id since can clash.
    LOG(WARNING) << "request " << pull.request_id << " after its pull: " << added;
    if (tail.has_value()) kv.Release(std::span<const int>(&tail->block, 1));
  }
}

TransferEvents TransferAgent::TakeEvents() {
  TransferEvents out;
  std::swap(out, events_);
  return out;
}

}  // namespace pagoda
