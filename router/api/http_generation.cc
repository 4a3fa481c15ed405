#include "router/api/http_generation.h"

#include <utility>

namespace pagoda {

HttpGeneration::HttpGeneration(Cluster* cluster, const Tokenizer* tokenizer, RouterMetrics* metrics)
    : cluster_(cluster), tokenizer_(tokenizer), metrics_(metrics) {}

HttpGeneration::~HttpGeneration() { Abort(); }

absl::Status HttpGeneration::Submit(std::vector<GenerationRequest> requests,
                                    const std::vector<std::string>& stops, absl::Time give_up_at) {
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
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].paused = paused_;
    absl::StatusOr<int64_t> id = cluster_->Submit(
        requests[i], [this, i](const RequestUpdate& u) { return OnUpdate(static_cast<int>(i), u); },
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

bool HttpGeneration::OnUpdate(int part, const RequestUpdate& u) {
  absl::MutexLock lock(&mu_);
  if (aborted_) return false;
  if (!u.error.ok()) {
    if (error_.ok()) error_ = u.error;
    return false;
  }
  RequestOutput::Result out = parts_[part].output->Add(u);
  if (!out.has_chunk) return out.go_on;
  if (out.chunk.finish_reason == "abort") {
    if (error_.ok()) error_ = absl::InternalError("the request was dropped by its worker");
    return false;
  }
  if (out.chunk.finished) --num_unfinished_;
  out.chunk.index += parts_[part].index_offset;
  unsent_tokens_ += static_cast<int>(out.chunk.token_ids.size());
  queue_.push_back(std::move(out.chunk));
  if (unsent_tokens_ >= kMaxUnsentTokens) paused_->store(true);  // the client is not reading
  return out.go_on;
}

HttpGeneration::Taken HttpGeneration::Take(absl::Duration timeout) {
  Taken taken;
  std::vector<int64_t> resume;
  {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || num_unfinished_ == 0 || !error_.ok() || aborted_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    taken.chunks = std::move(queue_);
    queue_.clear();
    unsent_tokens_ = 0;
    taken.error = error_;
    taken.done = num_unfinished_ == 0 || !error_.ok() || aborted_;
    if (paused_->load()) {
      paused_->store(false);
      for (const Part& p : parts_) {
        if (p.request_id >= 0) resume.push_back(p.request_id);
      }
    }
  }
  // Outside mu_: the Cluster calls OnUpdate under its own lock, which then takes mu_.
  for (int64_t id : resume) cluster_->Resume(id);
  return taken;
}

void HttpGeneration::Abort() {
  std::vector<int64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    if (aborted_) return;
    aborted_ = true;
    for (const Part& p : parts_) {
      if (p.request_id >= 0) ids.push_back(p.request_id);
    }
  }
  // Abort returns once no update can reach this object any more.
  for (int64_t id : ids) cluster_->Abort(id);
  absl::MutexLock lock(&mu_);
  for (const Part& p : parts_) {
    if (p.request_id >= 0) p.output->End();
  }
}

}  // namespace pagoda
