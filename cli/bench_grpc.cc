// `pagoda bench --backend=grpc`: the router's public API, Generate streamed over one channel.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "cli/bench_backend.h"
#include "cli/generate_command.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class GrpcBackend final : public BenchBackend {
 public:
  explicit GrpcBackend(const BenchOptions& o)
      : o_(o),
        stub_(v1::Generation::NewStub(
            grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials()))) {}

  absl::StatusOr<ServedModel> Connect() override {
    // Fail fast (no wait for the channel): a refused connection is reported at once.
    grpc::ClientContext context;
    Prepare(&context, std::min(10.0, o_.timeout_s));
    v1::ModelInfo info;
    const grpc::Status status = stub_->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!status.ok()) {
      const bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                               status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat(unreachable ? "cannot connect to " : "", o_.server, ": ",
                       DescribeStatus(status.error_code(), status.error_message())));
    }
    return ServedModel{info.context_length(), info.vocab_size()};
  }

  BenchRecord Send(const std::vector<int>& prompt, int max_tokens, int stop_after,
                   std::vector<int>* output) override {
    v1::GenerateRequest request;
    request.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
    request.set_max_tokens(max_tokens);
    request.mutable_sampling()->set_temperature(static_cast<float>(o_.temperature));
    request.set_ignore_eos(o_.ignore_eos);
    grpc::ClientContext context;
    Prepare(&context, o_.timeout_s);
    BenchRecord r;
    r.prompt_tokens = static_cast<int>(prompt.size());
    const Clock::time_point start = Clock::now();
    Clock::time_point last = start;
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (response.token_ids_size() > 0) {
        const Clock::time_point now = Clock::now();
        if (r.output_tokens == 0) {
          r.ttft = Seconds(now - start);
        } else {
          r.itl.push_back(Seconds(now - last));
        }
        last = now;
        // A stream the client ends at stop_after keeps that many, also when a message brings
        // several tokens (a speculative step's).
        const int keep = stop_after < max_tokens
                             ? std::min(response.token_ids_size(), stop_after - r.output_tokens)
                             : response.token_ids_size();
        r.output_tokens += keep;
        if (output) {
          output->insert(output->end(), response.token_ids().begin(),
                         response.token_ids().begin() + keep);
        }
      }
      if (response.has_usage()) r.cached_tokens = response.usage().cached_tokens();
      if (r.output_tokens >= stop_after && stop_after < max_tokens) break;
    }
    const bool ended_by_us = r.output_tokens >= stop_after && stop_after < max_tokens;
    if (ended_by_us) context.TryCancel();
    const grpc::Status status = reader->Finish();
    r.e2e = Seconds(Clock::now() - start);
    r.ok = (status.ok() || ended_by_us) && r.output_tokens > 0;
    if (!r.ok) {
      r.error =
          status.ok() ? "no tokens" : DescribeStatus(status.error_code(), status.error_message());
    }
    return r;
  }

 private:
  void Prepare(grpc::ClientContext* context, double timeout_s) const {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    if (!o_.api_key.empty()) context->AddMetadata("authorization", "Bearer " + o_.api_key);
  }

  const BenchOptions& o_;
  const std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace

std::unique_ptr<BenchBackend> MakeGrpcBenchBackend(const BenchOptions& options) {
  return std::make_unique<GrpcBackend>(options);
}

}  // namespace pagoda
