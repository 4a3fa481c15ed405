#include "tools/fleet_sim/sim_worker.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/process/grpc_security.h"
#include "tools/fleet_sim/sim_workers.h"

namespace pagoda::fleet {

SimWorker::SimWorker(SimWorkers* owner, int index)
    : owner_(owner), index_(index), rng_(static_cast<uint32_t>(index) * 7919u + 1u) {}

void SimWorker::Start() {
  const SimWorkersOptions& options = owner_->options();
  grpc::ChannelArguments args;
  args.SetInt("pagoda.fleet_sim.worker", index_);  // its own connection, as a real worker has
  channel_ =
      grpc::CreateCustomChannel(options.router_address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::WorkerLink::NewStub(channel_);
  AddBearerToken(options.worker_token, &context_);
  context_.set_wait_for_ready(true);  // the router may still be starting
  stub_->async()->Connect(&context_, this);
  v1::WorkerMessage hello;
  v1::Hello* h = hello.mutable_hello();
  const WorkerInfo& info = options.info;
  h->set_worker_name(absl::StrCat("fleet_sim-", index_));
  h->set_model_fingerprint(info.model_fingerprint);
  h->set_num_blocks(info.num_blocks);
  h->set_block_size(info.block_size);
  h->set_max_num_batched_tokens(info.max_num_batched_tokens);
  h->set_max_num_seqs(info.max_num_seqs);
  h->set_kv_cache_dtype(info.kv_cache_dtype);
  AddHold();  // released once the read side ends and no write is in flight
  {
    absl::MutexLock lock(&mu_);
    SendLocked(std::move(hello));
  }
  StartRead(&in_);
  StartCall();
}

void SimWorker::SendLocked(v1::WorkerMessage message) {
  if (closing_) return;
  last_sent_ = absl::Now();
  out_.push_back(std::move(message));
  if (!writing_) {
    writing_ = true;
    StartWrite(&out_.front());
  }
}

void SimWorker::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  out_.pop_front();
  if (!ok) closing_ = true;
  if (!out_.empty() && !closing_) {
    StartWrite(&out_.front());
    return;
  }
  writing_ = false;
  if (closing_ && !hold_removed_) {
    hold_removed_ = true;
    RemoveHold();
  }
}

void SimWorker::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_ && !hold_removed_) {
      hold_removed_ = true;
      RemoveHold();
    }
    return;
  }
  if (in_.has_hello_reply()) {
    const bool accepted = in_.hello_reply().accepted();
    {
      absl::MutexLock lock(&mu_);
      accepted_ = accepted;
    }
    owner_->OnConnected(accepted);
  } else if (in_.has_step()) {
    HandleStep(in_.step());
  }
  StartRead(&in_);
}

void SimWorker::HandleStep(const v1::StepCommand& step) {
  const SimWorkersOptions& options = owner_->options();
  const absl::Time now = absl::Now();
  v1::WorkerMessage message;
  v1::StepResult* result = message.mutable_result();
  result->set_step_id(step.step_id());
  std::uniform_int_distribution<int> token(options.token_lo, options.token_hi - 1);
  int prompt_tokens = 0;
  int decodes = 0;
  for (const v1::ScheduledSequence& s : step.scheduled()) {
    const int n = s.token_ids_size();
    if (n > 1) prompt_tokens += n - 1;
    if (!s.sample()) continue;
    ++decodes;
    int id = token(rng_);
    // A draft is rejected at its first token: the answer differs from it.
    if (s.num_draft_tokens() > 0 && s.num_draft_tokens() <= n &&
        id == s.token_ids(n - s.num_draft_tokens())) {
      id = id + 1 < options.token_hi ? id + 1 : options.token_lo;
    }
    v1::SampledToken* sampled = result->add_sampled();
    sampled->set_seq_id(s.seq_id());
    sampled->set_token_id(id);
    sampled->set_logprob(-1.0f);
  }
  const double seconds = options.model.Seconds(prompt_tokens, decodes);
  result->set_forward_seconds(seconds);
  const absl::Time due = now + absl::Seconds(seconds);
  owner_->CountStep(decodes);
  {
    absl::MutexLock lock(&mu_);
    if (owner_->recording()) {
      if (had_work_) added_ms_.push_back(absl::ToDoubleMilliseconds(now - result_sent_));
      step_ms_.push_back(static_cast<float>(seconds * 1e3));
      if (added_ms_.size() >= 256) owner_->added_step_ms().Merge(added_ms_);
      if (step_ms_.size() >= 256) owner_->step_ms().Merge(step_ms_);
    }
    had_work_ = false;
    result_ = std::move(message);
    result_due_ = due;
  }
  owner_->Schedule(due, this);
}

absl::Time SimWorker::Fire(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (closing_) {
    owner_->added_step_ms().Merge(added_ms_);
    owner_->step_ms().Merge(step_ms_);
    return absl::InfiniteFuture();
  }
  if (result_.has_value() && result_due_ <= now) {
    // A result that sampled leaves sequences running (the router says which finished in its
    // next command): the next command's delay is the router's.
    had_work_ = result_->result().sampled_size() > 0;
    result_sent_ = now;
    SendLocked(*std::move(result_));
    result_.reset();
  } else if (accepted_ && now - last_sent_ >= absl::Seconds(1)) {
    v1::WorkerMessage beat;
    beat.mutable_heartbeat()->set_sent_unix_micros(absl::ToUnixMicros(now));
    SendLocked(std::move(beat));
  }
  if (result_.has_value()) return result_due_;
  // (Not yet accepted: no heartbeat went out; look again shortly.)
  return std::max(last_sent_ + absl::Seconds(1), now + absl::Milliseconds(100));
}

void SimWorker::OnDone(const grpc::Status& /*status*/) {
  absl::MutexLock lock(&mu_);
  done_ = true;
}

void SimWorker::WaitDone() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  owner_->added_step_ms().Merge(added_ms_);
  owner_->step_ms().Merge(step_ms_);
}

}  // namespace pagoda::fleet
