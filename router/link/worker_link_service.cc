#include "router/link/worker_link_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process/grpc_security.h"
#include "common/process/secret.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "proto/step_proto.h"
#include "router/core/worker_limits.h"

namespace pagoda {
namespace {

using Stream = grpc::ServerReaderWriter<v1::RouterMessage, v1::WorkerMessage>;

// Executes steps over one worker's stream. Execute runs on the worker's loop thread while the
// service's handler thread reads results; they meet under mu_.
class WorkerConnection final : public Executor {
 public:
  WorkerConnection(const WorkerInfo& info, std::vector<CachedBlock> cached, Stream* stream,
                   grpc::ServerContext* context, absl::Duration step_timeout)
      : info_(info),
        cached_(std::move(cached)),
        stream_(stream),
        context_(context),
        step_timeout_(step_timeout) {}

  const WorkerInfo& info() const override { return info_; }
  std::vector<CachedBlock> TakeCachedBlocks() override { return std::exchange(cached_, {}); }

  absl::StatusOr<StepResult> Execute(const StepCommand& command) override {
    v1::RouterMessage message;
    ToProto(command, message.mutable_step());
    {
      absl::MutexLock lock(&mu_);
      // The handler writes the Hello reply first; a step must not race it onto the stream.
      mu_.Await(absl::Condition(this, &WorkerConnection::ClosedOrReady));
      if (closed_) return absl::UnavailableError("worker connection closed");
      result_.reset();
      waiting_for_ = command.step_id;
      // Writes are serialised by mu_ (one Execute at a time per worker anyway).
      if (!stream_->Write(message)) {
        closed_ = true;
        return absl::UnavailableError("worker stream broke");
      }
      const bool answered = mu_.AwaitWithTimeout(
          absl::Condition(this, &WorkerConnection::ClosedOrAnswered), step_timeout_);
      if (!answered) {
        // Hung (or hostile): end the call, so the handler sees the worker gone.
        closed_ = true;
        context_->TryCancel();
        return absl::UnavailableError(absl::StrCat("worker did not answer step ", command.step_id,
                                                   " within ",
                                                   absl::FormatDuration(step_timeout_)));
      }
      if (!result_.has_value()) return absl::UnavailableError("worker connection closed");
      if (!result_->error().empty()) {
        return CloseLocked(
            absl::InternalError(absl::StrCat("worker rejected step: ", result_->error())));
      }
      return FromProto(*result_);
    }
  }

  // Runs on the worker's loop thread between steps, as Execute does: one exchange at a time.
  absl::StatusOr<AdapterInfo> ChangeAdapter(const AdapterChange& change) override {
    v1::RouterMessage message;
    if (change.path.empty()) {
      message.mutable_unload_adapter()->set_name(change.name);
    } else {
      message.mutable_load_adapter()->set_name(change.name);
      message.mutable_load_adapter()->set_path(change.path);
    }
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("worker connection closed");
    adapter_answer_.reset();
    if (!stream_->Write(message)) {
      closed_ = true;
      return absl::UnavailableError("worker stream broke");
    }
    auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return closed_ || adapter_answer_.has_value();
    };
    // Reading an adapter takes longer than a step: a whole step timeout at least, a minute at
    // most (a large adapter on a slow disk).
    if (!mu_.AwaitWithTimeout(absl::Condition(&answered),
                              std::max(step_timeout_, absl::Minutes(1)))) {
      // Hung, as a step unanswered: its late answer must not pass for the next change's.
      return CloseLocked(
          absl::DeadlineExceededError("the worker did not answer the adapter change"));
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
      info = {
          .name = a.adapter().name(), .rank = a.adapter().rank(), .digest = a.adapter().digest()};
      // Untrusted as a Hello's adapters are.
      WorkerInfo check = info_;
      check.adapters = {info};
      if (absl::Status valid = ValidateWorkerInfo(check, WorkerLimits()); !valid.ok()) {
        return CloseLocked(valid);
      }
    }
    return info;
  }

  void OnAdapterLoaded(const v1::AdapterLoaded& answer) {
    absl::MutexLock lock(&mu_);
    adapter_answer_ = answer;
  }

