#include "router/core/request_table.h"

#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"

namespace pagoda {

int64_t RequestTable::Add(const GenerationRequest& request, RequestSink sink,
                          absl::Time give_up_at) {
  const int64_t id = next_request_id_++;
  Request& r = requests_[id];
  r.request = request;
  r.delivery = std::make_shared<Delivery>();
  absl::MutexLock lock(&r.delivery->mu);
  r.delivery->sink = std::move(sink);
  r.outputs.resize(request.n);
  r.finished.assign(request.n, false);
  r.worker.assign(request.n, -1);
  r.num_unfinished = request.n;
  r.give_up_at = give_up_at;
  return id;
}

void RequestTable::Assign(const QueuedRequest& work, int worker_id) {
  auto it = requests_.find(work.request_id);
  if (it == requests_.end()) return;
  for (int i = 0; i < work.request.n; ++i) {
    it->second.worker[work.request.first_seq_index + i] = worker_id;
  }
}

std::vector<int> RequestTable::WorkersOf(int64_t request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? std::vector<int>() : it->second.worker;
}

int RequestTable::NumHeldBy(int worker_id) const {
  int held = 0;
  for (const auto& [id, r] : requests_) {
    for (size_t i = 0; i < r.worker.size(); ++i) held += r.worker[i] == worker_id && !r.finished[i];
  }
  return held;
}

void RequestTable::Delivery::InTurn(int64_t ticket,
                                    const std::function<void(const RequestSink&)>& deliver) {
  absl::MutexLock lock(&mu);
  const auto turn = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return served == ticket; };
  mu.Await(absl::Condition(&turn));
  deliver(sink);
  ++served;
}

RequestTable::Handoff::Handoff(std::shared_ptr<Delivery> delivery, int64_t request_id,
                               int64_t ticket)
    : delivery_(std::move(delivery)), request_id_(request_id), ticket_(ticket) {}

RequestTable::Handoff::Handoff(Handoff&& other) noexcept
    : delivery_(std::move(other.delivery_)),
      request_id_(other.request_id_),
      ticket_(other.ticket_),
      updates_(std::move(other.updates_)) {}

RequestTable::Handoff::~Handoff() {
  if (delivery_ != nullptr) delivery_->InTurn(ticket_, [](const RequestSink&) {});
}

std::vector<int> RequestTable::Handoff::Run() {
  std::vector<int> stop;
  delivery_->InTurn(ticket_, [&](const RequestSink& sink) {
    for (const RequestUpdate& u : updates_) {
      if (!sink(u) && !u.finished) stop.push_back(u.seq_index);
    }
  });
  delivery_ = nullptr;
  return stop;
}

std::vector<RequestTable::Handoff> RequestTable::Record(
    int worker_id, const std::vector<SequenceUpdate>& updates) {
  std::vector<Handoff> out;
  absl::flat_hash_map<int64_t, size_t> index;  // request id -> its handoff in out
  for (const SequenceUpdate& u : updates) {
    auto it = requests_.find(u.request_id);
    if (it == requests_.end()) continue;               // aborted
    if (u.token_ids.empty() && !u.finished) continue;  // a fork was created
    Request& r = it->second;
    r.outputs[u.seq_index].insert(r.outputs[u.seq_index].end(), u.token_ids.begin(),
                                  u.token_ids.end());
    auto [slot, added] = index.try_emplace(u.request_id, out.size());
    if (added) out.emplace_back(r.delivery, u.request_id, r.delivery->next_ticket++);
    RequestUpdate& update = out[slot->second].updates_.emplace_back();
    static_cast<SequenceOutput&>(update) = u;
    update.worker_id = worker_id;
    if (u.finished && !r.finished[u.seq_index]) {
      r.finished[u.seq_index] = true;
      if (--r.num_unfinished == 0) requests_.erase(it);  // its handoff keeps the sink
    }
  }
  return out;
}

int RequestTable::Stop(int64_t request_id, int seq_index) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return -1;
  Request& r = it->second;
  if (r.finished[seq_index]) return -1;
  r.finished[seq_index] = true;
  const int worker = r.worker[seq_index];
  if (--r.num_unfinished == 0) requests_.erase(it);
  return worker;
}

std::optional<std::vector<int>> RequestTable::End(int64_t request_id, const absl::Status& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  std::vector<int> workers = std::move(it->second.worker);
  if (!error.ok()) {
    RequestUpdate out;
    out.error = error;
    out.finished = true;
    // After the updates already handed off (under the Cluster's lock: their sinks need none).
    Delivery& d = *it->second.delivery;
    d.InTurn(d.next_ticket++, [&out](const RequestSink& sink) { sink(out); });
  }
  requests_.erase(it);
  return workers;
}

void RequestTable::Refuse(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  RequestUpdate out;
  out.finished = true;
  out.finish_reason = FinishReason::kAbort;
  Delivery& d = *it->second.delivery;
  d.InTurn(d.next_ticket++, [&out](const RequestSink& sink) { sink(out); });
  requests_.erase(it);
}

std::vector<QueuedRequest> RequestTable::TakeSequencesOn(
    int worker_id, const std::function<bool(int64_t request_id)>& still_queued) {
  std::vector<QueuedRequest> resumed;
  for (auto& [id, r] : requests_) {
    for (int i = 0; i < static_cast<int>(r.worker.size()); ++i) {
      if (r.worker[i] != worker_id || r.finished[i]) continue;
      if (still_queued(id)) continue;  // never started there: placed again as it was
      r.worker[i] = -1;
      resumed.push_back(Resumed(id, r, i));
    }
  }
  return resumed;
}

std::optional<QueuedRequest> RequestTable::ResumeIfOn(int64_t request_id, int seq_index,
                                                      int worker_id) const {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  const Request& r = it->second;
  if (seq_index < 0 || seq_index >= static_cast<int>(r.worker.size()) ||
      r.worker[seq_index] != worker_id || r.finished[seq_index]) {
    return std::nullopt;
  }
  return Resumed(request_id, r, seq_index);
}

QueuedRequest RequestTable::Resumed(int64_t request_id, const Request& r, int seq_index) {
  QueuedRequest work{.request_id = request_id, .request = r.request, .pull = std::nullopt};
  work.request.n = 1;
  work.request.first_seq_index = seq_index;
  work.request.output_ids = r.outputs[seq_index];
  work.request.front_of_queue = true;
  return work;
}

std::vector<int64_t> RequestTable::Expired(const std::vector<int64_t>& parked,
                                           absl::Time now) const {
  std::vector<int64_t> expired;
  for (int64_t id : parked) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second.give_up_at <= now) expired.push_back(id);
  }
  return expired;
}

PauseReview RequestTable::ReviewPaused(absl::Time now, absl::Duration stall_timeout,
                                       const PausedCaps& caps, const std::vector<int64_t>& skip) {
  std::vector<PauseState> states;
  for (auto& [id, r] : requests_) {
    if (absl::c_linear_search(skip, id)) continue;
    states.push_back(
        {.request_id = id,
         .paused = r.request.paused && r.request.paused->load(std::memory_order_relaxed),
         .paused_since = &r.paused_since,
         .num_sequences = r.num_unfinished,
         .peer = &r.request.peer});
  }
  return pagoda::ReviewPaused(states, now, stall_timeout, caps);
}

}  // namespace pagoda
