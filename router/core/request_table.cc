#include "router/core/request_table.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"

namespace pagoda {

int64_t RequestTable::Add(const GenerationRequest& request, RequestSink sink,
                          absl::Time give_up_at) {
  const int64_t id = next_request_id_++;
  Request& r = requests_[id];
  r.request = request;
  r.sink = std::make_shared<OrderedSink>(std::move(sink));
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

int RequestTable::NumUsing(std::string_view adapter) const {
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [&](const auto& entry) {
    return entry.second.request.adapter == adapter;
  }));
}

RequestTable::Recorded RequestTable::Record(int worker_id, const SequenceUpdate& u) {
  auto it = requests_.find(u.request_id);
  if (it == requests_.end()) return {};               // aborted
  if (u.token_ids.empty() && !u.finished) return {};  // a fork was created
  Request& r = it->second;
  if (r.finished[u.seq_index]) return {};  // its sink wanted no more of it
  r.outputs[u.seq_index].insert(r.outputs[u.seq_index].end(), u.token_ids.begin(),
                                u.token_ids.end());
  Recorded recorded{
      .sink = r.sink, .ticket = r.sink->Ticket(), .request_id = u.request_id, .update = {}};
  static_cast<SequenceOutput&>(recorded.update) = u;
  recorded.update.worker_id = worker_id;
  if (u.finished) {
    r.finished[u.seq_index] = true;
    if (--r.num_unfinished == 0) requests_.erase(it);
  }
  return recorded;
}

std::optional<int> RequestTable::StopSequence(int64_t request_id, int seq_index) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  Request& r = it->second;
  if (seq_index < 0 || seq_index >= static_cast<int>(r.finished.size()) || r.finished[seq_index]) {
    return std::nullopt;
  }
  const int worker = r.worker[seq_index];
  r.finished[seq_index] = true;
  if (--r.num_unfinished == 0) requests_.erase(it);
  return worker;
}

RequestTable::Delivered RequestTable::Deliver(int worker_id, const SequenceUpdate& u) {
  Recorded recorded = Record(worker_id, u);
  if (recorded.sink == nullptr) return Delivered::kDone;
  if (recorded.sink->Deliver(recorded.ticket, recorded.update) || u.finished) {
    return Delivered::kDone;
  }
  const std::optional<int> worker = StopSequence(u.request_id, u.seq_index);
  return worker == worker_id ? Delivered::kAbortSequence : Delivered::kDone;
}

std::optional<std::vector<int>> RequestTable::End(int64_t request_id, const absl::Status& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  std::vector<int> workers = std::move(it->second.worker);
  if (!error.ok()) {
    RequestUpdate out;
    out.error = error;
    out.finished = true;
    OrderedSink& sink = *it->second.sink;
    sink.Deliver(sink.Ticket(), out);
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
  OrderedSink& sink = *it->second.sink;
  sink.Deliver(sink.Ticket(), out);
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
