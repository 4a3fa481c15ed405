#include "router/cluster.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "router/block_pool.h"

namespace pagoda {

struct Cluster::Worker {
  int id = 0;
  std::shared_ptr<Executor> executor;
  std::unique_ptr<Engine> engine;  // only the loop thread touches it after construction
  std::thread thread;
  // Guarded by Cluster::mu_.
  std::deque<Work> inbox;
  struct Abort {
    int64_t request_id;
    int seq_index;  // -1: every sequence of the request
  };
  std::vector<Abort> aborts;
  bool alive = true;
  bool resumed = false;    // a paused request it holds may run again
  bool loop_done = false;  // its loop has exited and left nothing behind: the thread can be joined
  bool draining = false;
  std::function<void()> on_drained;  // taken by the loop when the drained worker is idle
  absl::CondVar wake;
  // Loop thread only: engine request id <-> router request id.
  struct EngineRequest {
    int64_t request_id;
    int num_unfinished;  // its sequences still running
  };
  absl::flat_hash_map<int64_t, EngineRequest> to_request;
  absl::flat_hash_map<int64_t, std::vector<int64_t>> to_engine;
  // Published by the loop after each step, read by placement and stats.
  std::atomic<int64_t> num_used_blocks{0}, num_slots_used{0}, num_slots_reserved{0};
  // Scheduler counters already added to the metrics (loop thread only).
  int64_t reported_preemptions = 0, reported_queries = 0, reported_hits = 0;
  Histogram* step_seconds = nullptr;  // per-worker metric, when metrics are on
  std::atomic<int> num_running{0}, num_waiting{0};
  std::atomic<int64_t> num_steps{0}, step_micros{0}, forward_micros{0};
};

struct Cluster::Request {
  GenerationRequest request;
  RequestSink sink;
  std::vector<std::vector<int>> outputs;  // (n) tokens delivered so far
  std::vector<bool> finished;             // (n)
  std::vector<int> worker;                // (n) where each sequence runs, -1 while parked
  int num_unfinished = 0;
  absl::Time give_up_at;  // while parked, UNAVAILABLE after this
};

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
  // Only logged, but it comes off the wire: short and plain.
  if (info.kv_cache_dtype.size() > 16 ||
      !std::all_of(info.kv_cache_dtype.begin(), info.kv_cache_dtype.end(),
                   [](char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); })) {
    return absl::InvalidArgumentError(
        "Hello.kv_cache_dtype: at most 16 letters and digits, like \"bf16\"");
  }
  return absl::OkStatus();
}

Cluster::Cluster(const ModelConfig& config, const ClusterOptions& options)
    : config_(config), options_(options) {}

Cluster::~Cluster() {
  std::vector<Worker*> workers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& w : workers_) {
      w->alive = false;
      w->wake.Signal();
      workers.push_back(w.get());
    }
  }
  for (Worker* w : workers) {
    if (w->thread.joinable()) w->thread.join();
  }
}

int Cluster::max_model_len() const {
  const int limit = options_.engine.max_model_len;
  return limit > 0 ? std::min(limit, config_.max_seq_len) : config_.max_seq_len;
}

absl::Status Cluster::Validate(const GenerationRequest& request) const {
  return ValidateRequest(request, config_, max_model_len(), options_.engine.max_n);
}

absl::StatusOr<int> Cluster::AddWorker(std::shared_ptr<Executor> executor) {
  const WorkerInfo& info = executor->info();
  RETURN_IF_ERROR(ValidateWorkerInfo(info, options_.worker_limits));
  if (info.model_fingerprint != config_.Fingerprint()) {
    // Only the router's log shows both: a refused peer learns nothing about the model.
    LOG(WARNING) << "worker model " << info.model_fingerprint << " differs from the router's "
                 << config_.Fingerprint();
    return absl::InvalidArgumentError("the worker serves a different model than the router");
  }
  absl::MutexLock lock(&mu_);
  ReapLocked();
  const int live = static_cast<int>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& o) { return o->alive; }));
  if (live >= options_.worker_limits.max_workers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the router has ", live, " workers, its limit"));
  }
  auto w = std::make_unique<Worker>();
  w->id = static_cast<int>(workers_.size());
  w->executor = std::move(executor);
  w->engine = std::make_unique<Engine>(config_, w->executor.get(), options_.engine);
  // Exact counts while a step runs: admission has just moved sequences from waiting to running.
  w->engine->set_after_schedule([raw = w.get()] {
    raw->num_running = raw->engine->scheduler().num_running();
    raw->num_waiting = raw->engine->scheduler().num_waiting();
  });
  if (options_.metrics) {
    w->step_seconds = options_.metrics->registry->AddHistogram(
        "pagoda_worker_step_seconds", "A worker's step: schedule, forward pass and round trip.",
        LatencyBuckets(), {{"worker", std::to_string(w->id)}});
  }
  Worker* raw = w.get();
  workers_.push_back(std::move(w));
  raw->thread = std::thread([this, raw] { Loop(raw); });
  LOG(INFO) << "worker " << raw->id << " joined: " << info.num_blocks << " blocks of "
            << info.block_size << " tokens, "
            << (info.kv_cache_dtype.empty() ? "?" : info.kv_cache_dtype) << " KV";
  // Requests that waited for a worker go to the newcomer.
  std::deque<Work> parked;
  parked.swap(parked_);
  for (Work& work : parked) PlaceLocked(std::move(work));
  return raw->id;
}

