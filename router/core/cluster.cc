#include "router/core/cluster.h"

#include <algorithm>
#include <random>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "router/core/block_pool.h"
#include "router/core/model_length.h"

namespace pagoda {

namespace {

// The engines of one model share the suffix index of their outputs (--speculative=suffix) and
// the prefix cache's key, a random one unless given.
ClusterOptions WithSharedState(ClusterOptions options) {
  SpeculativeOptions& spec = options.engine.speculative;
  if (spec.method == SpeculativeMethod::kSuffix && spec.suffix_index == nullptr) {
    spec.suffix_index = MakeSuffixIndex();
  }
  std::random_device random;
  while (options.engine.prefix_cache_key == 0) {
    options.engine.prefix_cache_key = uint64_t{random()} << 32 | random();
  }
  return options;
}

}  // namespace

Cluster::Cluster(const ModelConfig& config, const ClusterOptions& options)
    : config_(config),
      options_(WithSharedState(options)),
      placement_(
          PlacementOptions{.policy = options.placement, .prefix_weight = options.prefix_weight}),
      planner_(config,
               TransferPlannerOptions{.enabled = options.kv_transfer,
                                      .min_tokens = options.kv_transfer_min_tokens,
                                      .max_wait = options.kv_transfer_max_wait,
                                      .metrics = options.metrics},
               &placement_) {}

Cluster::~Cluster() {
  std::vector<WorkerLoop*> loops;
  {
    absl::MutexLock place(&place_mu_);
    absl::MutexLock lock(&mu_);
    loops = workers_.Loops();
    for (WorkerLoop* loop : loops) {
      workers_[loop->id()].alive = false;
      reporting_[loop->id()] = nullptr;  // delivers nothing more
      loop->Stop();
    }
  }
  // Outside the locks: a loop may be reporting a last step, which takes them.
  for (WorkerLoop* loop : loops) loop->Join();
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
  // What its pool still holds (a previous router's cache), checked before anything is sized.
  const std::vector<CachedBlock> cached = executor->TakeCachedBlocks();
  RETURN_IF_ERROR(ValidateCachedBlocks(cached, info, config_.vocab_size));
  absl::MutexLock place(&place_mu_);
  workers_.Reap();
  RETURN_IF_ERROR(
      CheckRoomFor(info, workers_.NumLive(), workers_.NumLiveBlocks(), options_.worker_limits));
  const int id = workers_.next_id();
  RETURN_IF_ERROR(loras_.AddWorker(id, info.adapters));
  auto loop = std::make_unique<WorkerLoop>(id, std::move(executor), config_, options_.engine,
                                           options_.metrics, static_cast<WorkerLoopListener*>(this),
                                           cached);
  // Placement sends prompts with these prefixes to it, as the last router did.
  placement_.Remember(loop->TakeAdoptedHashes(), id);
  {
    absl::MutexLock lock(&mu_);
    reporting_.push_back(loop.get());  // before it has work: it reports nothing until then
  }
  loras_.CatchUp(id, loop.get(), info.adapters);
  workers_.Add(std::move(loop));
  LOG(INFO) << "worker " << id << " joined: " << info.num_blocks << " blocks of " << info.block_size
            << " tokens = " << int64_t{info.num_blocks} * info.block_size << " tokens of "
            << (info.kv_cache_dtype.empty() ? "?" : info.kv_cache_dtype) << " KV, " << cached.size()
            << " blocks of them cached from before";
  if (const std::string short_by =
          KvPoolShortfall(max_model_len(), info.num_blocks, info.block_size, info.kv_cache_dtype);
      !short_by.empty()) {
    LOG(WARNING) << "worker " << id << ": " << short_by;
  }
  // Requests that waited for a worker go to the newcomer.
  std::deque<QueuedRequest> parked;
  parked.swap(parked_);
  for (QueuedRequest& work : parked) PlaceLocked(std::move(work));
  return id;
}

void Cluster::RemoveWorker(int worker_id) {
  absl::MutexLock place(&place_mu_);
  if (!workers_.contains(worker_id)) return;
  WorkerSet::Worker* w = &workers_[worker_id];
  if (!w->alive) return;
  LOG(WARNING) << "worker " << worker_id << " is gone";
  RemoveLocked(w);
}

void Cluster::DrainWorker(int worker_id, std::function<void()> on_drained) {
  absl::MutexLock place(&place_mu_);
  if (!workers_.contains(worker_id)) return;
  WorkerSet::Worker* w = &workers_[worker_id];
  if (!w->alive || w->draining) return;
  w->draining = true;
  const bool others = workers_.AnyAccepting();
  int held;  // sequences placed on it and not finished
  {
    absl::MutexLock lock(&mu_);
    held = requests_.NumHeldBy(worker_id);
  }
  LOG(INFO) << "worker " << worker_id << " is draining with " << held << " sequences"
            << (others ? "; those not started yet move elsewhere" : "");
  // Before Drain: the loop must not count the requests that move as its own.
  if (others) {
    for (QueuedRequest& work : w->loop->TakeQueued()) PlaceLocked(std::move(work));
  }
  // Its running sequences move with their K/V where a worker can take it (OnDetached).
  bool movable = false;
  const TransferSnapshot s = SnapshotLocked();
  for (const WorkerView& o : s.workers)
    movable |= !o.draining && TransferPlanner::CanTransfer(s, worker_id, o.id);
  if (options_.kv_transfer && movable) w->loop->Detach();
  w->loop->Drain(std::move(on_drained));
}

int Cluster::NumWaitingLocked() const {
  int waiting = static_cast<int>(parked_.size());
  return waiting + planner_.NumWaiting(/*dst=*/-1) + workers_.NumWaiting();
}

absl::StatusOr<int64_t> Cluster::Submit(const GenerationRequest& request, RequestSink sink,
                                        absl::Time give_up_at) {
  // The O(1) part of Validate: what sizes the router's own state and keeps the loops finite.
  RETURN_IF_ERROR(ValidateRequestLimits(request, max_model_len(), options_.engine.max_n));
  GenerationRequest salted = request;
  salted.prefix_root =
      PrefixRoot(options_.engine.prefix_cache_key, request.cache_salt, request.adapter);
  absl::MutexLock place(&place_mu_);
  workers_.Reap();
  if (const int waiting = NumWaitingLocked(); waiting >= options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the router has ", waiting, " requests waiting; try again later"));
  }
  int64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = requests_.Add(salted, std::move(sink), give_up_at);
  }
  PlaceLocked({.request_id = id, .request = std::move(salted), .pull = std::nullopt});
  return id;
}

