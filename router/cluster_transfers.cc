// The Cluster's part in KV transfers between workers (issue 28): which worker pulls which
// blocks from which, and what happens when either side leaves. A pull has two phases:
//
//   holding:  the source's loop holds the blocks it has of the prefix (Engine::Hold); the
//             request waits here (Transfer::work), counted as waiting
//   pulling:  the request is queued on the destination with a PullPlan; the destination's
//             worker pulls while it steps, then the request runs from the blocks
//
// and ends when the destination reports the pull (OnTransfers): the source releases its
// blocks. A failed or refused pull costs only time: the request computes what it lacks.
// Sequences leave a worker with their K/V (OnDetached) when it drains (the running ones) and
// when it is short of blocks (those it preempted, to a worker with room: MovePreemptedLocked).
#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "glog/logging.h"
#include "router/block_pool.h"
#include "router/cluster.h"

namespace pagoda {
namespace {

int64_t KvBytesPerBlock(const ModelConfig& config, const WorkerInfo& info) {
  const int dtype_bytes = info.kv_cache_dtype == "f32" ? 4 : 2;
  return int64_t{2} * config.num_layers * config.num_kv_heads * config.head_dim * info.block_size *
         dtype_bytes;
}

}  // namespace

bool Cluster::CanTransferLocked(int src, int dst) const {
  if (src == dst || src < 0 || dst < 0) return false;
  const Worker& s = *workers_[src];
  const Worker& d = *workers_[dst];
  const WorkerInfo& a = s.loop->info();
  const WorkerInfo& b = d.loop->info();
  return s.alive && d.alive && !a.kv_transfer_address.empty() && !b.kv_transfer_address.empty() &&
         a.block_size == b.block_size && a.kv_cache_dtype == b.kv_cache_dtype;
}

bool Cluster::StartPullLocked(int chosen, const std::vector<Placement::OwnerList>& owners,
                              QueuedRequest* work) {
  if (owners.empty()) return false;
  const GenerationRequest& request = work->request;
  const int block_size = workers_[chosen]->loop->info().block_size;
  // Blocks a prefix hit can use: never the one holding the last token (it is computed).
  const int num_tokens = static_cast<int>(request.prompt_ids.size() + request.output_ids.size());
  const int usable = std::min<int>(
      {static_cast<int>(owners.size()), (num_tokens - 1) / block_size, kMaxBlocksPerPull});
  // The deepest block another worker that can send it to `chosen` has; of those, the one it
  // went to last.
  int deepest = usable - 1, src = -1;
  while (deepest >= 0) {
    for (int o : owners[deepest]) {
      if (src < 0 && CanTransferLocked(o, chosen)) src = o;
    }
    if (src >= 0) break;
    --deepest;
  }
  if (src < 0) return false;
  int have = 0;  // the chosen worker's own claim
  while (have < usable && absl::c_linear_search(owners[have], chosen)) ++have;
  const int gain = deepest + 1 - have;
  if (gain * block_size < options_.kv_transfer_min_tokens) return false;
  // The same prefix already on its way to `chosen`: wait for it there, not pull it again.
  const uint64_t deepest_hash = request.prompt_block_hashes[deepest];
  for (auto& [id, t] : transfers_) {
    if (t.dst == chosen && static_cast<int>(t.block_hashes.size()) > deepest &&
        t.block_hashes[deepest] == deepest_hash) {
      VLOG(1) << "request " << work->request_id << " on worker " << chosen << " follows transfer "
              << id;
      // As for the transfer's own request: until it ends, only its source has the blocks.
      placement_.Remember(std::span(t.block_hashes).first(deepest + 1), t.src, chosen);
      t.followers.push_back(std::move(*work));
      return true;
    }
  }
  const WorkerLoop::Load load = workers_[chosen]->loop->load();
  const double per_token =
      load.num_prefill_tokens >= 256 ? load.prefill_forward_seconds / load.num_prefill_tokens : 0;
  const int64_t bytes = gain * KvBytesPerBlock(config_, workers_[chosen]->loop->info());
  if (!transfer_cost_.Pays(bytes, gain * block_size, per_token)) return false;

  const int64_t id = next_transfer_id_++;
  Transfer& t = transfers_[id];
  t.src = src;
  t.dst = chosen;
  // Waiting longer than computing it here would take is worse than computing it.
  absl::Duration wait = options_.kv_transfer_max_wait;
  if (per_token > 0) {
    wait = std::min(wait,
                    absl::Seconds(ClusterOptions::kWaitPrefills * gain * block_size * per_token));
  }
  t.give_up_at = absl::Now() + wait;
  HoldOrder hold;
  hold.transfer_id = id;
  hold.tokens.assign(request.prompt_ids.begin(),
                     request.prompt_ids.begin() + (deepest + 1) * block_size);
  hold.block_hashes.assign(request.prompt_block_hashes.begin(),
                           request.prompt_block_hashes.begin() + deepest + 1);
  // Later requests with this prefix ask the worker that has it, not the one still waiting.
  placement_.Remember(hold.block_hashes, src, chosen);
  t.block_hashes = hold.block_hashes;
  t.work = std::move(*work);
  VLOG(1) << "request " << t.work->request_id << " on worker " << chosen << " asks worker " << src
          << " for " << deepest + 1 << " blocks";
  workers_[src]->loop->Hold(std::move(hold));
  return true;
}

void Cluster::QueuePullLocked(QueuedRequest work, int src, int dst, std::vector<int> src_blocks,
                              std::span<const int> tokens, int num_tokens,
                              std::vector<QueuedRequest> followers) {
  const int block_size = workers_[dst]->loop->info().block_size;
  const int64_t id = next_transfer_id_++;
  PullPlan plan;
  plan.transfer_id = id;
  plan.peer_address = workers_[src]->loop->info().kv_transfer_address;
  const int num_full = num_tokens / block_size;
  plan.tokens.assign(tokens.begin(), tokens.begin() + num_full * block_size);
  plan.block_hashes = BlockHashes(plan.tokens, block_size);
  plan.tail_tokens = num_tokens % block_size;
  plan.src_blocks = src_blocks;
  Transfer& t = transfers_[id];
  t.src = src;
  t.dst = dst;
  t.src_blocks = std::move(src_blocks);
  t.block_hashes = plan.block_hashes;
  t.followers = std::move(followers);
  auto it = requests_.find(work.request_id);
  if (it != requests_.end()) {
    for (int i = 0; i < work.request.n; ++i)
      it->second->worker[work.request.first_seq_index + i] = dst;
  }
  work.pull = std::move(plan);
  workers_[dst]->loop->Add(std::move(work));
}

void Cluster::OnTransfers(int worker_id, const TransferEvents& events) {
  TimedMutexLock lock(&mu_, &loop_waits_);
  Worker* w = workers_[worker_id].get();
  for (const TransferEvents::Held& held : events.held) {
    auto it = transfers_.find(held.transfer_id);
    if (it == transfers_.end() || !it->second.work.has_value() || !w->alive) {
      if (w->alive) w->loop->Release(held.blocks);  // its request ended meanwhile
      if (it != transfers_.end()) transfers_.erase(it);
      continue;
    }
    QueuedRequest work = std::move(*it->second.work);
    std::vector<QueuedRequest> followers = std::move(it->second.followers);
    const std::vector<uint64_t> hashes = std::move(it->second.block_hashes);
    const int dst = it->second.dst;
    transfers_.erase(it);
    if (held.blocks.empty() || !CanTransferLocked(worker_id, dst)) {
      if (!held.blocks.empty()) w->loop->Release(held.blocks);
      if (workers_[dst]->alive) placement_.Remember(hashes, dst);  // it computes them
      QueueLocked(std::move(work), dst);
      for (QueuedRequest& f : followers) QueueLocked(std::move(f), dst);
      continue;
    }
    const int block_size = w->loop->info().block_size;
    const int num_tokens = static_cast<int>(held.blocks.size()) * block_size;
    const std::vector<int> prompt = work.request.prompt_ids;
    QueuePullLocked(std::move(work), worker_id, dst, held.blocks, prompt, num_tokens,
                    std::move(followers));
  }
  std::vector<std::pair<QueuedRequest, int>> followers;
  for (const TransferEvents::Pulled& pulled : events.pulled) {
    auto it = transfers_.find(pulled.transfer_id);
    if (it == transfers_.end()) continue;  // a side left: it was ended then
    Transfer& t = it->second;
    for (QueuedRequest& f : t.followers) followers.emplace_back(std::move(f), t.dst);
    if (workers_[t.src]->alive) workers_[t.src]->loop->Release(t.src_blocks);
    if (!pulled.started) {
      VLOG(1) << "transfer " << pulled.transfer_id << " into worker " << t.dst
              << " did not start: " << (pulled.ok ? "its blocks are there" : pulled.error);
    }
    if (pulled.ok) placement_.Remember(t.block_hashes, t.dst);  // it has them now
    if (pulled.started) {
      transfer_cost_.ObservePull(pulled.bytes, pulled.seconds);
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
  // blocks cached. Queued once no iterator into transfers_ is left (placing may add one).
  for (auto& [work, dst] : followers) QueueLocked(std::move(work), dst);
}

void Cluster::OnDetached(int worker_id, std::vector<Scheduler::Detached> detached) {
  TimedMutexLock lock(&mu_, &loop_waits_);
  Worker* w = workers_[worker_id].get();
  const int block_size = w->loop->info().block_size;
  absl::flat_hash_map<int, int64_t> taken;  // blocks the moves below need, by destination
  for (Scheduler::Detached& d : detached) {
    auto it = requests_.find(d.request_id);
    Request* r = it == requests_.end() ? nullptr : it->second.get();
    const bool ours = r != nullptr && d.seq_index < static_cast<int>(r->worker.size()) &&
                      r->worker[d.seq_index] == worker_id && !r->finished[d.seq_index];
    if (!w->alive) continue;  // gone: its sequences were moved as a failed worker's
    if (!ours) {
      w->loop->Release(d.blocks);
      continue;
    }
    QueuedRequest work{.request_id = d.request_id, .request = r->request, .pull = std::nullopt};
    work.request.n = 1;
    work.request.first_seq_index = d.seq_index;
    work.request.output_ids = r->outputs[d.seq_index];
    work.request.front_of_queue = true;
    // What the worker computed is what it delivered (updates come before the detach).
    std::vector<int> tokens = work.request.prompt_ids;
    tokens.insert(tokens.end(), work.request.output_ids.begin(), work.request.output_ids.end());
    // A preempted sequence goes where its tokens and as many again fit (MoveRoomLocked).
    const int64_t need = (static_cast<int64_t>(tokens.size()) + block_size) / block_size;
    std::vector<WorkerLoad> candidates;
    for (const auto& o : workers_) {
      const int id = o->loop->id();
      if (o->draining || !CanTransferLocked(worker_id, id)) continue;
      if (d.preempted && MoveRoomLocked(worker_id, id) - taken[id] < need) continue;
      const WorkerLoop::Load load = o->loop->load();
      candidates.push_back({.worker_id = id,
                            .num_used_blocks = load.num_used_blocks,
                            .num_waiting = load.num_waiting,
                            .can_pull = true});
    }
    const int max_tokens = (kMaxBlocksPerPull - 1) * block_size;
    if (candidates.empty() || tokens != d.tokens || d.num_computed > max_tokens) {
      w->loop->Release(d.blocks);
      if (d.preempted) {
        QueueLocked(std::move(work), worker_id);  // waits here again, from its cached blocks
      } else {
        r->worker[d.seq_index] = -1;
        PlaceLocked(std::move(work));  // without its K/V
      }
      continue;
    }
    GenerationRequest& request = work.request;
    if (request.prompt_block_size != block_size) {
      request.prompt_block_hashes = BlockHashes(request.prompt_ids, block_size);
      request.prompt_block_size = block_size;
    }
    const int dst = placement_.Choose(candidates, request.prompt_block_hashes);
    taken[dst] += need;
    LOG(INFO) << "moving " << (d.preempted ? "preempted " : "") << "request " << d.request_id << "/"
              << d.seq_index << " from worker " << worker_id << " to " << dst << " with "
              << d.num_computed << " tokens of K/V";
    if (d.blocks.empty()) {  // none left cached: it computes them there, not waits here
      QueueLocked(std::move(work), dst);
      continue;
    }
    if (options_.metrics != nullptr) options_.metrics->kv_migrated_sequences->Add();
    QueuePullLocked(std::move(work), worker_id, dst, std::move(d.blocks), tokens, d.num_computed);
  }
}

int64_t Cluster::MoveRoomLocked(int src, int dst) const {
  const Worker& o = *workers_[dst];
  if (o.draining || !CanTransferLocked(src, dst)) return 0;
  const WorkerLoop::Load load = o.loop->load();
  if (load.num_waiting > 0) return 0;
  return (o.loop->info().num_blocks - load.num_used_blocks) / 2;
}

void Cluster::MovePreemptedLocked(int worker_id) {
  Worker* w = workers_[worker_id].get();
  if (!w->alive || w->draining || w->loop->load().num_preempted == 0) return;
  int64_t room = 0;
  for (const auto& o : workers_) room = std::max(room, MoveRoomLocked(worker_id, o->loop->id()));
  // At most half a worker's pool (an int).
  if (room > 0) w->loop->DetachPreempted(static_cast<int>(room));
}

int Cluster::NumWaitingInTransfersLocked(int dst) const {
  int n = 0;
  for (const auto& [id, t] : transfers_) {
    // A pulling request waits in its destination's engine, outside its scheduler's count.
    if (dst < 0 || t.dst == dst) n += 1 + static_cast<int>(t.followers.size());
  }
  return n;
}

void Cluster::QueueLocked(QueuedRequest work, int dst) {
  if (!workers_[dst]->alive) {
    PlaceLocked(std::move(work));
    return;
  }
  auto r = requests_.find(work.request_id);
  if (r != requests_.end()) {
    for (int i = 0; i < work.request.n; ++i) {
      r->second->worker[work.request.first_seq_index + i] = dst;
    }
  }
  workers_[dst]->loop->Add(std::move(work));
}

void Cluster::GiveUpWaitingLocked(absl::Time now) {
  std::vector<std::pair<QueuedRequest, int>> give_up;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& t = it->second;
    if (!t.work.has_value() || t.give_up_at > now) {
      ++it;
      continue;
    }
    // The holder answers later and finds no transfer: it releases what it held.
    LOG(INFO) << "request " << t.work->request_id << " waited too long for worker " << t.src
              << "'s prefix; computing it on worker " << t.dst;
    placement_.Remember(t.block_hashes, t.dst);  // it computes them
    give_up.emplace_back(std::move(*t.work), t.dst);
    for (QueuedRequest& f : t.followers) give_up.emplace_back(std::move(f), t.dst);
    transfers_.erase(it++);
  }
  for (auto& [work, dst] : give_up) QueueLocked(std::move(work), dst);
}

void Cluster::EndTransfersOfLocked(int worker_id) {
  std::vector<QueuedRequest> replace;
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    Transfer& t = it->second;
    if (t.src != worker_id && t.dst != worker_id) {
      ++it;
      continue;
    }
    if (!t.work.has_value() && t.dst != worker_id) {
      // Pulling from the dead worker: the pull fails, its request computes the blocks, and
      // the destination still reports it (OnTransfers counts the failure).
      ++it;
      continue;
    }
    if (t.work.has_value()) {
      // Holding. A dead source never answers: place the request now. A live one answers
      // OnTransfers, which finds no transfer and releases.
      replace.push_back(std::move(*t.work));
    } else if (workers_[t.src]->alive) {
      // Pulling into the dead worker: its request moves with the rest of its sequences.
      workers_[t.src]->loop->Release(t.src_blocks);
    }
    for (QueuedRequest& f : t.followers) replace.push_back(std::move(f));
    transfers_.erase(it++);
  }
  for (QueuedRequest& work : replace) PlaceLocked(std::move(work));
}

}  // namespace pagoda