void Cluster::ReapLocked() {
  for (auto& w : workers_) {
    if (!w->loop_done || !w->thread.joinable()) continue;
    w->thread.join();  // the loop has exited: this returns at once
    w->executor.reset();
  }
}

void Cluster::RemoveWorker(int worker_id) {
  absl::MutexLock lock(&mu_);
  if (worker_id < 0 || worker_id >= static_cast<int>(workers_.size())) return;
  Worker* w = workers_[worker_id].get();
  if (!w->alive) return;
  LOG(WARNING) << "worker " << worker_id << " is gone";
  w->alive = false;
  w->wake.Signal();
  ResubmitLocked(w);
}

void Cluster::DrainWorker(int worker_id, std::function<void()> on_drained) {
  absl::MutexLock lock(&mu_);
  if (worker_id < 0 || worker_id >= static_cast<int>(workers_.size())) return;
  Worker* w = workers_[worker_id].get();
  if (!w->alive || w->draining) return;
  w->draining = true;
  w->on_drained = std::move(on_drained);
  const bool others = std::any_of(workers_.begin(), workers_.end(),
                                  [](const auto& o) { return o->alive && !o->draining; });
  int held = 0;  // sequences placed on it and not finished
  for (const auto& [id, r] : requests_) {
    for (size_t i = 0; i < r->worker.size(); ++i) held += r->worker[i] == w->id && !r->finished[i];
  }
  LOG(INFO) << "worker " << worker_id << " is draining with " << held << " sequences"
            << (others ? "; those not started yet move elsewhere" : "");
  if (others) {
    std::deque<Work> queued;
    queued.swap(w->inbox);
    for (Work& work : queued) PlaceLocked(std::move(work));
  }
  w->wake.Signal();
}

absl::StatusOr<int64_t> Cluster::Submit(const GenerationRequest& request, RequestSink sink,
                                        absl::Time give_up_at) {
  const int max_len = max_model_len();
  RETURN_IF_ERROR(ValidateRequest(request, config_, max_len, options_.engine.max_n));
  absl::MutexLock lock(&mu_);
  ReapLocked();
  int waiting = static_cast<int>(parked_.size());
  for (const auto& w : workers_) {
    if (w->alive) waiting += w->num_waiting.load() + static_cast<int>(w->inbox.size());
  }
  if (waiting >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the router has ", waiting, " requests waiting; try again later"));
  }
  const int64_t id = next_request_id_++;
  auto r = std::make_shared<Request>();
  r->request = request;
  r->sink = std::move(sink);
  r->outputs.resize(request.n);
  r->finished.assign(request.n, false);
  r->worker.assign(request.n, -1);
  r->num_unfinished = request.n;
  r->give_up_at = give_up_at;
  requests_[id] = r;
  PlaceLocked({id, request});
  return id;
}

void Cluster::Abort(int64_t request_id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (int worker : it->second->worker) {
    if (worker < 0) continue;
    Worker* w = workers_[worker].get();
    w->aborts.push_back({request_id, -1});
    w->wake.Signal();
  }
  std::erase_if(parked_, [&](const Work& work) { return work.request_id == request_id; });
  requests_.erase(it);
}

void Cluster::Resume(int64_t request_id) {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  for (int worker : it->second->worker) {
    if (worker < 0) continue;
    workers_[worker]->resumed = true;
    workers_[worker]->wake.Signal();
  }
}