void Cluster::Abort(int64_t request_id) {
  absl::MutexLock place(&place_mu_);
  EndLocked(request_id, absl::OkStatus());
}

void Cluster::EndLocked(int64_t request_id, const absl::Status& error) {
  {
    absl::MutexLock lock(&mu_);
    const std::optional<std::vector<int>> workers = requests_.End(request_id, error);
    if (!workers.has_value()) return;
    for (int worker : *workers) {
      if (worker >= 0) workers_[worker].loop->Abort(request_id);
    }
  }
  std::erase_if(parked_, [&](const QueuedRequest& work) { return work.request_id == request_id; });
  ApplyLocked(planner_.EndRequest(request_id));
}

void Cluster::ChangeAdapter(const AdapterChange& change, std::function<void(absl::Status)> done) {
  // Posted under place_mu_: a loop alive now answers every order, also if it ends first.
  absl::MutexLock place(&place_mu_);
  if (change.path.empty()) {
    // A sequence of it not yet on its worker (waiting, preempted, moving) would name an adapter
    // the worker no longer holds, and the worker would refuse the whole step: an adapter in use
    // stays. Once the check passes no request can name it (Forget), so none starts.
    int in_use;
    {
      absl::MutexLock lock(&mu_);
      in_use = requests_.NumUsing(change.name);
    }
    if (in_use > 0) {
      done(absl::FailedPreconditionError(
          absl::StrCat("the LoRA adapter `", change.name, "` has ", in_use,
                       " requests in flight: unload it once they end")));
      return;
    }
    loras_.Forget(change.name);
  }
  loras_.Change(change, workers_.Live(), std::move(done));
}

void Cluster::Resume(int64_t request_id) {
  absl::MutexLock lock(&mu_);
  for (int worker : requests_.WorkersOf(request_id)) {
    if (worker >= 0 && reporting_[worker] != nullptr) reporting_[worker]->Resume();
  }
}

