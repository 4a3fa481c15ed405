#include "router/worker_loop.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "glog/logging.h"

namespace pagoda {

WorkerLoop::WorkerLoop(int id, std::shared_ptr<Executor> executor, const ModelConfig& config,
                       const EngineOptions& options, RouterMetrics* metrics,
                       WorkerLoopListener* listener)
    : id_(id),
      info_(executor->info()),
      metrics_(metrics),
      listener_(listener),
      executor_(std::move(executor)),
      engine_(std::make_unique<Engine>(config, executor_.get(), options)) {
  // Exact counts while a step runs: admission has just moved sequences from waiting to running.
  engine_->set_after_schedule([this] {
    num_running_ = engine_->scheduler().num_running();
    num_waiting_ = engine_->scheduler().num_waiting() - engine_->scheduler().num_waiting_paused();
  });
  if (metrics_ != nullptr) {
    step_seconds_ = metrics_->registry->AddHistogram(
        "pagoda_worker_step_seconds", "A worker's step: schedule, forward pass and round trip.",
        LatencyBuckets(), {{"worker", std::to_string(id_)}});
  }
  thread_ = std::thread([this] { Run(); });
}

WorkerLoop::~WorkerLoop() {
  Stop();
  Join();
}

void WorkerLoop::Add(QueuedRequest request) {
  absl::MutexLock lock(&mu_);
  inbox_.push_back(std::move(request));
  wake_.Signal();
}

void WorkerLoop::Abort(int64_t request_id, int seq_index) {
  absl::MutexLock lock(&mu_);
  // Not taken into the engine yet: it never starts (the loop adds before it would abort).
  if (seq_index < 0) {
    std::erase_if(inbox_, [&](const QueuedRequest& q) { return q.request_id == request_id; });
  }
  aborts_.push_back({request_id, seq_index});
  wake_.Signal();
}

void WorkerLoop::Resume() {
  absl::MutexLock lock(&mu_);
  resumed_ = true;
  wake_.Signal();
}

void WorkerLoop::Drain(std::function<void()> on_drained) {
  absl::MutexLock lock(&mu_);
  on_drained_ = std::move(on_drained);
  wake_.Signal();
}

void WorkerLoop::Hold(HoldOrder order) {
  absl::MutexLock lock(&mu_);
  holds_.push_back(std::move(order));
  wake_.Signal();
}

void WorkerLoop::Release(std::vector<int> blocks) {
  absl::MutexLock lock(&mu_);
  releases_.push_back(std::move(blocks));
  wake_.Signal();
}

void WorkerLoop::Detach() {
  absl::MutexLock lock(&mu_);
  detach_ = true;
  wake_.Signal();
}

void WorkerLoop::DetachPreempted(int max_blocks) {
  absl::MutexLock lock(&mu_);
  detach_preempted_blocks_ = std::max(detach_preempted_blocks_, max_blocks);
  wake_.Signal();
}

std::deque<QueuedRequest> WorkerLoop::TakeQueued() {
  absl::MutexLock lock(&mu_);
  std::deque<QueuedRequest> queued;
  queued.swap(inbox_);
  return queued;
}

void WorkerLoop::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  wake_.Signal();
}

bool WorkerLoop::exited() const {
  absl::MutexLock lock(&mu_);
  return exited_;
}

void WorkerLoop::Join() {
  if (thread_.joinable()) thread_.join();
  executor_.reset();
}

WorkerLoop::Load WorkerLoop::load() const {
  Load l;
  l.num_used_blocks = num_used_blocks_.load();
  l.num_slots_used = num_slots_used_.load();
  l.num_slots_reserved = num_slots_reserved_.load();
  l.num_running = num_running_.load();
  l.num_preempted = num_preempted_.load();
  l.num_steps = num_steps_.load();
  l.step_seconds = step_micros_.load() * 1e-6;
  l.forward_seconds = forward_micros_.load() * 1e-6;
  l.prefill_forward_seconds = prefill_forward_micros_.load() * 1e-6;
  l.num_prefill_tokens = num_prefill_tokens_.load();
  absl::MutexLock lock(&mu_);  // the loop moves the inbox into the scheduler under it
  l.num_waiting = num_waiting_.load() + static_cast<int>(inbox_.size());
  return l;
}

