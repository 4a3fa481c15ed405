#include "worker/transfer/kv_transfers.h"

#include <chrono>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pagoda {

KvTransfers::~KvTransfers() { CancelAll(); }

absl::flat_hash_map<int, int64_t> KvTransfers::InFlight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

bool KvTransfers::busy() const {
  absl::MutexLock lock(&mu_);
  return !in_flight_.empty();
}

absl::Status KvTransfers::Validate(const std::vector<BlockPull>& pulls,
                                   const std::function<bool(int block)>& held) const {
  if (pulls.empty()) return absl::OkStatus();
  if (!enabled()) {
    return absl::InvalidArgumentError(
        "pulls: KV transfers are off on this worker (--kv-transfer-port=0)");
  }
  absl::MutexLock lock(&mu_);
  if (running_.size() + pulls.size() > static_cast<size_t>(kMaxPullsInFlight)) {
    return absl::InvalidArgumentError(absl::StrCat("pulls: ", pulls.size(), " more than the ",
                                                   kMaxPullsInFlight - running_.size(),
                                                   " this worker can start now"));
  }
  absl::flat_hash_set<int64_t> ids;
  absl::flat_hash_set<int> dsts;
  for (const BlockPull& p : pulls) {
    auto bad = [&](auto&&... parts) {
      return absl::InvalidArgumentError(absl::StrCat("pull ", p.transfer_id, ": ", parts...));
    };
    if (running_.contains(p.transfer_id) || !ids.insert(p.transfer_id).second)
      return bad("transfer_id already in flight");
    if (p.peer_address.empty() || p.peer_address.size() > kMaxPeerAddressBytes)
      return bad("peer_address of ", p.peer_address.size(), " bytes");
    if (p.dst_block_ids.empty() || p.dst_block_ids.size() > kMaxBlocksPerPull ||
        p.src_block_ids.size() != p.dst_block_ids.size()) {
      return bad(p.src_block_ids.size(), " src_block_ids and ", p.dst_block_ids.size(),
                 " dst_block_ids: they must be equal in number, 1 to ", kMaxBlocksPerPull);
    }
    for (int b : p.src_block_ids) {
      if (b < 0) return bad("src block ", b);  // the peer checks the upper bound
    }
    for (int b : p.dst_block_ids) {
      if (b < 0 || b >= pool_->num_blocks())
        return bad("dst block ", b, " outside the pool of ", pool_->num_blocks());
      if (!dsts.insert(b).second) return bad("dst block ", b, " repeated");
      if (auto it = in_flight_.find(b); it != in_flight_.end())
        return bad("dst block ", b, " is still being received (transfer ", it->second, ")");
      if (held(b)) return bad("dst block ", b, " is held by a sequence");
    }
  }
  return absl::OkStatus();
}

absl::Status KvTransfers::ValidateStep(const StepCommand& cmd, const SequenceTables& tables) const {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("step ", cmd.step_id, ": ", parts...));
  };
  if (!cmd.pulls.empty()) {
    // The blocks of the sequences that outlive this step's finished_ids.
    const absl::flat_hash_set<int64_t> finished(cmd.finished_ids.begin(), cmd.finished_ids.end());
    absl::flat_hash_set<int> held;
    for (const auto& [id, table] : tables) {
      if (!finished.contains(id)) held.insert(table->begin(), table->end());
    }
    const absl::Status status =
        Validate(cmd.pulls, [&](int block) { return held.contains(block); });
    if (!status.ok()) return bad(status.message());
  }
  // This step's pulls count as in flight for the rest of it.
  absl::flat_hash_map<int, int64_t> in_flight = InFlight();
  for (const BlockPull& p : cmd.pulls) {
    for (int b : p.dst_block_ids) in_flight[b] = p.transfer_id;
  }
  if (in_flight.empty()) return absl::OkStatus();
  auto receiving = [&](int block) -> std::string {
    auto it = in_flight.find(block);
    return it == in_flight.end()
               ? ""
               : absl::StrCat("block ", block, " is still being received (transfer ", it->second,
                              ")");
  };
  for (const BlockCopy& copy : cmd.block_copies) {
    for (int b : {copy.src, copy.dst}) {
      if (std::string why = receiving(b); !why.empty())
        return bad("block copy ", copy.src, " -> ", copy.dst, ": ", why);
    }
  }
  absl::flat_hash_set<int64_t> fresh;
  for (const NewSequence& n : cmd.new_sequences) fresh.insert(n.seq_id);
  for (const ScheduledSequence& s : cmd.scheduled) {
    // Validate checked the kept blocks against the table this step leaves it.
    auto it = tables.find(s.seq_id);
    if (!fresh.contains(s.seq_id) && it != tables.end()) {
      for (int i = 0; i < s.num_kept_blocks; ++i) {
        if (std::string why = receiving((*it->second)[i]); !why.empty())
          return bad("sequence ", s.seq_id, ": ", why);
      }
    }
    for (int b : s.new_block_ids) {
      if (std::string why = receiving(b); !why.empty())
        return bad("sequence ", s.seq_id, ": ", why);
    }
  }
  return absl::OkStatus();
}

void KvTransfers::Start(const std::vector<BlockPull>& pulls) {
  if (pulls.empty()) return;
  JoinEnded();
  absl::MutexLock lock(&mu_);
  for (const BlockPull& p : pulls) {
    auto running = std::make_unique<Running>();
    running->dst_block_ids = p.dst_block_ids;
    for (int b : p.dst_block_ids) in_flight_[b] = p.transfer_id;
    Running* r = running.get();
    running_[p.transfer_id] = std::move(running);
    r->thread = std::thread([this, p, r] { Run(p, r); });
  }
}

void KvTransfers::Run(const BlockPull& pull, Running* running) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<int64_t> bytes = puller_->Pull(pull, pool_, &running->cancel);
  TransferResult result;
  result.transfer_id = pull.transfer_id;
  result.ok = bytes.ok();
  if (bytes.ok()) {
    result.bytes = *bytes;
  } else {
    result.error = std::string(bytes.status().message());
    LOG(WARNING) << "pull " << pull.transfer_id << " from " << pull.peer_address
                 << " failed: " << bytes.status();
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  VLOG(1) << "pull " << pull.transfer_id << ": " << pull.dst_block_ids.size() << " blocks, "
          << result.bytes << " bytes in " << result.seconds << " s";
  absl::MutexLock lock(&mu_);
  for (int b : running->dst_block_ids) in_flight_.erase(b);
  ended_.push_back(std::move(result));
  running->ended = true;
}

void KvTransfers::JoinEnded() {
  std::vector<std::unique_ptr<Running>> ended;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second->ended) {
        ended.push_back(std::move(it->second));
        running_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& r : ended) r->thread.join();
}

void KvTransfers::TakeEnded(bool await, absl::Duration timeout, std::vector<TransferResult>* out) {
  {
    absl::MutexLock lock(&mu_);
    if (await) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ended_.empty() || in_flight_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    }
    for (TransferResult& r : ended_) out->push_back(std::move(r));
    ended_.clear();
  }
  JoinEnded();
}

void KvTransfers::CancelAll() {
  std::vector<std::unique_ptr<Running>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, r] : running_) {
      r->cancel.Cancel();
      all.push_back(std::move(r));
    }
    running_.clear();
  }
  for (auto& r : all) r->thread.join();
  absl::MutexLock lock(&mu_);
  in_flight_.clear();
  ended_.clear();
}

}  // namespace pagoda
