#include "router/link/worker_link_service.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process/grpc_security.h"
#include "common/process/secret.h"
#include "glog/logging.h"
#include "grpcpp/security/server_credentials.h"
#include "proto/step_proto.h"
#include "router/link/worker_connection.h"

namespace pagoda {

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

// One worker's call. The reactor reads every message the worker sends (the Hello first, then
// results, adapter answers, Drain and heartbeats) on gRPC's threads, and writes what the
// worker's WorkerConnection queues. Every end of the call comes through a failed read (the
// worker closed it, the router cancelled it, or its deadline passed), and ends in OnDone,
// which takes the worker out of its Cluster and deletes the call.
class WorkerLinkService::Call final
    : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage> {
 public:
  Call(WorkerLinkService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    ++service_->num_calls_;
    // The token (call metadata) before anything else: a stranger's call ends at once, having
    // been read nothing, and learns nothing.
    if (!CallCarriesToken(*context, service_->options_.worker_token)) {
      LOG_EVERY_N(WARNING, 100) << "refused a worker from " << context->peer()
                                << ": no or wrong worker token (" << google::COUNTER << " so far)";
      if (service_->options_.metrics) service_->options_.metrics->refused_worker_token->Add();
      constexpr char kMessage[] =
          "the router's worker port needs the cluster's token (--worker-token or "
          "PAGODA_WORKER_TOKEN)";
      Refuse(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kMessage));
      return;
    }
    if (service_->num_calls_.load() > service_->options_.max_calls) {
      Refuse(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the router has ", service_->options_.max_calls, " worker calls open")));
      return;
    }
    // The deadline ends the call when the Hello is late, or later when the worker goes silent
    // (e.g. its link is cut), which makes the pending read fail.
    deadline_ = service_->deadlines_.Add([context] { context->TryCancel(); },
                                         service_->options_.hello_timeout);
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The worker is gone, or the call was cancelled: nothing more is written.
      if (connection_ != nullptr) connection_->Close();
      Finish(grpc::Status::OK);
      return;
    }
    deadline_->Beat(service_->options_.heartbeat_timeout);
    if (connection_ == nullptr) {
      if (!Hello()) return;
    } else if (in_.has_result()) {
      connection_->OnResult(std::move(*in_.mutable_result()));  // the next read parses afresh
    } else if (in_.has_adapter_loaded()) {
      connection_->OnAdapterLoaded(in_.adapter_loaded());
    } else if (in_.has_drain()) {
      LOG(INFO) << who_ << " asks to drain";
      if (stage_) {
        service_->stages_.Drain(cluster_, connection_.get());
      } else {
        std::shared_ptr<WorkerConnection> connection = connection_;
        cluster_->DrainWorker(id_, [connection] { connection->SendDrained(); });
      }
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    if (connection_ != nullptr) connection_->OnWriteDone(ok);
  }

  void OnDone() override {
    if (deadline_ != nullptr) {
      service_->deadlines_.Remove(deadline_.get());
      if (deadline_->fired() && connection_ != nullptr)
        LOG(WARNING) << who_ << " missed its heartbeats";
    }
    if (connection_ != nullptr) {
      connection_->Close();
      if (stage_) {
        service_->stages_.Leave(cluster_, connection_.get());
      } else {
        cluster_->RemoveWorker(id_);
      }
      --service_->num_connected_;
      LOG(WARNING) << who_ << " disconnected";
    }
    --service_->num_calls_;
    delete this;
  }

 private:
  // Ends the call with `status`, its message also in a Hello reply (what a worker logs).
  void Refuse(const grpc::Status& status) {
    reply_.mutable_hello_reply()->set_message(status.error_message());
    StartWriteAndFinish(&reply_, grpc::WriteOptions(), status);
  }

  // The first message: the worker joins its model's Cluster (or its stage group), or the call
  // ends. False when it ended.
  bool Hello() {
    if (!in_.has_hello()) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("the first message must be a Hello, within ",
                                       absl::FormatDuration(service_->options_.hello_timeout))));
      return false;
    }
    const v1::Hello& hello = in_.hello();
    const std::string name = hello.worker_name();
    grpc::CallbackServerContext* const context = context_;
    auto connection = std::make_shared<WorkerConnection>(
        FromProto(hello), CachedBlocksFromProto(hello),
        WorkerConnection::Call{.start_write = [this](const v1::RouterMessage* m) { StartWrite(m); },
                               .cancel = [context] { context->TryCancel(); }},
        service_->options_.step_timeout);
    cluster_ = service_->ClusterFor(hello.model_fingerprint());
    // A pipeline stage waits for its group, which joins the Cluster as one worker.
    stage_ = StageGroups::IsStage(connection->info(), *cluster_);
    absl::StatusOr<int> id = -1;
    if (stage_) {
      if (absl::Status s = service_->stages_.Check(connection->info(), cluster_); !s.ok()) id = s;
    } else {
      id = cluster_->AddWorker(connection);
    }
    if (!id.ok()) {
      LOG(WARNING) << "refused worker " << name << ": " << id.status().message();
      if (service_->options_.metrics) service_->options_.metrics->refused_worker_hello->Add();
      Refuse(
          grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, std::string(id.status().message())));
      return false;
    }
    id_ = *id;
    connection_ = connection;
    v1::RouterMessage reply;
    reply.mutable_hello_reply()->set_accepted(true);
    reply.mutable_hello_reply()->set_worker_id(id_);
    if (stage_)
      reply.mutable_hello_reply()->set_message("a pipeline stage: it waits for its group");
    connection_->Accept(std::move(reply));
    ++service_->num_connected_;
    service_->loading_.Connected(name);
    // How the log names it: a stage has no worker id of its own (its group's slices have them).
    who_ = stage_ ? absl::StrCat("pipeline stage ", name)
                  : absl::StrCat("worker ", id_, " (", name, ")");
    LOG(INFO) << who_ << " connected from " << context_->peer();
    if (stage_) {
      service_->stages_.Join(
          cluster_,
          {.connection = connection,
           .name = name,
           .wire = [connection](const std::string& next) { connection->SendStageWiring(next); },
           .drained = [connection] { connection->SendDrained(); }});
    }
    return true;
  }

  WorkerLinkService* const service_;            // Not owned.
  grpc::CallbackServerContext* const context_;  // Not owned; valid until OnDone.
  std::shared_ptr<CallDeadlines::Deadline> deadline_;
  v1::WorkerMessage in_;     // the message being read
  v1::RouterMessage reply_;  // a refusal being written
  // Once the Hello is accepted:
  std::shared_ptr<WorkerConnection> connection_;
  Cluster* cluster_ = nullptr;
  bool stage_ = false;
  int id_ = -1;
  std::string who_;
};

grpc::ServerBidiReactor<v1::WorkerMessage, v1::RouterMessage>* WorkerLinkService::Connect(
    grpc::CallbackServerContext* context) {
  return new Call(this, context);
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
