#include "router/core/worker_set.h"

#include <utility>

#include "glog/logging.h"

namespace pagoda {

void WorkerSet::Add(std::unique_ptr<WorkerLoop> loop) {
  CHECK_EQ(loop->id(), next_id());
  auto w = std::make_unique<Worker>();
  w->loop = std::move(loop);
  workers_.push_back(std::move(w));
}

void WorkerSet::Reap() {
  for (auto& w : workers_) {
    if (w->alive || w->joined || !w->loop->exited()) continue;
    w->loop->Join();  // the loop has exited: this returns at once
    w->joined = true;
  }
}

int WorkerSet::NumLive() const {
  int live = 0;
  for (const auto& w : workers_) live += w->alive;
  return live;
}

int64_t WorkerSet::NumLiveBlocks() const {
  int64_t blocks = 0;
  for (const auto& w : workers_) blocks += w->alive ? w->loop->info().num_blocks : 0;
  return blocks;
}

bool WorkerSet::AnyAccepting() const {
  for (const auto& w : workers_) {
    if (w->alive && !w->draining) return true;
  }
  return false;
}

int WorkerSet::NumWaiting() const {
  int waiting = 0;
  for (const auto& w : workers_) {
    if (w->alive) waiting += w->loop->load().num_waiting;
  }
  return waiting;
}

std::vector<LoraCatalog::Worker> WorkerSet::Live() const {
  std::vector<LoraCatalog::Worker> live;
  for (const auto& w : workers_) {
    if (w->alive) live.emplace_back(w->loop->id(), w->loop.get());
  }
  return live;
}

std::vector<WorkerLoop*> WorkerSet::Loops() const {
  std::vector<WorkerLoop*> loops;
  for (const auto& w : workers_) loops.push_back(w->loop.get());
  return loops;
}

TransferSnapshot WorkerSet::Snapshot(const LoraCatalog* loras) const {
  TransferSnapshot s;
  s.now = absl::Now();
  s.loras = loras;
  s.workers.reserve(workers_.size());
  for (const auto& w : workers_) {
    WorkerView& v = s.workers.emplace_back();
    v.id = w->loop->id();
    v.alive = w->alive;
    v.draining = w->draining;
    v.info = &w->loop->info();
    if (w->alive) v.load = w->loop->load();
  }
  return s;
}

std::vector<WorkerStats> WorkerSet::Stats() const {
  std::vector<WorkerStats> out;
  for (const auto& w : workers_) {
    if (!w->alive) continue;
    const WorkerInfo& info = w->loop->info();
    out.push_back({.id = w->loop->id(),
                   .draining = w->draining,
                   .num_blocks = info.num_blocks,
                   .block_size = info.block_size,
                   .kv_cache_dtype = info.kv_cache_dtype,
                   .load = w->loop->load(),
                   .max_loras = info.max_loras});
    WorkerLoop::Adapters adapters = w->loop->adapters();
    out.back().running_adapters = std::move(adapters.running);
    out.back().waiting_adapters = std::move(adapters.waiting);
  }
  return out;
}

void WorkerSet::AddTo(ClusterStats* s) const {
  for (const auto& w : workers_) {
    const WorkerLoop::Load load = w->loop->load();
    s->num_steps += load.num_steps;
    s->step_seconds += load.step_seconds;
    s->forward_seconds += load.forward_seconds;
    if (!w->alive) continue;
    ++s->num_workers;
    if (w->draining) ++s->num_draining_workers;
    s->block_size = w->loop->info().block_size;
    s->num_blocks += w->loop->info().num_blocks;
    s->num_used_blocks += load.num_used_blocks;
    s->num_running += load.num_running;
    s->num_waiting += load.num_waiting;
  }
}

}  // namespace pagoda
