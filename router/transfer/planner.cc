#include "router/transfer/planner.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "common/dtype_flags.h"
#include "glog/logging.h"
#include "router/core/block_pool.h"

namespace pagoda {
namespace {

TransferAction Queue(int dst, QueuedRequest work) {
  return {.kind = TransferAction::Kind::kQueue, .worker = dst, .work = std::move(work)};
}

TransferAction Release(int worker, std::vector<int> blocks) {
  return {.kind = TransferAction::Kind::kRelease, .worker = worker, .blocks = std::move(blocks)};
}

TransferAction Place(QueuedRequest work, bool unassign = false) {
  return {.kind = TransferAction::Kind::kPlace, .work = std::move(work), .unassign = unassign};
}

}  // namespace

void HashPrompt(GenerationRequest* request, int block_size) {
  if (request->prompt_block_size == block_size) return;
  request->prompt_block_hashes = BlockHashes(request->prompt_ids, block_size, request->prefix_root);
  request->prompt_block_size = block_size;
}

TransferPlanner::TransferPlanner(const ModelConfig& config, const TransferPlannerOptions& options,
                                 Placement* placement)
    : kv_rows_per_token_(int64_t{2} * config.num_layers * config.num_kv_heads),
      head_dim_(config.head_dim),
      options_(options),
      placement_(placement) {}

int64_t TransferPlanner::BytesPerBlock(const WorkerInfo& info) const {
  // The name comes off the wire: one this router does not know counts as f32's bytes, the most.
  const absl::StatusOr<std::optional<KvDtype>> dtype =
      ParseKvDtypeFlag("kv-cache-dtype", info.kv_cache_dtype);
  const KvDtype known = dtype.ok() && dtype->has_value() ? **dtype : KvDtype::kF32;
  return kv_rows_per_token_ * info.block_size * KvRowBytes(known, head_dim_);
}

bool TransferPlanner::CanTransfer(const TransferSnapshot& s, int src, int dst) {
  if (src == dst || src < 0 || dst < 0) return false;
  const WorkerView& a = s.workers[src];
  const WorkerView& b = s.workers[dst];
  return a.alive && b.alive && !a.info->kv_transfer_address.empty() &&
         !b.info->kv_transfer_address.empty() && a.info->block_size == b.info->block_size &&
         a.info->kv_cache_dtype == b.info->kv_cache_dtype;
}

int64_t TransferPlanner::MoveRoom(const TransferSnapshot& s, int src, int dst) {
  const WorkerView& o = s.workers[dst];
  if (o.draining || !CanTransfer(s, src, dst)) return 0;
  if (o.load.num_waiting > 0) return 0;
  return (o.info->num_blocks - o.load.num_used_blocks) / 2;
}

std::vector<WorkerLoad> TransferPlanner::Candidates(
    const TransferSnapshot& s, absl::FunctionRef<bool(const WorkerView&)> admit,
    bool count_transfers) const {
  std::vector<WorkerLoad> out;
  for (const WorkerView& w : s.workers) {
    if (!admit(w)) continue;
    out.push_back({.worker_id = w.id,
                   .num_used_blocks = w.load.num_used_blocks,
                   .num_waiting = w.load.num_waiting + (count_transfers ? NumWaiting(w.id) : 0),
                   .can_pull = options_.enabled && !w.info->kv_transfer_address.empty()});
  }
  return out;
}

bool TransferPlanner::StartPull(const TransferSnapshot& s, int chosen,
                                std::span<const Placement::OwnerList> owners, QueuedRequest* work,
                                TransferActions* out) {
  if (owners.empty()) return false;
  const GenerationRequest& request = work->request;
  const WorkerInfo& info = *s.workers[chosen].info;
  const int block_size = info.block_size;
  // Blocks a prefix hit can use: never the one holding the last token (it is computed).
  const int num_tokens = static_cast<int>(request.prompt_ids.size() + request.output_ids.size());
  const int usable = std::min<int>(
      {static_cast<int>(owners.size()), (num_tokens - 1) / block_size, kMaxBlocksPerPull});
  // The deepest block another worker that can send it to `chosen` has; of those, the one it
  // went to last.
  int deepest = usable - 1, src = -1;
  while (deepest >= 0) {
    for (int o : owners[deepest]) {
      if (src < 0 && CanTransfer(s, o, chosen)) src = o;
    }
    if (src >= 0) break;
    --deepest;
  }
  if (src < 0) return false;
  int have = 0;  // the chosen worker's own claim
  while (have < usable && absl::c_linear_search(owners[have], chosen)) ++have;
  const int gain = deepest + 1 - have;
  if (gain * block_size < options_.min_tokens) return false;
  // The same prefix already on its way to `chosen`: wait for it there, not pull it again.
  const uint64_t deepest_hash = request.prompt_block_hashes[deepest];
  for (auto& [id, t] : transfers_) {
    if (t.dst == chosen && static_cast<int>(t.block_hashes.size()) > deepest &&
        t.block_hashes[deepest] == deepest_hash) {
      VLOG(1) << "request " << work->request_id << " on worker " << chosen << " follows transfer "
              << id;
      // As for the transfer's own request: until it ends, only its source has the blocks.
      placement_->Remember(std::span(t.block_hashes).first(deepest + 1), t.src, chosen);
      t.followers.push_back(std::move(*work));
      return true;
    }
  }
  const WorkerLoop::Load& load = s.workers[chosen].load;
  const double per_token =
      load.num_prefill_tokens >= 256 ? load.prefill_forward_seconds / load.num_prefill_tokens : 0;
  const int64_t bytes = gain * BytesPerBlock(info);
  if (!cost_.Pays(bytes, gain * block_size, per_token)) return false;

  const int64_t id = next_transfer_id_++;
  Transfer& t = transfers_[id];
  t.src = src;
  t.dst = chosen;
  // Waiting longer than computing it here would take is worse than computing it.
  absl::Duration wait = options_.max_wait;
  if (per_token > 0) {
    wait = std::min(wait, absl::Seconds(kWaitPrefills * gain * block_size * per_token));
  }
  t.give_up_at = s.now + wait;
  HoldOrder hold;
  hold.transfer_id = id;
  hold.tokens.assign(request.prompt_ids.begin(),
                     request.prompt_ids.begin() + (deepest + 1) * block_size);
  hold.block_hashes.assign(request.prompt_block_hashes.begin(),
                           request.prompt_block_hashes.begin() + deepest + 1);
  // Later requests with this prefix ask the worker that has it, not the one still waiting.
  placement_->Remember(hold.block_hashes, src, chosen);
  t.block_hashes = hold.block_hashes;
  t.work = std::move(*work);
  VLOG(1) << "request " << t.work->request_id << " on worker " << chosen << " asks worker " << src
          << " for " << deepest + 1 << " blocks";
  out->push_back({.kind = TransferAction::Kind::kHold, .worker = src, .hold = std::move(hold)});
  return true;
}

void TransferPlanner::QueuePull(const TransferSnapshot& s, QueuedRequest work, int src, int dst,
                                std::vector<int> src_blocks, std::span<const int> tokens,
                                int num_tokens, std::vector<QueuedRequest> followers,
                                TransferActions* out) {
  const int block_size = s.workers[dst].info->block_size;
  const int64_t id = next_transfer_id_++;
  PullPlan plan;
  plan.transfer_id = id;
  plan.peer_address = s.workers[src].info->kv_transfer_address;
  const int num_full = num_tokens / block_size;
  plan.tokens.assign(tokens.begin(), tokens.begin() + num_full * block_size);
  plan.block_hashes = BlockHashes(plan.tokens, block_size, work.request.prefix_root);
  plan.tail_tokens = num_tokens % block_size;
  plan.src_blocks = src_blocks;
  Transfer& t = transfers_[id];
  t.src = src;
  t.dst = dst;
  t.src_blocks = std::move(src_blocks);
  t.block_hashes = plan.block_hashes;
  t.followers = std::move(followers);
  work.pull = std::move(plan);
  out->push_back(Queue(dst, std::move(work)));
}

TransferActions TransferPlanner::OnEvents(const TransferSnapshot& s, int worker_id,
                                          const TransferEvents& events) {
  TransferActions out;
  const bool alive = s.workers[worker_id].alive;
  for (const TransferEvents::Held& held : events.held) {
    auto it = transfers_.find(held.transfer_id);
    if (it == transfers_.end() || !it->second.work.has_value() || !alive) {
      if (alive) out.push_back(Release(worker_id, held.blocks));  // its request ended meanwhile
      if (it != transfers_.end()) transfers_.erase(it);
      continue;
    }
    QueuedRequest work = std::move(*it->second.work);
    std::vector<QueuedRequest> followers = std::move(it->second.followers);
    const std::vector<uint64_t> hashes = std::move(it->second.block_hashes);
    const int dst = it->second.dst;
    transfers_.erase(it);
    if (held.blocks.empty() || !CanTransfer(s, worker_id, dst)) {
      if (!held.blocks.empty()) out.push_back(Release(worker_id, held.blocks));
      if (s.workers[dst].alive) placement_->Remember(hashes, dst);  // it computes them
      out.push_back(Queue(dst, std::move(work)));
      for (QueuedRequest& f : followers) out.push_back(Queue(dst, std::move(f)));
      continue;
    }
    const int block_size = s.workers[worker_id].info->block_size;
    const int num_tokens = static_cast<int>(held.blocks.size()) * block_size;
    const std::vector<int> prompt = work.request.prompt_ids;
    QueuePull(s, std::move(work), worker_id, dst, held.blocks, prompt, num_tokens,
              std::move(followers), &out);
  }
  TransferActions followers;
  for (const TransferEvents::Pulled& pulled : events.pulled) {
    auto it = transfers_.find(pulled.transfer_id);
    if (it == transfers_.end()) continue;  // a side left: it was ended then
    Transfer& t = it->second;
    for (QueuedRequest& f : t.followers) followers.push_back(Queue(t.dst, std::move(f)));
    if (s.workers[t.src].alive) out.push_back(Release(t.src, std::move(t.src_blocks)));
    if (!pulled.started) {
      VLOG(1) << "transfer " << pulled.transfer_id << " into worker " << t.dst
              << " did not start: " << (pulled.ok ? "its blocks are there" : pulled.error);
    }
    if (pulled.ok) placement_->Remember(t.block_hashes, t.dst);  // it has them now
    if (pulled.started) {
      cost_.ObservePull(pulled.bytes, pulled.seconds);
      VLOG(1) << "transfer " << pulled.transfer_id << " worker " << t.src << " -> " << t.dst << ": "
              << (pulled.ok ? "" : "failed ") << pulled.num_blocks << " blocks, " << pulled.bytes
              << " bytes in " << pulled.seconds << " s";
    }
    if (options_.metrics != nullptr && pulled.started) {
      RouterMetrics& m = *options_.metrics;
      m.kv_transfer_seconds->Observe(pulled.seconds);
      m.kv_transfer_bytes->Add(static_cast<double>(pulled.bytes));
      if (pulled.ok) {
        m.kv_transfer_blocks->Add(pulled.num_blocks);
        m.kv_transfer_saved_tokens->Add(pulled.num_tokens);
      } else {
        m.kv_transfer_failures->Add();
      }
    }
    transfers_.erase(it);
  }
  // After the pulled requests (already in their destinations' schedulers): they find the
  // blocks cached.
  std::move(followers.begin(), followers.end(), std::back_inserter(out));
  return out;
}

TransferActions TransferPlanner::OnDetached(const TransferSnapshot& s, int worker_id,
                                            Scheduler::Detached d,
                                            std::optional<QueuedRequest> work,
                                            absl::flat_hash_map<int, int64_t>* taken) {
  TransferActions out;
  if (!s.workers[worker_id].alive) return out;  // gone: its sequences moved as a failed worker's
  if (!work.has_value()) {
    out.push_back(Release(worker_id, std::move(d.blocks)));
    return out;
  }
  const int block_size = s.workers[worker_id].info->block_size;
  // What the worker computed is what it delivered (updates come before the detach).
  std::vector<int> tokens = work->request.prompt_ids;
  tokens.insert(tokens.end(), work->request.output_ids.begin(), work->request.output_ids.end());
  // A preempted sequence goes where its tokens and as many again fit (MoveRoom).
  const int64_t need = (static_cast<int64_t>(tokens.size()) + block_size) / block_size;
  const std::vector<WorkerLoad> candidates = Candidates(
      s,
      [&](const WorkerView& o) {
        if (o.draining || !CanTransfer(s, worker_id, o.id)) return false;
        if (s.loras != nullptr && !s.loras->Holds(o.id, work->request.adapter)) return false;
        return !d.preempted || MoveRoom(s, worker_id, o.id) - (*taken)[o.id] >= need;
      },
      /*count_transfers=*/false);
  const int max_tokens = (kMaxBlocksPerPull - 1) * block_size;
  if (candidates.empty() || tokens != d.tokens || d.num_computed > max_tokens) {
    out.push_back(Release(worker_id, std::move(d.blocks)));
    if (d.preempted) {
      out.push_back(Queue(worker_id, *std::move(work)));  // waits here again, from its cache
    } else {
      out.push_back(Place(*std::move(work), /*unassign=*/true));  // without its K/V
    }
    return out;
  }
  HashPrompt(&work->request, block_size);
  const int dst = placement_->Choose(candidates, work->request.prompt_block_hashes);
  (*taken)[dst] += need;
  LOG(INFO) << "moving " << (d.preempted ? "preempted " : "") << "request " << d.request_id << "/"
            << d.seq_index << " from worker " << worker_id << " to " << dst << " with "
            << d.num_computed << " tokens of K/V";
  if (d.blocks.empty()) {  // none left cached: it computes them there, not waits here
    out.push_back(Queue(dst, *std::move(work)));
    return out;
  }
  if (options_.metrics != nullptr) options_.metrics->kv_migrated_sequences->Add();
  QueuePull(s, *std::move(work), worker_id, dst, std::move(d.blocks), tokens, d.num_computed, {},
            &out);
  return out;
}

int TransferPlanner::PreemptedRoom(const TransferSnapshot& s, int worker_id) const {
  const WorkerView& w = s.workers[worker_id];
  if (!w.alive || w.draining || w.load.num_preempted == 0) return 0;
  int64_t room = 0;
  for (const WorkerView& o : s.workers) room = std::max(room, MoveRoom(s, worker_id, o.id));
  return static_cast<int>(room);  // at most half a worker's pool (an int)
}

int TransferPlanner::NumWaiting(int dst) const {
  int n = 0;
  for (const auto& [id, t] : transfers_) {
    // A pulling request waits in its destination's engine, outside its scheduler's count.
    if (dst < 0 || t.dst == dst) n += 1 + static_cast<int>(t.followers.size());
  }
  return n;
}

TransferActions TransferPlanner::GiveUpWaiting(absl::Time now) {
  TransferActions out;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& t = it->second;
    if (!t.work.has_value() || t.give_up_at > now) {
      ++it;
      continue;
    }
    // The holder answers later and finds no transfer: it releases what it held.
    LOG(INFO) << "request " << t.work->request_id << " waited too long for worker " << t.src
              << "'s prefix; computing it on worker " << t.dst;
    placement_->Remember(t.block_hashes, t.dst);  // it computes them
    out.push_back(Queue(t.dst, std::move(*t.work)));
    for (QueuedRequest& f : t.followers) out.push_back(Queue(t.dst, std::move(f)));
    transfers_.erase(it++);
  }
  return out;
}