void Cluster::Tick(absl::Time now) {
  absl::MutexLock place(&place_mu_);
  std::vector<int64_t> expired;
  PauseReview paused;
  {
    absl::MutexLock lock(&mu_);
    std::vector<int64_t> parked;
    for (const QueuedRequest& work : parked_) parked.push_back(work.request_id);
    expired = requests_.Expired(parked, now);
    paused = requests_.ReviewPaused(now, options_.stall_timeout, options_.paused_caps, expired);
    num_paused_ = paused.num_paused;
  }
  for (int64_t id : expired) {
    EndLocked(id, absl::UnavailableError("no worker became available before the deadline"));
  }
  ReportPauseReview(paused, options_.metrics);
  for (const auto& [id, status] : paused.end) EndLocked(id, status);
  ApplyLocked(planner_.GiveUpWaiting(now));
  absl::MutexLock lock(&mu_);
  std::erase_if(parked_, [&](const QueuedRequest& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !requests_.contains(work.request_id);
  });
}

void Cluster::PlaceLocked(QueuedRequest work) {
  const TransferSnapshot s = SnapshotLocked();
  // Only workers holding its LoRA adapter, if it names one.
  const std::string& adapter = work.request.adapter;
  std::vector<WorkerLoad> candidates = planner_.Candidates(
      s, [&](const WorkerView& w) { return w.alive && !w.draining && loras_.Holds(w.id, adapter); },
      /*count_transfers=*/true);
  if (candidates.empty() && work.request.front_of_queue) {
    candidates = planner_.Candidates(
        s, [&](const WorkerView& w) { return w.alive && loras_.Holds(w.id, adapter); },
        /*count_transfers=*/true);
  }
  if (candidates.empty()) {
    parked_.push_back(std::move(work));
    return;
  }
  // Hashed once here, for placement, then reused by the chosen worker's scheduler.
  GenerationRequest& request = work.request;
  HashPrompt(&request, s.workers[candidates.front().worker_id].info->block_size);
  const std::vector<Placement::OwnerList> owners =
      options_.kv_transfer && !work.pull.has_value()
          ? placement_.Owners(request.prompt_block_hashes)
          : std::vector<Placement::OwnerList>();
  const int chosen = placement_.Choose(candidates, request.prompt_block_hashes);
  TransferActions pull;
  if (planner_.StartPull(s, chosen, owners, &work, &pull)) {
    ApplyLocked(std::move(pull));
    return;
  }
  QueueLocked(std::move(work), chosen);
}

void Cluster::RemoveLocked(WorkerSet::Worker* w) {
  const int worker_id = w->loop->id();
  {
    absl::MutexLock lock(&mu_);
    reporting_[worker_id] = nullptr;  // its reports are no longer delivered
  }
  w->alive = false;
  w->loop->Stop();
  placement_.ForgetWorker(worker_id);
  loras_.RemoveWorker(worker_id);
  ApplyLocked(planner_.EndTransfersOf(SnapshotLocked(), worker_id));
  std::deque<QueuedRequest> queued = w->loop->TakeQueued();
  std::vector<QueuedRequest> resumed;
  {
    absl::MutexLock lock(&mu_);
    // Those still in its inbox never started there: placed again below as they were.
    resumed = requests_.TakeSequencesOn(worker_id, [&queued](int64_t id) {
      return absl::c_any_of(queued,
                            [id](const QueuedRequest& work) { return work.request_id == id; });
    });
  }
  if (!resumed.empty()) LOG(WARNING) << "moving the sequences of worker " << worker_id;
  for (QueuedRequest& work : resumed) PlaceLocked(std::move(work));
  for (QueuedRequest& work : queued) PlaceLocked(std::move(work));
}

void Cluster::OnFailed(int worker_id) {
  TimedMutexLock place(&place_mu_, &loop_waits_);
  WorkerSet::Worker* w = &workers_[worker_id];
  if (w->alive) RemoveLocked(w);
}

void Cluster::OnRefused(int worker_id, int64_t request_id) {
  TimedMutexLock lock(&mu_, &loop_waits_);
  if (reporting_[worker_id] == nullptr) return;  // its requests moved; another worker has it
  requests_.Refuse(request_id);
}

