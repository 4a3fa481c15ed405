#include "worker/worker_service.h"

#include <algorithm>
#include <thread>

#include "common/process/grpc_security.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/worker.grpc.pb.h"
#include "proto/step_proto.h"

namespace pagoda {
namespace {

using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>;
using Clock = std::chrono::steady_clock;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

WorkerService::WorkerService(std::unique_ptr<WorkerEngine> engine,
                             const WorkerServiceOptions& options)
    : engine_(std::move(engine)), options_(options) {}

void WorkerService::Drain() {
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return;
    draining_ = true;  // wakes the backoff and the heartbeat thread (their Await)
  }
  LOG(INFO) << "draining: no new work; waiting up to "
            << std::chrono::duration<double>(options_.drain_timeout).count()
            << " s for the sequences here to finish";
  SetReady(false);
}

void WorkerService::SetReady(bool ready) {
  if (options_.on_ready) options_.on_ready(ready);
}

int WorkerService::Run() {
  auto backoff = std::chrono::milliseconds(100);
  for (;;) {
    const auto start = Clock::now();
    const Outcome outcome = ServeOneConnection();
    SetReady(false);
    if (outcome != Outcome::kReconnect) engine_->SaveToDisk();  // --kv-cache-dir, if on
    if (outcome == Outcome::kRefused) return 1;
    if (outcome == Outcome::kDone) return 0;
    engine_->Reset();
    // A connection that lasted a while resets the backoff; quick failures back off to 5 s.
    if (Clock::now() - start > std::chrono::seconds(10)) backoff = std::chrono::milliseconds(100);
    bool drained;
    {
      absl::MutexLock lock(&mu_);
      drained = mu_.AwaitWithTimeout(absl::Condition(&draining_), absl::FromChrono(backoff));
    }
    if (drained) {
      engine_->SaveToDisk();  // not under mu_: it waits on the disk
      return 0;
    }
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

void WorkerService::AnswerAdapter(const v1::RouterMessage& message, v1::AdapterLoaded* out) {
  const bool load = message.has_load_adapter();
  const std::string& name = load ? message.load_adapter().name() : message.unload_adapter().name();
  const absl::Status status = load ? engine_->LoadAdapter(name, message.load_adapter().path())
                                   : engine_->UnloadAdapter(name);
  out->set_name(name);
  out->set_loaded(load);
  out->set_ok(status.ok());
  out->set_code(static_cast<int>(status.code()));
  if (!status.ok()) {
    out->set_error(std::string(status.message()));
    LOG(WARNING) << (load ? "loading" : "unloading") << " LoRA adapter: " << status;
    return;
  }
  LOG(INFO) << (load ? "loaded" : "unloaded") << " LoRA adapter " << name;
  for (const AdapterInfo& a : engine_->info().adapters) {
    if (load && a.name == name) ToProto(a, out->mutable_adapter());
  }
}

WorkerService::Outcome WorkerService::ServeOneConnection() {
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return Outcome::kDone;  // nothing here to drain
  }
  auto channel = grpc::CreateChannel(options_.router_address,
                                     ChannelCredentialsFor(options_.tls, options_.tls_pem));
  auto stub = v1::WorkerLink::NewStub(channel);
  grpc::ClientContext context;
  AddBearerToken(options_.worker_token, &context);
  std::unique_ptr<Stream> stream = stub->Connect(&context);
  absl::Mutex write_mu;  // one writer at a time: results, heartbeats and the drain share it

  v1::WorkerMessage hello;
  ToProto(engine_->info(), hello.mutable_hello());
  // What the pool still holds, so a restarted router's prefix cache covers it again.
  ToProto(engine_->CachedBlocks(kMaxCachedBlockTokens / std::max(1, engine_->info().block_size)),
          hello.mutable_hello());
  hello.mutable_hello()->set_worker_name(options_.name);
  v1::RouterMessage reply;
  auto end_call = [&] {
    context.TryCancel();
    stream->Finish();
  };
  stream->Write(hello);
  if (!stream->Read(&reply)) {  // a refusal can end the call before the write completes
    // Said at once and every 30 s while it lasts: a worker started before its router waits.
    if (Clock::now() - unreachable_logged_ >= std::chrono::seconds(30)) {
      unreachable_logged_ = Clock::now();
      LOG(INFO) << "waiting for the router at " << options_.router_address
                << ": not reachable yet (retrying)";
    }
    end_call();
    return Outcome::kReconnect;
  }
  if (!reply.has_hello_reply() || !reply.hello_reply().accepted()) {
    LOG(ERROR) << "router refused this worker: " << reply.hello_reply().message();
    end_call();
    return Outcome::kRefused;
  }
  LOG(INFO) << "connected to router " << options_.router_address << " as worker "
            << reply.hello_reply().worker_id();

  // Heartbeats every second; the drain request as soon as Drain() is called, and the end of
  // the call when the drain outlasts its timeout.
  bool done = false;  // guarded by mu_
  std::thread sender([&] {
    absl::MutexLock lock(&mu_);
    bool drain_sent = false;
    Clock::time_point give_up = Clock::time_point::max();
    // Read under mu_ (Await evaluates it holding the lock).
    const auto wanted = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return done || (draining_ && !drain_sent);
    };
    for (;;) {
      const auto wake = std::min(Clock::now() + std::chrono::seconds(1), give_up);
      mu_.AwaitWithTimeout(absl::Condition(&wanted), absl::FromChrono(wake - Clock::now()));
      if (done) return;
      v1::WorkerMessage message;
      if (draining_ && !drain_sent) {
        message.mutable_drain();
        drain_sent = true;
        give_up = Clock::now() + options_.drain_timeout;
      } else if (Clock::now() >= give_up) {
        LOG(WARNING) << "drain timed out; the router moves the remaining sequences";
        context.TryCancel();
        return;
      } else {
        message.mutable_heartbeat()->set_sent_unix_micros(NowMicros());
      }
      absl::MutexLock write_lock(&write_mu);
      if (!stream->Write(message)) {
        // The call is over (the router ended it, or left): a stage's step waiting for
        // activations that will not come stops waiting, so the worker rejoins at once.
        engine_->InterruptStage();
        return;
      }
    }
  });
  {
    absl::MutexLock lock(&mu_);
    if (!draining_) SetReady(true);
  }

  bool drained = false;
  v1::RouterMessage message;
  while (stream->Read(&message)) {
    if (message.has_drained()) {
      drained = true;
      break;
    }
    if (message.has_stage_wiring()) {
      if (options_.on_stage_wiring) {
        options_.on_stage_wiring(message.stage_wiring().next_stage_address());
      }
      continue;
    }
    v1::WorkerMessage out;
    if (message.has_load_adapter() || message.has_unload_adapter()) {
      AnswerAdapter(message, out.mutable_adapter_loaded());
      absl::MutexLock write_lock(&write_mu);
      if (!stream->Write(out)) break;
      continue;
    }
    if (!message.has_step()) continue;  // heartbeats need no answer
    absl::StatusOr<StepResult> result = engine_->Execute(FromProto(message.step()));
    if (result.ok()) {
      ToProto(*result, out.mutable_result());
    } else {
      out.mutable_result()->set_step_id(message.step().step_id());
      out.mutable_result()->set_error(std::string(result.status().message()));
      LOG(ERROR) << "rejected step: " << result.status();
    }
    absl::MutexLock write_lock(&write_mu);
    if (!stream->Write(out)) break;
  }
  bool draining;
  {
    absl::MutexLock lock(&mu_);
    done = true;  // ends the sender's Await
    draining = draining_;
  }
  sender.join();
  if (drained) {
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    LOG(INFO) << "drained; leaving the router (" << status.error_code() << ")";
    return Outcome::kDone;
  }
  context.TryCancel();
  const grpc::Status status = stream->Finish();
  LOG(WARNING) << "lost the router " << options_.router_address << ": " << status.error_message();
  // A drain that timed out or lost its router ends here: the router moves what was left.
  return draining ? Outcome::kDone : Outcome::kReconnect;
}

}  // namespace pagoda