  // The Cluster dropped this worker (a step failed here, or its result did not check out):
  // end its call too, so the worker sees it and reconnects with a clean state.
  void Abandon() override {
    absl::MutexLock lock(&mu_);
    CloseLocked(absl::OkStatus()).IgnoreError();
  }

  // Tells a pipeline stage where its activations go (StageGroups), before its group's first
  // step.
  void SendStageWiring(const std::string& next_stage) {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    v1::RouterMessage message;
    message.mutable_stage_wiring()->set_next_stage_address(next_stage);
    if (!stream_->Write(message)) closed_ = true;
  }

  // Tells a draining worker it holds nothing more. Runs on the worker's loop thread, between
  // steps, so it never interleaves with a step's write.
  void SendDrained() {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    v1::RouterMessage message;
    message.mutable_drained();
    if (!stream_->Write(message)) closed_ = true;
  }

  void OnResult(const v1::StepResult& result) {
    absl::MutexLock lock(&mu_);
    if (result.step_id() == waiting_for_) result_ = result;
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // The stream is the connection's from now on (the Hello reply has been written).
  void MarkReady() {
    absl::MutexLock lock(&mu_);
    ready_ = true;
  }

 private:
  absl::Status CloseLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!closed_) context_->TryCancel();
    closed_ = true;
    return status;
  }

  const WorkerInfo info_;
  std::vector<CachedBlock> cached_;     // from the Hello, until the Cluster takes them
  Stream* const stream_;                // Not owned; valid until Close().
  grpc::ServerContext* const context_;  // Not owned; valid until Close().
  const absl::Duration step_timeout_;
  // Conditions of mu_.Await.
  bool ClosedOrReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || ready_; }
  bool ClosedOrAnswered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || result_.has_value();
  }

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  int64_t waiting_for_ ABSL_GUARDED_BY(mu_) = -1;
  std::optional<v1::StepResult> result_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::AdapterLoaded> adapter_answer_ ABSL_GUARDED_BY(mu_);
};

// Cancels a call when nothing arrives on it before a deadline, which each Beat moves on.
class CallWatchdog {
 public:
  CallWatchdog(grpc::ServerContext* context, absl::Duration timeout)
      : context_(context), deadline_(absl::Now() + timeout), thread_([this] { Watch(); }) {}
  ~CallWatchdog() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    thread_.join();
  }
  // Something arrived: the next must come within `timeout`.
  void Beat(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    deadline_ = absl::Now() + timeout;
  }
  bool fired() {
    absl::MutexLock lock(&mu_);
    return fired_;
  }

 private:
  void Watch() {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(200));
      if (!done_ && absl::Now() > deadline_) {
        fired_ = true;
        context_->TryCancel();
        return;
      }
    }
  }

  grpc::ServerContext* const context_;  // Not owned.
  absl::Mutex mu_;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: it uses the members above
};

}  // namespace

WorkerLinkService::WorkerLinkService(std::vector<Cluster*> clusters,
                                     const WorkerLinkOptions& options)
    : clusters_(std::move(clusters)), options_(options), stages_(clusters_) {}

Cluster* WorkerLinkService::ClusterFor(const std::string& fingerprint) const {
  for (Cluster* cluster : clusters_) {
    if (cluster->config().Fingerprint() == fingerprint) return cluster;
  }
  return clusters_.front();
}

WorkerLinkService::~WorkerLinkService() = default;