void WorkerLoop::Run() {
  for (;;) {
    std::deque<QueuedRequest> adds;
    std::vector<AbortOrder> aborts;
    std::function<void()> drained;
    std::vector<HoldOrder> holds;
    std::vector<std::vector<int>> releases;
    bool detach = false;
    int detach_preempted_blocks = 0;
    const bool busy = engine_->has_unfinished() || engine_->scheduler().has_pending_finishes();
    const bool holding = engine_->num_held_blocks() > 0;
    {
      absl::MutexLock lock(&mu_);
      while (!busy && !stopped_ && inbox_.empty() && aborts_.empty() && holds_.empty() &&
             releases_.empty() && !detach_ && detach_preempted_blocks_ == 0 &&
             !(on_drained_ && !holding) && !resumed_) {
        wake_.Wait(&mu_);
      }
      resumed_ = false;
      if (stopped_) break;
      if (!busy && !holding && inbox_.empty() && on_drained_) {
        drained = std::move(on_drained_);
        on_drained_ = nullptr;
      }
      adds.swap(inbox_);
      aborts.swap(aborts_);
      holds.swap(holds_);
      releases.swap(releases_);
      std::swap(detach, detach_);
      std::swap(detach_preempted_blocks, detach_preempted_blocks_);
      // Still waiting, now in the scheduler: counted until the step publishes the exact number,
      // so --max-waiting never misses a request between the inbox and the scheduler.
      num_waiting_ += static_cast<int>(adds.size());
    }
    if (drained) {
      LOG(INFO) << "worker " << id_ << " is drained";
      drained();
    }
    for (const AbortOrder& abort : aborts) {
      if (abort.seq_index < 0) {
        engine_->AbortRequest(abort.request_id);
      } else {
        engine_->AbortSequence(abort.request_id, abort.seq_index);
      }
    }
    for (const std::vector<int>& blocks : releases) engine_->Release(blocks);
    if (detach || detach_preempted_blocks > 0) {
      std::vector<Scheduler::Detached> detached;
      if (detach) detached = engine_->DetachRunning();
      if (detach_preempted_blocks > 0) {
        std::vector<Scheduler::Detached> preempted =
            engine_->DetachPreempted(detach_preempted_blocks);
        std::move(preempted.begin(), preempted.end(), std::back_inserter(detached));
        num_preempted_ = engine_->scheduler().num_waiting_preempted();
      }
      if (!detached.empty()) listener_->OnDetached(id_, std::move(detached));
    }
    for (QueuedRequest& add : adds) {
      const absl::Status added =
          add.pull.has_value()
              ? engine_->AddPulledRequest(add.request_id, add.request, std::move(*add.pull))
              : engine_->AddValidatedRequest(add.request_id, add.request);
      if (!added.ok()) {
        LOG(WARNING) << "worker " << id_ << " refused request " << add.request_id << ": " << added;
        listener_->OnRefused(id_, add.request_id);
      }
    }
    // After the adds: a hold waits for a prefix a request just queued here will compute.
    for (HoldOrder& hold : holds) engine_->Hold(std::move(hold));
    // Answered before the step: the peer that waits for them need not wait for it too.
    if (!holds.empty()) engine_->ServeHolds();
    if (TransferEvents events = engine_->TakeTransferEvents(); !events.empty()) {
      listener_->OnTransfers(id_, events);
    }
    const absl::Time step_start = absl::Now();
    absl::StatusOr<std::vector<SequenceUpdate>> updates = engine_->Step();
    if (!updates.ok()) {
      LOG(WARNING) << "worker " << id_ << " failed a step: " << updates.status();
      executor_->Abandon();
      listener_->OnFailed(id_);
      break;
    }
    // Publish the load before the listener hears of the step, so a client reacting to a
    // finish sees this worker's blocks already freed.
    Publish(*updates, step_start);
    listener_->OnUpdates(id_, *updates);
    if (TransferEvents events = engine_->TakeTransferEvents(); !events.empty()) {
      listener_->OnTransfers(id_, events);
    }
  }
  ClearLoad();
  // A dead worker leaves nothing: its pool and block tables and its metric series go now.
  engine_.reset();
  if (step_seconds_ != nullptr) metrics_->registry->Remove(step_seconds_);
  absl::MutexLock lock(&mu_);
  exited_ = true;
}

