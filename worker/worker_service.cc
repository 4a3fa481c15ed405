#include "worker/worker_service.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/step_proto.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/worker.grpc.pb.h"

namespace pagoda {
namespace {

using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

WorkerService::WorkerService(std::unique_ptr<WorkerEngine> engine,
                             const WorkerServiceOptions& options)
    : engine_(std::move(engine)), options_(options) {}

int WorkerService::Run() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    if (!ServeOneConnection()) return 1;
    engine_->Reset();
    // A connection that lasted a while resets the backoff; quick failures back off to 5 s.
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      backoff = std::chrono::milliseconds(100);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

bool WorkerService::ServeOneConnection() {
  auto channel = grpc::CreateChannel(options_.router_address, grpc::InsecureChannelCredentials());
  auto stub = v1::WorkerLink::NewStub(channel);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub->Connect(&context);
  std::mutex write_mu;  // one writer at a time: results and heartbeats share the stream

  v1::WorkerMessage hello;
  ToProto(engine_->info(), hello.mutable_hello());
  hello.mutable_hello()->set_worker_name(options_.name);
  v1::RouterMessage reply;
  auto end_call = [&] {
    context.TryCancel();
    stream->Finish();
  };
  if (!stream->Write(hello) || !stream->Read(&reply)) {
    VLOG(1) << "router " << options_.router_address << " not reachable";
    end_call();
    return true;
  }
  if (!reply.has_hello_reply() || !reply.hello_reply().accepted()) {
    LOG(ERROR) << "router refused this worker: " << reply.hello_reply().message();
    end_call();
    return false;
  }
  LOG(INFO) << "connected to router " << options_.router_address << " as worker "
            << reply.hello_reply().worker_id();

  std::mutex beat_mu;
  std::condition_variable beat_cv;
  bool done = false;
  std::thread heartbeat([&] {
    std::unique_lock<std::mutex> lock(beat_mu);
    while (!beat_cv.wait_for(lock, std::chrono::seconds(1), [&] { return done; })) {
      v1::WorkerMessage beat;
      beat.mutable_heartbeat()->set_sent_unix_micros(NowMicros());
      std::lock_guard<std::mutex> write_lock(write_mu);
      if (!stream->Write(beat)) break;
    }
  });

  v1::RouterMessage message;
  while (stream->Read(&message)) {
    if (!message.has_step()) continue;  // heartbeats need no answer
    v1::WorkerMessage out;
    absl::StatusOr<StepResult> result = engine_->Execute(FromProto(message.step()));
    if (result.ok()) {
      ToProto(*result, out.mutable_result());
    } else {
      out.mutable_result()->set_step_id(message.step().step_id());
      out.mutable_result()->set_error(std::string(result.status().message()));
      LOG(ERROR) << "rejected step: " << result.status();
    }
    std::lock_guard<std::mutex> write_lock(write_mu);
    if (!stream->Write(out)) break;
  }
  {
    std::lock_guard<std::mutex> lock(beat_mu);
    done = true;
  }
  beat_cv.notify_all();
  heartbeat.join();
  context.TryCancel();
  const grpc::Status status = stream->Finish();
  LOG(WARNING) << "lost the router " << options_.router_address << ": " << status.error_message();
  return true;
}

}  // namespace pagoda