grpc::Status WorkerLinkService::Connect(grpc::ServerContext* context, Stream* stream) {
  // The token (call metadata) before anything else: a stranger's call ends at once, having
  // held this thread for no read, and learns nothing.
  if (!CallCarriesToken(*context, options_.worker_token)) {
    LOG_EVERY_N(WARNING, 100) << "refused a worker from " << context->peer()
                              << ": no or wrong worker token (" << google::COUNTER << " so far)";
    if (options_.metrics) options_.metrics->refused_worker_token->Add();
    constexpr char kMessage[] =
        "the router's worker port needs the cluster's token (--worker-token or "
        "PAGODA_WORKER_TOKEN)";
    v1::RouterMessage reply;
    reply.mutable_hello_reply()->set_message(kMessage);
    stream->Write(reply);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kMessage);
  }
  // A watchdog cancels the call when the Hello is late, or later when the worker goes silent
  // (e.g. its link is cut), which makes the pending Read fail.
  CallWatchdog watchdog(context, options_.hello_timeout);
  v1::WorkerMessage first;
  if (!stream->Read(&first) || !first.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("the first message must be a Hello, within ",
                                     absl::FormatDuration(options_.hello_timeout)));
  }
  watchdog.Beat(options_.heartbeat_timeout);
  const std::string name = first.hello().worker_name();
  auto connection = std::make_shared<WorkerConnection>(FromProto(first.hello()),
                                                       CachedBlocksFromProto(first.hello()), stream,
                                                       context, options_.step_timeout);
  Cluster* const cluster = ClusterFor(first.hello().model_fingerprint());
  // A pipeline stage waits for its group, which joins the Cluster as one worker.
  const bool stage = StageGroups::IsStage(connection->info(), *cluster);
  absl::StatusOr<int> id = -1;
  if (stage) {
    if (absl::Status s = stages_.Check(connection->info(), cluster); !s.ok()) id = s;
  } else {
    id = cluster->AddWorker(connection);
  }
  v1::RouterMessage reply;
  reply.mutable_hello_reply()->set_accepted(id.ok());
  if (!id.ok()) {
    LOG(WARNING) << "refused worker " << name << ": " << id.status().message();
    if (options_.metrics) options_.metrics->refused_worker_hello->Add();
    reply.mutable_hello_reply()->set_message(std::string(id.status().message()));
    stream->Write(reply);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, std::string(id.status().message()));
  }
  reply.mutable_hello_reply()->set_worker_id(*id);
  if (stage) reply.mutable_hello_reply()->set_message("a pipeline stage: it waits for its group");
  stream->Write(reply);
  connection->MarkReady();
  ++num_connected_;
  loading_.Connected(name);
  if (stage) {
    LOG(INFO) << "pipeline stage " << name << " connected from " << context->peer();
    stages_.Join(
        cluster,
        {.connection = connection,
         .name = name,
         .wire = [connection](const std::string& next) { connection->SendStageWiring(next); },
         .drained = [connection] { connection->SendDrained(); }});
  } else {
    LOG(INFO) << "worker " << *id << " (" << name << ") connected from " << context->peer();
  }

  // How the log names it: a stage has no worker id of its own (its group's slices have them).
  const std::string who =
      stage ? absl::StrCat("pipeline stage ", name) : absl::StrCat("worker ", *id, " (", name, ")");
  v1::WorkerMessage message;
  while (stream->Read(&message)) {
    watchdog.Beat(options_.heartbeat_timeout);
    if (message.has_result()) {
      connection->OnResult(message.result());
    } else if (message.has_adapter_loaded()) {
      connection->OnAdapterLoaded(message.adapter_loaded());
    } else if (message.has_drain()) {
      LOG(INFO) << who << " asks to drain";
      if (stage) {
        stages_.Drain(cluster, connection.get());
      } else {
        cluster->DrainWorker(*id, [connection] { connection->SendDrained(); });
      }
    }
  }
  if (watchdog.fired()) LOG(WARNING) << who << " missed its heartbeats";
  connection->Close();
  if (stage) {
    stages_.Leave(cluster, connection.get());
  } else {
    cluster->RemoveWorker(*id);
  }
  --num_connected_;
  LOG(WARNING) << who << " disconnected";
  return grpc::Status::OK;
}

grpc::Status WorkerLinkService::Loading(grpc::ServerContext* context,
                                        const v1::LoadingReport* report, v1::LoadingReply*) {
  if (!CallCarriesToken(*context, options_.worker_token)) {
    if (options_.metrics) options_.metrics->refused_worker_token->Add();
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "the router's worker port needs the cluster's token");
  }
  absl::StatusOr<std::optional<std::string>> line =
      loading_.Report({.worker_name = report->worker_name(),
                       .what = report->what(),
                       .done_bytes = report->done_bytes(),
                       .total_bytes = report->total_bytes(),
                       .elapsed_ms = report->elapsed_ms()},
                      context->peer(), absl::Now());
  if (!line.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(line.status().message()));
  }
  if (*line) LOG(INFO) << **line;
  return grpc::Status::OK;
}

}  // namespace pagoda