void WorkerLoop::Publish(const std::vector<SequenceUpdate>& updates, absl::Time step_start) {
  const double forward_seconds = engine_->last_forward_seconds();
  if (forward_seconds > 0) {
    ++num_steps_;
    step_micros_ += absl::ToInt64Microseconds(absl::Now() - step_start);
    forward_micros_ += static_cast<int64_t>(forward_seconds * 1e6);
    const int tokens = engine_->last_step_tokens();
    if (tokens >= Load::kPrefillStepTokens) {
      prefill_forward_micros_ += static_cast<int64_t>(forward_seconds * 1e6);
      num_prefill_tokens_ += tokens;
    }
  }
  const Scheduler& s = engine_->scheduler();
  if (metrics_ != nullptr) {
    if (forward_seconds > 0)
      step_seconds_->Observe(absl::ToDoubleSeconds(absl::Now() - step_start));
    metrics_->preemptions->Add(static_cast<double>(s.num_preemptions() - reported_preemptions_));
    metrics_->prefix_cache_queries->Add(
        static_cast<double>(s.kv().num_prefix_query_tokens() - reported_queries_));
    metrics_->prefix_cache_hits->Add(
        static_cast<double>(s.kv().num_prefix_hit_tokens() - reported_hits_));
    const SpecDecodeStats& spec = s.spec_stats();
    if (spec.num_drafts != reported_spec_.num_drafts) {
      metrics_->spec_drafts->Add(static_cast<double>(spec.num_drafts - reported_spec_.num_drafts));
      metrics_->spec_draft_tokens->Add(
          static_cast<double>(spec.num_draft_tokens - reported_spec_.num_draft_tokens));
      metrics_->spec_accepted_tokens->Add(
          static_cast<double>(spec.num_accepted_tokens - reported_spec_.num_accepted_tokens));
      reported_spec_.accepted_per_position.resize(spec.accepted_per_position.size(), 0);
      for (size_t i = 0; i < spec.accepted_per_position.size(); ++i) {
        metrics_->SpecAcceptedAtPosition(static_cast<int>(i))
            ->Add(static_cast<double>(spec.accepted_per_position[i] -
                                      reported_spec_.accepted_per_position[i]));
      }
      reported_spec_ = spec;
    }
    metrics_->recomputed_tokens->Add(
        static_cast<double>(s.num_recomputed_tokens() - reported_recomputed_));
    reported_recomputed_ = s.num_recomputed_tokens();
    reported_preemptions_ = s.num_preemptions();
    reported_queries_ = s.kv().num_prefix_query_tokens();
    reported_hits_ = s.kv().num_prefix_hit_tokens();
    for (const SequenceUpdate& u : updates) {
      if (u.queue_seconds >= 0) metrics_->request_queue_time->Observe(u.queue_seconds);
    }
  }
  num_used_blocks_ = s.kv().pool().num_used_blocks();
  const Scheduler::KvSlots slots = s.kv_slots();
  num_slots_used_ = slots.used;
  num_slots_reserved_ = slots.reserved;
  num_running_ = s.num_running();
  num_waiting_ = s.num_waiting() - s.num_waiting_paused();
  num_preempted_ = s.num_waiting_preempted();
}

void WorkerLoop::ClearLoad() {
  num_used_blocks_ = 0;
  num_slots_used_ = 0;
  num_slots_reserved_ = 0;
  num_running_ = 0;
  num_waiting_ = 0;
  num_preempted_ = 0;
}

}  // namespace pagoda