void Cluster::Tick(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::erase_if(parked_, [&](const Work& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = requests_.find(work.request_id);
    if (it == requests_.end()) return true;
    if (it->second->give_up_at > now) return false;
    RequestUpdate out;
    out.error = absl::UnavailableError("no worker became available before the deadline");
    out.finished = true;
    it->second->sink(out);
    requests_.erase(it);
    return true;
  });
}

void Cluster::PlaceLocked(Work work) {
  std::vector<Worker*> live;
  for (auto& w : workers_) {
    if (w->alive && !w->draining) live.push_back(w.get());
  }
  if (live.empty() && work.request.front_of_queue) {
    for (auto& w : workers_) {
      if (w->alive) live.push_back(w.get());
    }
  }
  if (live.empty()) {
    parked_.push_back(std::move(work));
    return;
  }
  const int block_size = live.front()->executor->info().block_size;
  const std::vector<int>& prompt = work.request.prompt_ids;
  std::vector<uint64_t> hashes;
  for (size_t i = 0; (i + 1) * block_size <= prompt.size(); ++i) {
    hashes.push_back(HashBlock(hashes.empty() ? 0 : hashes.back(),
                               std::span<const int>(prompt).subspan(i * block_size, block_size)));
  }
  Worker* best = live.front();
  if (options_.placement == PlacementPolicy::kRoundRobin) {
    best = live[next_round_robin_++ % live.size()];
  } else {
    double best_cost = 0;
    for (size_t k = 0; k < live.size(); ++k) {
      Worker* w = live[k];
      size_t hit = 0;
      if (options_.placement == PlacementPolicy::kPrefixAware) {
        while (hit < hashes.size()) {
          auto owner = block_owner_.find(hashes[hit]);
          if (owner == block_owner_.end() || owner->second != w->id) break;
          ++hit;
        }
      }
      // Active blocks, plus a rough share for requests queued there but not yet admitted.
      const double load =
          w->num_used_blocks.load() +
          (w->num_waiting.load() + static_cast<double>(w->inbox.size())) * (hashes.size() + 1);
      const double cost = options_.prefix_weight * (hashes.size() - hit) + load;
      if (k == 0 || cost < best_cost) {
        best = w;
        best_cost = cost;
      }
    }
  }
  if (block_owner_.size() > (1 << 20)) block_owner_.clear();  // bounded memory; only a hint
  for (uint64_t h : hashes) block_owner_[h] = best->id;
  auto it = requests_.find(work.request_id);
  if (it != requests_.end()) {
    const int first = work.request.first_seq_index;
    for (int i = 0; i < work.request.n; ++i) it->second->worker[first + i] = best->id;
  }
  best->inbox.push_back(std::move(work));
  best->wake.Signal();
}

void Cluster::ResubmitLocked(Worker* w) {
  std::deque<Work> queued;
  queued.swap(w->inbox);
  w->aborts.clear();
  int moved = 0;
  for (auto& [id, r] : requests_) {
    for (int i = 0; i < static_cast<int>(r->worker.size()); ++i) {
      if (r->worker[i] != w->id || r->finished[i]) continue;
      const bool in_inbox = std::any_of(queued.begin(), queued.end(), [id = id](const Work& work) {
        return work.request_id == id;
      });
      if (in_inbox) continue;  // never started there: placed again below as it was
      if (moved++ == 0) LOG(WARNING) << "moving the sequences of worker " << w->id;
      Work work{id, r->request};
      work.request.n = 1;
      work.request.first_seq_index = i;
      work.request.output_ids = r->outputs[i];
      work.request.front_of_queue = true;
      r->worker[i] = -1;
      PlaceLocked(std::move(work));
    }
  }
  for (Work& work : queued) PlaceLocked(std::move(work));
}