void Cluster::OnUpdates(int worker_id, const std::vector<SequenceUpdate>& updates) {
  WorkerLoop* loop;
  std::vector<RequestTable::Recorded> recorded;
  {
    TimedMutexLock lock(&mu_, &loop_waits_);
    loop = reporting_[worker_id];
    if (loop == nullptr) return;  // its requests moved; their new worker reports from here on
    recorded.reserve(updates.size());
    for (const SequenceUpdate& u : updates) {
      RequestTable::Recorded r = requests_.Record(worker_id, u);
      if (r.sink != nullptr) recorded.push_back(std::move(r));
    }
  }
  // The sinks after mu_ (issue 38: they are the whole output path, and every loop takes mu_
  // after every step); each request's updates still reach its sink in the order recorded.
  std::vector<const RequestTable::Recorded*> stopped;
  for (const RequestTable::Recorded& r : recorded) {
    if (!r.sink->Deliver(r.ticket, r.update) && !r.update.finished) stopped.push_back(&r);
  }
  if (!stopped.empty()) {
    TimedMutexLock lock(&mu_, &loop_waits_);
    for (const RequestTable::Recorded* r : stopped) {
      const int seq = r->update.seq_index;
      const std::optional<int> worker = requests_.StopSequence(r->request_id, seq);
      if (worker && *worker >= 0 && reporting_[*worker] != nullptr) {
        reporting_[*worker]->Abort(r->request_id, seq);  // taken after its step
      }
    }
  }
  // Planned under place_mu_, only when the worker has sequences preempted for want of blocks.
  if (options_.kv_transfer && loop->load().num_preempted > 0) {
    TimedMutexLock place(&place_mu_, &loop_waits_);
    MovePreemptedLocked(worker_id);
  }
}

TransferSnapshot Cluster::SnapshotLocked() const { return workers_.Snapshot(&loras_); }

void Cluster::ApplyLocked(TransferActions actions) {
  for (TransferAction& a : actions) {
    switch (a.kind) {
      case TransferAction::Kind::kHold:
        workers_[a.worker].loop->Hold(std::move(a.hold));
        break;
      case TransferAction::Kind::kQueue:
        QueueLocked(std::move(*a.work), a.worker);
        break;
      case TransferAction::Kind::kRelease:
        workers_[a.worker].loop->Release(std::move(a.blocks));
        break;
      case TransferAction::Kind::kPlace:
        if (a.unassign) AssignLocked(*a.work, -1);
        PlaceLocked(std::move(*a.work));
        break;
    }
  }
}

void Cluster::AssignLocked(const QueuedRequest& work, int worker_id) {
  absl::MutexLock lock(&mu_);
  requests_.Assign(work, worker_id);
}

void Cluster::QueueLocked(QueuedRequest work, int dst) {
  if (!workers_[dst].alive) {
    PlaceLocked(std::move(work));
    return;
  }
  AssignLocked(work, dst);
  workers_[dst].loop->Add(std::move(work));
}

void Cluster::MovePreemptedLocked(int worker_id) {
  // The cheap test first: a snapshot reads every worker's load.
  const WorkerSet::Worker& w = workers_[worker_id];
  if (!w.alive || w.draining || w.loop->load().num_preempted == 0) return;
  const int room = planner_.PreemptedRoom(SnapshotLocked(), worker_id);
  if (room > 0) w.loop->DetachPreempted(room);
}

void Cluster::OnTransfers(int worker_id, const TransferEvents& events) {
  TimedMutexLock place(&place_mu_, &loop_waits_);
  ApplyLocked(planner_.OnEvents(SnapshotLocked(), worker_id, events));
}

void Cluster::OnDetached(int worker_id, std::vector<Scheduler::Detached> detached) {
  TimedMutexLock place(&place_mu_, &loop_waits_);
  absl::flat_hash_map<int, int64_t> taken;  // blocks the moves need, by destination
  for (Scheduler::Detached& d : detached) {
    std::optional<QueuedRequest> work;
    {
      absl::MutexLock lock(&mu_);
      work = requests_.ResumeIfOn(d.request_id, d.seq_index, worker_id);
    }
    // Each move sees the ones before it (their requests wait at their destinations now).
    ApplyLocked(
        planner_.OnDetached(SnapshotLocked(), worker_id, std::move(d), std::move(work), &taken));
  }
}

std::vector<WorkerStats> Cluster::worker_stats() const {
  absl::MutexLock place(&place_mu_);
  return workers_.Stats();
}

ClusterStats Cluster::stats() const {
  absl::MutexLock place(&place_mu_);
  absl::MutexLock lock(&mu_);
  ClusterStats s;
  s.num_loop_reports = loop_waits_.num_locks.load();
  s.num_loop_lock_waits = loop_waits_.num_waits.load();
  s.loop_lock_wait_seconds = static_cast<double>(loop_waits_.wait_ns.load()) * 1e-9;
  s.num_waiting = static_cast<int>(parked_.size());
  s.num_paused = num_paused_;
  workers_.AddTo(&s);
  return s;
}

}  // namespace pagoda
