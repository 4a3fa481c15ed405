#include "tools/fleet_sim/grpc_load.h"

#include <chrono>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagoda::fleet {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One Generate call; deletes itself when it ends, and its load starts the next.
class GrpcStream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GrpcStream(GrpcLoad* load, int stream, v1::Generation::Stub* stub, grpc::ClientContext** slot)
      : load_(load), stream_(stream) {
    *slot = &context_;
    std::mt19937 rng(static_cast<uint32_t>(stream) * 104729u + seed_++);
    const LoadOptions& o = load->options();
    for (int id : MakePrompt(o, rng)) request_.add_prompt_token_ids(id);
    request_.set_max_tokens(o.max_tokens);
    request_.set_ignore_eos(true);
    request_.set_request_id(absl::StrCat("fleet-", stream));
    stub->async()->Generate(&context_, &request_, this);
  }

  void Go() {
    start_ = last_ = Clock::now();
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    const int n = response_.token_ids_size();
    if (n > 0) {
      LoadStats* stats = load_->stats();
      stats->tokens.fetch_add(n, std::memory_order_relaxed);
      if (stats->recording.load(std::memory_order_relaxed)) {
        const double gap = MillisSince(last_);
        if (first_) {
          ttft_.push_back(static_cast<float>(gap));
        } else {
          for (int i = 0; i < n; ++i) token_ms_.push_back(static_cast<float>(gap / n));
        }
      }
      first_ = false;
      last_ = Clock::now();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    LoadStats* stats = load_->stats();
    if (status.ok()) {
      stats->requests.fetch_add(1, std::memory_order_relaxed);
    } else if (!load_->stopping()) {
      stats->failures.fetch_add(1, std::memory_order_relaxed);
    }
    stats->token_ms.Merge(token_ms_);
    stats->ttft_ms.Merge(ttft_);
    GrpcLoad* load = load_;
    const int stream = stream_;
    const bool again = load->Ended(stream);  // before the context goes: Stop may cancel it
    delete this;
    if (again) load->Relaunch(stream);
  }

 private:
  static inline std::atomic<uint32_t> seed_{0};
  GrpcLoad* const load_;
  const int stream_;
  grpc::ClientContext context_;
  v1::GenerateRequest request_;
  v1::GenerateResponse response_;
  Clock::time_point start_, last_;
  bool first_ = true;
  std::vector<float> token_ms_, ttft_;
};

}  // namespace

GrpcLoad::GrpcLoad(LoadOptions options, LoadStats* stats)
    : options_(std::move(options)), stats_(stats) {}

GrpcLoad::~GrpcLoad() { Stop(); }

void GrpcLoad::Start() {
  const int per = std::max(1, options_.streams_per_connection);
  const int connections = (options_.streams + per - 1) / per;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("pagoda.fleet_sim.client", c);  // a connection of its own
    stubs_.push_back(v1::Generation::NewStub(
        grpc::CreateCustomChannel(options_.address, grpc::InsecureChannelCredentials(), args)));
  }
  {
    absl::MutexLock lock(&mu_);
    contexts_.assign(options_.streams, nullptr);
    in_flight_ = options_.streams;
  }
  for (int s = 0; s < options_.streams; ++s) Relaunch(s);
}

bool GrpcLoad::Ended(int stream) {
  absl::MutexLock lock(&mu_);
  contexts_[stream] = nullptr;
  if (stopping_) --in_flight_;
  return !stopping_;
}

void GrpcLoad::Relaunch(int stream) {
  GrpcStream* call = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      --in_flight_;
      return;
    }
    call = new GrpcStream(this, stream, stubs_[stream / options_.streams_per_connection].get(),
                          &contexts_[stream]);
  }
  call->Go();  // outside mu_: a reaction may run on this thread
}

void GrpcLoad::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (grpc::ClientContext* c : contexts_) {
    if (c != nullptr) c->TryCancel();
  }
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight_));
}

}  // namespace pagoda::fleet