void Cluster::Deliver(Worker* w, const std::vector<SequenceUpdate>& updates) {
  absl::MutexLock lock(&mu_);
  if (!w->alive) return;  // its requests were moved; their new worker reports from here on
  for (const SequenceUpdate& u : updates) {
    auto engine_id = w->to_request.find(u.request_id);
    if (engine_id == w->to_request.end()) continue;
    const int64_t request_id = engine_id->second.request_id;
    auto it = requests_.find(request_id);
    if (it == requests_.end()) continue;  // aborted
    Request& r = *it->second;
    if (u.new_token_ids.empty() && !u.finished) continue;  // a fork was created
    r.outputs[u.seq_index].insert(r.outputs[u.seq_index].end(), u.new_token_ids.begin(),
                                  u.new_token_ids.end());
    RequestUpdate out;
    out.worker_id = w->id;
    out.seq_index = u.seq_index;
    out.token_ids = u.new_token_ids;
    out.samples = u.samples;
    out.finished = u.finished;
    out.finish_reason = u.finish_reason;
    out.num_prompt_tokens = u.num_prompt_tokens;
    out.num_output_tokens = u.num_output_tokens;
    out.num_cached_tokens = u.num_cached_tokens;
    // Under mu_: keeps a request's updates in order across a worker change.
    const bool keep_going = r.sink(out);
    if (!keep_going && !u.finished && !r.finished[u.seq_index]) {
      w->aborts.push_back({request_id, u.seq_index});  // drained right after this step
    }
    if ((u.finished || !keep_going) && !r.finished[u.seq_index]) {
      r.finished[u.seq_index] = true;
      if (--r.num_unfinished == 0) requests_.erase(it);
    }
  }
}

void Cluster::Loop(Worker* w) {
  for (;;) {
    std::deque<Work> adds;
    std::vector<Worker::Abort> aborts;
    const bool busy = w->engine->has_unfinished() || w->engine->scheduler().has_pending_finishes();
    std::function<void()> drained;
    {
      absl::MutexLock lock(&mu_);
      while (!busy && w->alive && w->inbox.empty() && w->aborts.empty() && !w->on_drained &&
             !w->resumed) {
        w->wake.Wait(&mu_);
      }
      w->resumed = false;
      if (!w->alive) break;
      if (!busy && w->inbox.empty() && w->on_drained) {
        drained = std::move(w->on_drained);
        w->on_drained = nullptr;
      }
      adds.swap(w->inbox);
      aborts.swap(w->aborts);
      // Still waiting, now in the scheduler: counted until the step publishes the exact number,
      // so --max-waiting never misses a request between the inbox and the scheduler.
      w->num_waiting += static_cast<int>(adds.size());
    }
    if (drained) {
      LOG(INFO) << "worker " << w->id << " is drained";
      drained();
    }
    for (const Worker::Abort& abort : aborts) {
      auto it = w->to_engine.find(abort.request_id);
      if (it == w->to_engine.end()) continue;
      std::vector<int64_t>& engine_ids = it->second;
      for (size_t k = 0; k < engine_ids.size();) {
        const int64_t engine_id = engine_ids[k];
        if (abort.seq_index < 0) {
          w->engine->AbortRequest(engine_id);
        } else if (!w->engine->AbortSequence(engine_id, abort.seq_index) ||
                   --w->to_request[engine_id].num_unfinished > 0) {
          ++k;
          continue;
        }
        w->to_request.erase(engine_id);
        engine_ids.erase(engine_ids.begin() + k);
      }
      if (engine_ids.empty()) w->to_engine.erase(it);
    }
    for (Work& work : adds) {
      absl::StatusOr<int64_t> engine_id = w->engine->AddRequest(work.request);
      if (!engine_id.ok()) {
        // Validated at Submit; a worker-specific limit (its pool) can still refuse it.
        LOG(WARNING) << "worker " << w->id << " refused request " << work.request_id << ": "
                     << engine_id.status();
        absl::MutexLock lock(&mu_);
        auto it = requests_.find(work.request_id);
        if (it != requests_.end()) {
          RequestUpdate out;
          out.finished = true;
          out.finish_reason = FinishReason::kAbort;
          it->second->sink(out);
          requests_.erase(it);
        }
        continue;
      }
      w->to_request[*engine_id] = {work.request_id, work.request.n};
      w->to_engine[work.request_id].push_back(*engine_id);
    }
    const absl::Time step_start = absl::Now();
    absl::StatusOr<std::vector<SequenceUpdate>> updates = w->engine->Step();
    if (!updates.ok()) {
      LOG(WARNING) << "worker " << w->id << " failed a step: " << updates.status();
      absl::MutexLock lock(&mu_);
      if (w->alive) {
        w->alive = false;
        ResubmitLocked(w);
      }
      break;
    }
    // Publish the load before the sinks hear of it, so a client reacting to a finish sees
    // this worker's blocks already freed.
    if (w->engine->last_forward_seconds() > 0) {
      ++w->num_steps;
      w->step_micros += absl::ToInt64Microseconds(absl::Now() - step_start);
      w->forward_micros += static_cast<int64_t>(w->engine->last_forward_seconds() * 1e6);
    }
    const Scheduler& s = w->engine->scheduler();
    if (RouterMetrics* m = options_.metrics) {
      if (w->engine->last_forward_seconds() > 0) {
        w->step_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - step_start));
      }
      m->preemptions->Add(static_cast<double>(s.num_preemptions() - w->reported_preemptions));
      m->prefix_cache_queries->Add(
          static_cast<double>(s.kv().num_prefix_query_tokens() - w->reported_queries));
      m->prefix_cache_hits->Add(
          static_cast<double>(s.kv().num_prefix_hit_tokens() - w->reported_hits));
      w->reported_preemptions = s.num_preemptions();
      w->reported_queries = s.kv().num_prefix_query_tokens();
      w->reported_hits = s.kv().num_prefix_hit_tokens();
      for (const SequenceUpdate& u : *updates) {
        if (u.queue_seconds >= 0) m->request_queue_time->Observe(u.queue_seconds);
      }
    }
    w->num_used_blocks = s.kv().pool().num_used_blocks();
    const Scheduler::KvSlots slots = s.kv_slots();
    w->num_slots_used = slots.used;
    w->num_slots_reserved = slots.reserved;
    w->num_running = s.num_running();
    w->num_waiting = s.num_waiting();
    Deliver(w, *updates);
    for (const SequenceUpdate& u : *updates) {
      if (!u.finished) continue;
      auto it = w->to_request.find(u.request_id);
      if (it == w->to_request.end() || --it->second.num_unfinished > 0) continue;
      std::erase(w->to_engine[it->second.request_id], u.request_id);
      if (w->to_engine[it->second.request_id].empty()) w->to_engine.erase(it->second.request_id);
      w->to_request.erase(it);
    }
  }
  w->num_used_blocks = 0;
  w->num_slots_used = 0;
  w->num_slots_reserved = 0;
  w->num_running = 0;
  w->num_waiting = 0;
  // A dead worker leaves nothing: its pool and block tables, its placement hints and its
  // metric series go now; AddWorker or Submit joins this thread later.
  w->engine.reset();
  w->to_request.clear();
  w->to_engine.clear();
  if (options_.metrics && w->step_seconds) options_.metrics->registry->Remove(w->step_seconds);
  absl::MutexLock lock(&mu_);
  for (auto it = block_owner_.begin(); it != block_owner_.end();) {
    if (it->second == w->id) {
      block_owner_.erase(it++);
    } else {
      ++it;
    }
  }
  w->step_seconds = nullptr;
  w->loop_done = true;
}

