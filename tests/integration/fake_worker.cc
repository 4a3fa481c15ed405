#include "tests/integration/fake_worker.h"

#include <chrono>
#include <limits>
#include <mutex>

namespace pagoda::testing {
namespace {

// Each fake worker on a connection of its own, as separate processes would be (gRPC shares
// one between channels of a process by default).
grpc::ChannelArguments OwnConnection() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

}  // namespace

FakeWorker::FakeWorker(const std::string& router_address, const std::string& token,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : stub_(v1::WorkerLink::NewStub(grpc::CreateCustomChannel(
          router_address, credentials ? credentials : grpc::InsecureChannelCredentials(),
          OwnConnection()))) {
  if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
  context_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  stream_ = stub_->Connect(&context_);
}

FakeWorker::~FakeWorker() { Finish(); }

v1::HelloReply FakeWorker::Connect(const v1::Hello& hello) {
  v1::WorkerMessage message;
  *message.mutable_hello() = hello;
  v1::RouterMessage reply;
  stream_->Write(message);  // a refusal may end the call first; its reply is still there
  if (!stream_->Read(&reply)) return v1::HelloReply();
  return reply.hello_reply();
}

void FakeWorker::Serve(Mode mode, int token) {
  std::shared_ptr<std::mutex> write_mu = std::make_shared<std::mutex>();
  beater_ = std::thread([this, write_mu] {
    while (!stop_) {
      v1::WorkerMessage beat;
      beat.mutable_heartbeat();
      {
        std::lock_guard<std::mutex> lock(*write_mu);
        if (!stream_->Write(beat)) return;
      }
      for (int i = 0; i < 10 && !stop_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  });
  reader_ = std::thread([this, mode, token, write_mu] {
    v1::RouterMessage message;
    while (stream_->Read(&message)) {
      if (!message.has_step()) continue;
      ++num_steps_;
      num_prompts_ += message.step().new_sequences_size();
      if (mode == Mode::kSilent) continue;
      v1::WorkerMessage out;
      v1::StepResult* result = out.mutable_result();
      result->set_step_id(message.step().step_id());
      for (const v1::ScheduledSequence& s : message.step().scheduled()) {
        if (!s.sample()) continue;
        v1::SampledToken* t = result->add_sampled();
        t->set_seq_id(s.seq_id());
        t->set_token_id(token);
        if (mode == Mode::kNanLogprob) t->set_logprob(std::numeric_limits<float>::quiet_NaN());
      }
      std::lock_guard<std::mutex> lock(*write_mu);
      if (!stream_->Write(out)) break;
    }
    ended_ = true;
  });
}

void FakeWorker::ReadUntilEnd() {
  v1::RouterMessage message;
  while (stream_->Read(&message)) {
  }
  ended_ = true;
}

grpc::Status FakeWorker::Finish() {
  if (finished_) return status_;
  finished_ = true;
  stop_ = true;
  if (reader_.joinable() || beater_.joinable()) {
    context_.TryCancel();
  } else {
    stream_->WritesDone();  // a refused call: the router has ended it already
  }
  if (beater_.joinable()) beater_.join();
  if (reader_.joinable()) reader_.join();
  status_ = stream_->Finish();
  return status_;
}

v1::Hello ValidHello(const std::string& fingerprint) {
  v1::Hello hello;
  hello.set_worker_name("fake");
  hello.set_model_fingerprint(fingerprint);
  hello.set_num_blocks(64);
  hello.set_block_size(16);
  hello.set_max_num_batched_tokens(256);
  hello.set_max_num_seqs(16);
  return hello;
}

}  // namespace pagoda::testing
