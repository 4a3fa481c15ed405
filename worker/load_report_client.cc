#include "worker/load_report_client.h"

#include "absl/time/clock.h"
#include "common/process/grpc_security.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/worker.grpc.pb.h"

namespace pagoda {

LoadReportClient::LoadReportClient(const WorkerServiceOptions& link, absl::Duration every)
    : link_(link),
      every_(every),
      stage_start_ns_(absl::GetCurrentTimeNanos()),
      thread_([this] { Run(); }) {}

LoadReportClient::~LoadReportClient() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void LoadReportClient::Progress(const char* what, int64_t done, int64_t total) {
  if (what_.exchange(what, std::memory_order_relaxed) != what) {
    stage_start_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  }
  done_.store(done, std::memory_order_relaxed);
  total_.store(total, std::memory_order_relaxed);
}

void LoadReportClient::Run() {
  auto stub = v1::WorkerLink::NewStub(
      grpc::CreateChannel(link_.router_address, ChannelCredentialsFor(link_.tls, link_.tls_pem)));
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), every_)) return;
    }
    v1::LoadingReport report;
    report.set_worker_name(link_.name);
    report.set_what(what_.load(std::memory_order_relaxed));
    report.set_done_bytes(done_.load(std::memory_order_relaxed));
    report.set_total_bytes(total_.load(std::memory_order_relaxed));
    report.set_elapsed_ms(
        (absl::GetCurrentTimeNanos() - stage_start_ns_.load(std::memory_order_relaxed)) /
        1'000'000);
    grpc::ClientContext context;
    AddBearerToken(link_.worker_token, &context);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    v1::LoadingReply reply;
    const grpc::Status status = stub->Loading(&context, report, &reply);
    if (!status.ok()) VLOG(1) << "load progress not reported: " << status.error_message();
  }
}

}  // namespace pagoda