std::vector<WorkerStats> Cluster::worker_stats() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerStats> out;
  for (const auto& w : workers_) {
    if (!w->alive) continue;
    WorkerStats& s = out.emplace_back();
    s.id = w->id;
    s.draining = w->draining;
    s.num_blocks = w->executor->info().num_blocks;
    s.block_size = w->executor->info().block_size;
    s.num_used_blocks = w->num_used_blocks.load();
    s.num_slots_used = w->num_slots_used.load();
    s.num_slots_reserved = w->num_slots_reserved.load();
    s.num_running = w->num_running.load();
    s.num_waiting = w->num_waiting.load() + static_cast<int>(w->inbox.size());
  }
  return out;
}

ClusterStats Cluster::stats() const {
  absl::MutexLock lock(&mu_);
  ClusterStats s;
  s.num_waiting = static_cast<int>(parked_.size());
  for (const auto& w : workers_) {
    // Cumulative counters include workers that left, so deltas between two calls never drop.
    s.num_steps += w->num_steps.load();
    s.step_seconds += w->step_micros.load() * 1e-6;
    s.forward_seconds += w->forward_micros.load() * 1e-6;
    if (!w->alive) continue;
    ++s.num_workers;
    if (w->draining) ++s.num_draining_workers;
    s.block_size = w->executor->info().block_size;
    s.num_blocks += w->executor->info().num_blocks;
    s.num_used_blocks += w->num_used_blocks.load();
    s.num_running += w->num_running.load();
    s.num_waiting += w->num_waiting.load() + static_cast<int>(w->inbox.size());
  }
  return s;
}

}  // namespace pagoda
