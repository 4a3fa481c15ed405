// A hostile or broken worker for the boundary tests: a plain client of worker.proto that says
// whatever Hello it is given and then answers steps its own way (or never), while a second
// thread keeps heartbeating. Not a pagoda-worker: it holds no model.
#ifndef PAGODA_TESTS_INTEGRATION_FAKE_WORKER_H_
#define PAGODA_TESTS_INTEGRATION_FAKE_WORKER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "pagoda/v1/worker.grpc.pb.h"

namespace pagoda::testing {

class FakeWorker {
 public:
  enum class Mode {
    kAnswer,      // answer every step, sampling token `token` for each sequence that samples
    kSilent,      // heartbeat but never answer a step (a hung forward pass)
    kNanLogprob,  // answer like kAnswer, with NaN log-probabilities (a broken forward pass)
  };
  // `token`: the bearer token to present ("" = none). Plaintext unless `credentials` are given.
  FakeWorker(const std::string& router_address, const std::string& token,
             std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  ~FakeWorker();  // ends the call

  // Sends `hello` and waits for the reply. Returns the reply; on a refusal `reply.accepted()`
  // is false and the call's status is in `status()` once Finish()ed.
  v1::HelloReply Connect(const v1::Hello& hello);
  // After an accepted Connect: serves steps in `mode` on a background thread.
  void Serve(Mode mode, int token = 0);
  // Ends the call; returns its status.
  grpc::Status Finish();
  // Without Serve: reads until the router ends the call (or its 5-minute deadline passes).
  void ReadUntilEnd();
  // With Serve: whether the router ended the call.
  bool ended() const { return ended_.load(); }

  int num_steps_seen() const { return num_steps_.load(); }
  int num_prompts_seen() const { return num_prompts_.load(); }

 private:
  std::unique_ptr<v1::WorkerLink::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::RouterMessage>> stream_;
  std::thread reader_, beater_;
  std::atomic<bool> stop_{false}, ended_{false};
  std::atomic<int> num_steps_{0}, num_prompts_{0};
  bool finished_ = false;
  grpc::Status status_;
};

// A Hello that a router serving `fingerprint` accepts.
v1::Hello ValidHello(const std::string& fingerprint);

}  // namespace pagoda::testing

#endif  // PAGODA_TESTS_INTEGRATION_FAKE_WORKER_H_