TransferActions TransferPlanner::EndTransfersOf(const TransferSnapshot& s, int worker_id) {
  TransferActions releases, places;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& t = it->second;
    if (t.src != worker_id && t.dst != worker_id) {
      ++it;
      continue;
    }
    if (!t.work.has_value() && t.dst != worker_id) {
      // Pulling from the dead worker: the pull fails, its request computes the blocks, and
      // the destination still reports it (OnEvents counts the failure).
      ++it;
      continue;
    }
    if (t.work.has_value()) {
      // Holding. A dead source never answers: place the request now. A live one answers
      // OnEvents, which finds no transfer and releases.
      places.push_back(Place(std::move(*t.work)));
    } else if (s.workers[t.src].alive) {
      // Pulling into the dead worker: its request moves with the rest of its sequences.
      releases.push_back(Release(t.src, std::move(t.src_blocks)));
    }
    for (QueuedRequest& f : t.followers) places.push_back(Place(std::move(f)));
    transfers_.erase(it++);
  }
  std::move(places.begin(), places.end(), std::back_inserter(releases));
  return releases;
}

TransferActions TransferPlanner::EndRequest(int64_t request_id) {
  // Waiting for a holder's answer: it is released when the answer comes; the requests that
  // follow the transfer go to its destination now.
  TransferActions out;
  for (auto t = transfers_.begin(); t != transfers_.end();) {
    std::erase_if(t->second.followers,
                  [&](const QueuedRequest& f) { return f.request_id == request_id; });
    if (!t->second.work.has_value() || t->second.work->request_id != request_id) {
      ++t;
      continue;
    }
    for (QueuedRequest& f : t->second.followers) out.push_back(Queue(t->second.dst, std::move(f)));
    transfers_.erase(t++);
  }
  return out;
}

}  // namespace pagoda
