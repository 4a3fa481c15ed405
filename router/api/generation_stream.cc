#include "router/api/generation_stream.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace pagoda {

int GenerationStream::Taken::num_tokens() const {
  int n = 0;
  for (const OutputChunk& c : chunks) n += static_cast<int>(c.token_ids.size());
  return n;
}

GenerationStream::GenerationStream(Cluster* cluster, const Tokenizer* tokenizer,
                                   RouterMetrics* metrics, std::function<void()> on_output)
    : cluster_(cluster),
      tokenizer_(tokenizer),
      metrics_(metrics),
      on_output_(std::move(on_output)) {}

GenerationStream::~GenerationStream() { Abort(); }

absl::Status GenerationStream::Submit(std::vector<GenerationRequest> requests,
                                      const std::vector<std::string>& stops, absl::Time give_up_at,
                                      const RequestPeer& peer) {
  for (const GenerationRequest& r : requests) RETURN_IF_ERROR(cluster_->Validate(r));
  {
    // Every part exists before the first submit: a sink may run as soon as its request is in.
    absl::MutexLock lock(&mu_);
    int offset = 0;
    for (const GenerationRequest& r : requests) {
      Part part;
      part.index_offset = offset;
      part.output = std::make_unique<RequestOutput>(tokenizer_, r.prompt_ids, r.n, stops, metrics_);
      parts_.push_back(std::move(part));
      offset += r.n;
      num_unfinished_ += r.n;
    }
    max_unsent_tokens_ = std::max(kMaxUnsentTokens, kMaxUnsentTokensPerSequence * offset);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].paused = paused_;
    requests[i].peer = peer;
    absl::StatusOr<int64_t> id = cluster_->Submit(
        requests[i],
        [this, gate = gate_, i](const RequestUpdate& u) {
          absl::MutexLock gate_lock(&gate->mu);
          return !gate->closed && OnUpdate(static_cast<int>(i), u);
        },
        give_up_at);
    if (!id.ok()) {
      Abort();
      return id.status();
    }
    absl::MutexLock lock(&mu_);
    parts_[i].request_id = *id;
    parts_[i].output->Submitted();
  }
  return absl::OkStatus();
}

bool GenerationStream::OnUpdate(int part, const RequestUpdate& u) {
  bool go_on;
  {
    absl::MutexLock lock(&mu_);
    if (aborted_ || !error_.ok()) return false;
    go_on = QueueLocked(part, u);
  }
  // Outside mu_: the transport's callback takes its own lock, then ours.
  if (on_output_) on_output_();
  return go_on;
}

bool GenerationStream::QueueLocked(int part, const RequestUpdate& u) {
  if (!u.error.ok()) {
    error_ = u.error;
    return false;
  }
  RequestOutput::Result out = parts_[part].output->Add(u);
  if (!out.has_chunk) return out.go_on;
  if (out.chunk.finish_reason == FinishReason::kAbort) {
    error_ = absl::InternalError("the request was dropped by its worker");
    return false;
  }
  if (out.chunk.finished) --num_unfinished_;
  out.chunk.index += parts_[part].index_offset;
  unsent_tokens_ += static_cast<int>(out.chunk.token_ids.size());
  queue_.push_back(std::move(out.chunk));
  if (unsent_tokens_ >= max_unsent_tokens_) paused_->store(true);  // the client is not reading
  return out.go_on;
}

bool GenerationStream::DoneLocked() const {
  return num_unfinished_ == 0 || !error_.ok() || aborted_;
}

GenerationStream::Taken GenerationStream::Take(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || DoneLocked(); };
  // A zero wait only looks: Abseil's AwaitWithTimeout would still queue this thread as a waiter
  // and sleep in the kernel for no time, a futex round trip per token written (perf: 8% of the
  // router's CPU under the fleet benchmark, gRPC's reactor taking after each write).
  if (timeout > absl::ZeroDuration()) mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  Taken taken;
  taken.chunks = std::exchange(queue_, {});
  taken.done = DoneLocked();
  taken.error = error_;
  return taken;
}

absl::Status GenerationStream::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

void GenerationStream::Sent(int num_tokens) {
  std::vector<int64_t> resume;
  {
    absl::MutexLock lock(&mu_);
    unsent_tokens_ -= num_tokens;
    if (!paused_->load() || unsent_tokens_ >= max_unsent_tokens_ / 4) return;
    paused_->store(false);
    for (const Part& p : parts_) {
      if (p.request_id >= 0) resume.push_back(p.request_id);
    }
  }
  // Outside mu_: a sink may run under the Cluster's lock, and then take mu_.
  for (int64_t id : resume) cluster_->Resume(id);
}

void GenerationStream::Abort() {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    if (aborted_) return;
    aborted_ = true;
    for (const Part& p : parts_) {
      if (p.request_id >= 0) ids.push_back(p.request_id);
    }
  }
  // No update is delivered after Cluster::Abort, but one may be on its way (the Cluster calls
  // sinks outside its lock): closing waits for a sink running and stops those that follow.
  for (int64_t id : ids) cluster_->Abort(id);
  {
    absl::MutexLock gate_lock(&gate_->mu);
    gate_->closed = true;
  }
  absl::MutexLock lock(&mu_);
  for (const Part& p : parts_) {
    if (p.request_id >= 0) p.output->End();
  }
}

}  // namespace pagoda
