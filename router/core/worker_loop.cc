#include "router/core/worker_loop.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "glog/logging.h"

namespace pagoda {

WorkerLoop::WorkerLoop(int id, std::shared_ptr<Executor> executor, const ModelConfig& config,
                       const EngineOptions& options, RouterMetrics* metrics,
                       WorkerLoopListener* listener, std::span<const CachedBlock> cached)
    : id_(id),
      info_(executor->info()),
      metrics_(metrics),
      listener_(listener),
      executor_(std::move(executor)),
      engine_(std::make_unique<Engine>(config, executor_.get(), options)) {
  // Exact counts while a step runs: admission has just moved sequences from waiting to running.
  adopted_hashes_ = engine_->AdoptCachedBlocks(cached);
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

template <typename T>
void WorkerLoop::Post(T message) {
  absl::MutexLock lock(&mu_);
  if constexpr (std::is_same_v<T, QueuedRequest>) ++num_queued_;
  // Built in place: GCC 12 sees a moved variant's other alternatives as uninitialized.
  mailbox_.emplace_back(std::in_place_type<T>, std::move(message));
  wake_.Signal();
}

void WorkerLoop::Add(QueuedRequest request) { Post(std::move(request)); }

void WorkerLoop::Abort(int64_t request_id, int seq_index) {
  absl::MutexLock lock(&mu_);
  // Not taken into the engine yet: it never starts.
  if (seq_index < 0) {
    num_queued_ -= static_cast<int>(std::erase_if(mailbox_, [&](const Message& m) {
      const auto* q = std::get_if<QueuedRequest>(&m);
      return q != nullptr && q->request_id == request_id;
    }));
  }
  mailbox_.emplace_back(std::in_place_type<AbortOrder>, AbortOrder{request_id, seq_index});
  wake_.Signal();
}

void WorkerLoop::Resume() { Post(ResumeOrder{}); }

void WorkerLoop::Drain(std::function<void()> on_drained) {
  absl::MutexLock lock(&mu_);
  on_drained_ = std::move(on_drained);
  wake_.Signal();
}

void WorkerLoop::Hold(HoldOrder order) { Post(std::move(order)); }

void WorkerLoop::Release(std::vector<int> blocks) { Post(ReleaseOrder{std::move(blocks)}); }

void WorkerLoop::Detach() { Post(DetachOrder{}); }

void WorkerLoop::DetachPreempted(int max_blocks) { Post(DetachPreemptedOrder{max_blocks}); }

void WorkerLoop::ChangeAdapter(AdapterChange change, AdapterDone done) {
  Post(AdapterOrder{std::move(change), std::move(done)});
}

std::deque<QueuedRequest> WorkerLoop::TakeQueued() {
  absl::MutexLock lock(&mu_);
  std::deque<QueuedRequest> queued;
  std::erase_if(mailbox_, [&](Message& m) {
    auto* q = std::get_if<QueuedRequest>(&m);
    if (q != nullptr) queued.push_back(std::move(*q));
    return q != nullptr;
  });
  num_queued_ = 0;
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
  l.num_prefix_query_tokens = num_prefix_query_tokens_.load();
  l.num_prefix_hit_tokens = num_prefix_hit_tokens_.load();
  l.num_transfer_blocks_in = num_transfer_blocks_in_.load();
  absl::MutexLock lock(&mu_);  // the loop moves the mailbox into the scheduler under it
  l.num_waiting = num_waiting_.load() + num_queued_;
  return l;
}

void WorkerLoop::ReportTransfers() {
  TransferEvents events = engine_->transfers().TakeEvents();
  if (events.empty()) return;
  for (const TransferEvents::Pulled& pulled : events.pulled) {
    if (pulled.ok) num_transfer_blocks_in_ += pulled.num_blocks;
  }
  listener_->OnTransfers(id_, events);
}

void WorkerLoop::Run() {
  for (;;) {
    std::deque<Message> messages;
    std::function<void()> drained;
    const bool busy = engine_->has_unfinished() || engine_->scheduler().has_pending_finishes();
    const bool holding = engine_->transfers().num_held_blocks() > 0;
    {
      absl::MutexLock lock(&mu_);
      while (!busy && !stopped_ && mailbox_.empty() && !(on_drained_ && !holding)) {
        wake_.Wait(&mu_);
      }
      if (stopped_) break;
      if (!busy && !holding && num_queued_ == 0 && on_drained_) {
        drained = std::move(on_drained_);
        on_drained_ = nullptr;
      }
      messages.swap(mailbox_);
      // Still waiting, now in the scheduler: counted until the step publishes the exact number,
      // so --max-waiting never misses a request between the mailbox and the scheduler.
      num_waiting_ += num_queued_;
      num_queued_ = 0;
    }
    if (drained) {
      LOG(INFO) << "worker " << id_ << " is drained";
      drained();
    }
    Batch batch;
    for (Message& message : messages) Handle(std::move(message), &batch);
    if (batch.detach || batch.detach_preempted_blocks > 0) {
      std::vector<Scheduler::Detached> detached;
      if (batch.detach) detached = engine_->DetachRunning();
      if (batch.detach_preempted_blocks > 0) {
        std::vector<Scheduler::Detached> preempted =
            engine_->DetachPreempted(batch.detach_preempted_blocks);
        std::move(preempted.begin(), preempted.end(), std::back_inserter(detached));
        num_preempted_ = engine_->scheduler().num_waiting_preempted();
      }
      if (!detached.empty()) listener_->OnDetached(id_, std::move(detached));
    }
    // After the batch's requests: a hold waits for a prefix a request just queued here will
    // compute. Answered before the step: the peer that waits for them need not wait for it too.
    if (batch.held) engine_->transfers().ServeHolds();
    ReportTransfers();
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
    ReportTransfers();
  }
  ClearLoad();
  // Adapter changes it will never carry out are answered, so that nobody waits for them.
  std::vector<AdapterDone> unanswered;
  {
    absl::MutexLock lock(&mu_);
    std::erase_if(mailbox_, [&](Message& m) {
      auto* order = std::get_if<AdapterOrder>(&m);
      if (order != nullptr) unanswered.push_back(std::move(order->done));
      return order != nullptr;
    });
  }
  for (AdapterDone& done : unanswered) done(absl::UnavailableError("the worker left"));
  // A dead worker leaves nothing: its pool and block tables and its metric series go now.
  engine_.reset();
  if (step_seconds_ != nullptr) metrics_->registry->Remove(step_seconds_);
  absl::MutexLock lock(&mu_);
  exited_ = true;
}

void WorkerLoop::Handle(Message message, Batch* batch) {
  if (auto* add = std::get_if<QueuedRequest>(&message)) {
    const absl::Status added =
        add->pull.has_value()
            ? engine_->AddPulledRequest(add->request_id, add->request, std::move(*add->pull))
            : engine_->AddValidatedRequest(add->request_id, add->request);
    if (!added.ok()) {
      LOG(WARNING) << "worker " << id_ << " refused request " << add->request_id << ": " << added;
      listener_->OnRefused(id_, add->request_id);
    }
  } else if (auto* abort = std::get_if<AbortOrder>(&message)) {
    if (abort->seq_index < 0) {
      engine_->AbortRequest(abort->request_id);
    } else {
      engine_->AbortSequence(abort->request_id, abort->seq_index);
    }
  } else if (auto* hold = std::get_if<HoldOrder>(&message)) {
    engine_->transfers().Hold(std::move(*hold));
    batch->held = true;
  } else if (auto* release = std::get_if<ReleaseOrder>(&message)) {
    engine_->transfers().Release(release->blocks);
  } else if (auto* adapter = std::get_if<AdapterOrder>(&message)) {
    adapter->done(executor_->ChangeAdapter(adapter->change));
  } else if (std::holds_alternative<DetachOrder>(message)) {
    batch->detach = true;
  } else if (auto* detach = std::get_if<DetachPreemptedOrder>(&message)) {
    batch->detach_preempted_blocks = std::max(batch->detach_preempted_blocks, detach->max_blocks);
  }  // ResumeOrder: the wake was all it asked for
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
  num_prefix_query_tokens_ = s.kv().num_prefix_query_tokens();
  num_prefix_hit_tokens_ = s.kv().num_prefix_hit_tokens();
  const Scheduler::KvSlots slots = s.kv_slots();
  num_slots_used_ = slots.used;
  num_slots_reserved_ = slots.reserved;
  num_running_ = s.num_running();
  num_waiting_ = s.num_waiting() - s.num_waiting_paused();
  num_preempted_ = s.num_waiting_preempted();
  if (info_.max_loras > 0) {  // a worker that runs adapters
    Adapters adapters{.running = s.running_adapters(), .waiting = s.waiting_adapters()};
    // Steps without adapters (most) take no lock once the empty lists are published.
    const bool any = !adapters.running.empty() || !adapters.waiting.empty();
    if (any || adapters_published_) {
      absl::MutexLock lock(&adapters_mu_);
      adapters_ = std::move(adapters);
    }
    adapters_published_ = any;
  }
}

WorkerLoop::Adapters WorkerLoop::adapters() const {
  absl::MutexLock lock(&adapters_mu_);
  return adapters_;
}

void WorkerLoop::ClearLoad() {
  num_used_blocks_ = 0;
  num_slots_used_ = 0;
  num_slots_reserved_ = 0;
  num_running_ = 0;
  num_waiting_ = 0;
  num_preempted_ = 0;
  absl::MutexLock lock(&adapters_mu_);
  adapters_ = {};
}

}  // namespace pagoda
