#include "router/link/worker_connection.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/step_proto.h"
#include "router/core/worker_limits.h"

namespace pagoda {

WorkerConnection::WorkerConnection(const WorkerInfo& info, std::vector<CachedBlock> cached,
                                   Call call, absl::Duration step_timeout)
    : info_(info),
      call_(std::move(call)),
      step_timeout_(step_timeout),
      cached_(std::move(cached)) {}

std::vector<CachedBlock> WorkerConnection::TakeCachedBlocks() {
  absl::MutexLock lock(&mu_);
  return std::exchange(cached_, {});
}

absl::StatusOr<StepResult> WorkerConnection::Execute(const StepCommand& command) {
  v1::RouterMessage message;
  ToProto(command, message.mutable_step());
  absl::MutexLock lock(&mu_);
  // The Hello's reply goes first; a step must not pass it.
  mu_.Await(absl::Condition(this, &WorkerConnection::ClosedOrReady));
  if (closed_) return absl::UnavailableError("worker connection closed");
  result_.reset();
  waiting_for_ = command.step_id;
  QueueLocked(std::move(message));
  const bool answered = mu_.AwaitWithTimeout(
      absl::Condition(this, &WorkerConnection::ClosedOrAnswered), step_timeout_);
  if (!answered) {
    // Hung (or hostile): end the call, so the reactor sees the worker gone.
    return CloseLocked(
        absl::UnavailableError(absl::StrCat("worker did not answer step ", command.step_id,
                                            " within ", absl::FormatDuration(step_timeout_))));
  }
  if (!result_.has_value()) return absl::UnavailableError("worker connection closed");
  if (!result_->error().empty()) {
    return CloseLocked(
        absl::InternalError(absl::StrCat("worker rejected step: ", result_->error())));
  }
  return FromProto(*result_);
}

// Runs on the worker's loop thread between steps, as Execute does: one exchange at a time.
absl::StatusOr<AdapterInfo> WorkerConnection::ChangeAdapter(const AdapterChange& change) {
  v1::RouterMessage message;
  if (change.path.empty()) {
    message.mutable_unload_adapter()->set_name(change.name);
  } else {
    message.mutable_load_adapter()->set_name(change.name);
    message.mutable_load_adapter()->set_path(change.path);
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &WorkerConnection::ClosedOrReady));
  if (closed_) return absl::UnavailableError("worker connection closed");
  adapter_answer_.reset();
  QueueLocked(std::move(message));
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || adapter_answer_.has_value();
  };
  // Reading an adapter takes longer than a step: a whole step timeout at least, a minute at
  // most (a large adapter on a slow disk).
  if (!mu_.AwaitWithTimeout(absl::Condition(&answered),
                            std::max(step_timeout_, absl::Minutes(1)))) {
    // Hung, as a step unanswered: its late answer must not pass for the next change's.
    return CloseLocked(absl::DeadlineExceededError("the worker did not answer the adapter change"));
  }
  if (!adapter_answer_.has_value()) return absl::UnavailableError("worker connection closed");
  const v1::AdapterLoaded& a = *adapter_answer_;
  if (a.name() != change.name || a.loaded() == change.path.empty()) {
    return CloseLocked(absl::InternalError("the worker answered another adapter change"));
  }
  if (!a.ok()) {
    const int code = a.code() > 0 && a.code() <= 16 ? a.code() : 2;  // google.rpc.Code
    return absl::Status(static_cast<absl::StatusCode>(code), a.error().substr(0, 1024));
  }
  AdapterInfo info;
  info.name = a.name();
  if (a.loaded()) {
    info = {.name = a.adapter().name(), .rank = a.adapter().rank(), .digest = a.adapter().digest()};
    // Untrusted as a Hello's adapters are.
    WorkerInfo check = info_;
    check.adapters = {info};
    if (absl::Status valid = ValidateWorkerInfo(check, WorkerLimits()); !valid.ok()) {
      return CloseLocked(valid);
    }
  }
  return info;
}

void WorkerConnection::Abandon() {
  absl::MutexLock lock(&mu_);
  CloseLocked(absl::OkStatus()).IgnoreError();
}

void WorkerConnection::Accept(v1::RouterMessage reply) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  QueueLocked(std::move(reply));  // nothing is queued before it: steps wait for ready_
  ready_ = true;
}

void WorkerConnection::SendStageWiring(const std::string& next_stage) {
  v1::RouterMessage message;
  message.mutable_stage_wiring()->set_next_stage_address(next_stage);
  absl::MutexLock lock(&mu_);
  if (!closed_) QueueLocked(std::move(message));
}

void WorkerConnection::SendDrained() {
  v1::RouterMessage message;
  message.mutable_drained();
  absl::MutexLock lock(&mu_);
  if (!closed_) QueueLocked(std::move(message));
}

void WorkerConnection::QueueLocked(v1::RouterMessage message) {
  outbox_.push_back(std::move(message));
  WriteNextLocked();
}

void WorkerConnection::WriteNextLocked() {
  if (closed_ || writing_.has_value() || outbox_.empty()) return;
  writing_ = std::move(outbox_.front());
  outbox_.pop_front();
  call_.start_write(&*writing_);
}

void WorkerConnection::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_.reset();
  if (!ok) {
    // The call broke: its read fails too, and the reactor ends it.
    CloseLocked(absl::OkStatus()).IgnoreError();
    return;
  }
  WriteNextLocked();
}

void WorkerConnection::OnResult(v1::StepResult result) {
  absl::MutexLock lock(&mu_);
  if (result.step_id() == waiting_for_) result_ = std::move(result);
}

void WorkerConnection::OnAdapterLoaded(const v1::AdapterLoaded& answer) {
  absl::MutexLock lock(&mu_);
  adapter_answer_ = answer;
}

void WorkerConnection::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  outbox_.clear();
}

absl::Status WorkerConnection::CloseLocked(absl::Status status) {
  if (!closed_) call_.cancel();
  closed_ = true;
  outbox_.clear();
  return status;
}

}  // namespace pagoda
