#include "router/api/generation_service.h"

#include <deque>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/secret.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "router/api/request_output.h"

namespace pagoda {
namespace {

// Wire bytes <-> messages, for the raw methods.
bool ParseMessage(const grpc::ByteBuffer& in, google::protobuf::Message* out) {
  std::vector<grpc::Slice> slices;
  if (!in.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out->ParseFromString(bytes);
}
grpc::ByteBuffer Serialize(const google::protobuf::Message& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// One Generate call. Updates arrive on worker loop threads (under the Cluster's lock, in order)
// and queue here; one write is in flight at a time.
class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(GenerationService* service, GenerationRequest request,
                  const std::vector<std::string>& stops, absl::Time give_up_at)
      : service_(service),
        seed_(request.sampling.seed),
        output_(service->tokenizer(), request.prompt_ids, request.n, stops, service->metrics()) {
    request.paused = paused_;
    absl::StatusOr<int64_t> id = service_->cluster()->Submit(
        request, [this](const RequestUpdate& u) { return OnUpdate(u); }, give_up_at);
    absl::MutexLock lock(&mu_);
    if (!id.ok()) {
      FinishLocked(ToGrpcStatus(id.status()));
      return;
    }
    request_id_ = *id;
    output_.Submitted();
  }

  void OnWriteDone(bool ok) override {
    int64_t resume_id = -1;
    {
      absl::MutexLock lock(&mu_);
      unsent_tokens_ -= queue_.front().token_ids_size();
      queue_.pop_front();
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
        return;
      }
      if (paused_->load() && unsent_tokens_ < kMaxUnsentTokens / 4) {
        paused_->store(false);
        resume_id = request_id_;
      }
      MaybeWriteLocked();
    }
    // Outside mu_: the Cluster calls OnUpdate under its own lock, which then takes mu_.
    if (resume_id >= 0) service_->cluster()->Resume(resume_id);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

  void OnDone() override {
    // Abort returns only once no update can reach this reactor any more.
    int64_t id;
    {
      absl::MutexLock lock(&mu_);
      id = request_id_;
    }
    if (id >= 0) {
      service_->cluster()->Abort(id);
      absl::MutexLock lock(&mu_);
      output_.End();
    }
    delete this;
  }

 private:
  // Returns whether the sequence should go on (false once the client has seen its end).
  bool OnUpdate(const RequestUpdate& u) {
    absl::MutexLock lock(&mu_);
    if (!u.error.ok()) {
      FinishLocked(ToGrpcStatus(u.error));
      return false;
    }
    if (finished_) return false;
    RequestOutput::Result out = output_.Add(u);
    if (!out.has_chunk) return out.go_on;
    const OutputChunk& c = out.chunk;
    if (c.finish_reason == "abort") {
      FinishLocked(
          grpc::Status(grpc::StatusCode::INTERNAL, "the request was dropped by its worker"));
      return false;
    }
    v1::GenerateResponse r;
    r.set_index(c.index);
    r.set_text(c.text);
    r.mutable_token_ids()->Add(c.token_ids.begin(), c.token_ids.end());
    for (const SampledToken& sample : c.samples) {
      v1::TokenLogprobs* lp = r.add_logprobs();
      lp->set_token_id(sample.token_id);
      lp->set_logprob(sample.logprob);
      for (const TokenLogprob& t : sample.top_logprobs) {
        v1::TopLogprob* top = lp->add_top();
        top->set_token_id(t.token_id);
        top->set_logprob(t.logprob);
      }
    }
    if (c.finished) {
      r.set_finish_reason(c.finish_reason);
      r.mutable_usage()->set_prompt_tokens(c.prompt_tokens);
      r.mutable_usage()->set_completion_tokens(c.completion_tokens);
      r.mutable_usage()->set_cached_tokens(c.cached_tokens);
      r.mutable_prompt_token_ids()->Add(output_.prompt_ids().begin(), output_.prompt_ids().end());
      r.set_seed(seed_);
    }
    unsent_tokens_ += r.token_ids_size();
    queue_.push_back(std::move(r));
    if (unsent_tokens_ >= kMaxUnsentTokens) paused_->store(true);  // the client is not reading
    MaybeWriteLocked();
    return out.go_on;
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (!queue_.empty()) {
      writing_ = true;
      writing_bytes_ = Serialize(queue_.front());
      StartWrite(&writing_bytes_);
    } else if (output_.num_unfinished() == 0) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  GenerationService* const service_;
  const uint64_t seed_;  // the request's, or the one drawn for it
  // Shared with the request's sequences: set while the client is not reading.
  const std::shared_ptr<std::atomic<bool>> paused_ = std::make_shared<std::atomic<bool>>(false);
  absl::Mutex mu_;
  RequestOutput output_ ABSL_GUARDED_BY(mu_);
  int64_t request_id_ ABSL_GUARDED_BY(mu_) = -1;
  std::deque<v1::GenerateResponse> queue_ ABSL_GUARDED_BY(mu_);  // front() is being written
  grpc::ByteBuffer writing_bytes_ ABSL_GUARDED_BY(mu_);          // its bytes
  int unsent_tokens_ ABSL_GUARDED_BY(mu_) = 0;                   // in queue_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// Ends a call that failed validation.
class ErrorReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit ErrorReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

GenerationService::GenerationService(Cluster* cluster, const Tokenizer* tokenizer,
                                     std::string model_name, RouterMetrics* metrics,
                                     std::string api_key)
    : cluster_(cluster),
      tokenizer_(tokenizer),
      metrics_(metrics),
      model_name_(std::move(model_name)),
      api_key_(std::move(api_key)) {}

grpc::Status GenerationService::Admit(const grpc::CallbackServerContext& context,
                                      const grpc::ByteBuffer& bytes,
                                      google::protobuf::Message* request) const {
  if (grpc::Status auth = CheckApiKey(context); !auth.ok()) return auth;
  if (!ParseMessage(bytes, request)) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("the request is not a valid ", request->GetDescriptor()->name(), " message"));
  }
  return grpc::Status::OK;
}

grpc::Status GenerationService::CheckApiKey(const grpc::CallbackServerContext& context) const {
  if (api_key_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto auth = metadata.find("authorization");
  if (auth != metadata.end() &&
      BearerMatches(std::string_view(auth->second.data(), auth->second.size()), api_key_)) {
    return grpc::Status::OK;
  }
  if (metrics_) metrics_->refused_api_key->Add();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong API key: send metadata authorization: Bearer <key>");
}

absl::StatusOr<GenerationRequest> GenerationService::Translate(
    const v1::GenerateRequest& in) const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (in.request_id().size() > kMaxRequestIdBytes) {
    return bad("request_id: longer than ", kMaxRequestIdBytes, " bytes");
  }
  const int max_len = cluster_->max_model_len();
  GenerationRequest r;
  if (!in.prompt().empty() && in.prompt_token_ids_size() > 0) {
    return bad("prompt: set either prompt or prompt_token_ids, not both");
  }
  if (in.prompt_token_ids_size() > 0) {
    r.prompt_ids.assign(in.prompt_token_ids().begin(), in.prompt_token_ids().end());
  } else {
    if (in.prompt().empty()) return bad("prompt: must not be empty");
    // No token covers more than a few dozen bytes: a longer text cannot fit the context, and
    // is refused before it costs a tokenization.
    if (in.prompt().size() > static_cast<size_t>(max_len) * 64) {
      return bad("prompt: ", in.prompt().size(), " bytes cannot fit the model length of ", max_len,
                 " tokens");
    }
    // BOS (or nothing, or EOS too) exactly as the model's tokenizer adds it.
    r.prompt_ids = tokenizer_->Encode(in.prompt(), /*add_special_tokens=*/true);
  }
  if (in.has_max_tokens()) r.max_tokens = in.max_tokens();
  const v1::SamplingParams& s = in.sampling();
  // Unset: the model's defaults (generation_config.json), else 1, 1 and 0.
  const ModelConfig& model = cluster_->config();
  r.sampling.temperature = s.has_temperature() ? s.temperature() : model.default_temperature;
  r.sampling.top_p = s.has_top_p() ? s.top_p() : model.default_top_p;
  r.sampling.top_k = s.has_top_k() ? s.top_k() : model.default_top_k;
  r.sampling.min_p = s.min_p();
  r.sampling.seed = s.has_seed() ? s.seed() : RandomSeed();
  r.sampling.repetition_penalty = s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f;
  r.sampling.presence_penalty = s.presence_penalty();
  r.sampling.frequency_penalty = s.frequency_penalty();
  r.sampling.logprobs = in.logprobs();
  if (in.stop_size() > kMaxStopStrings) {
    return bad("stop: ", in.stop_size(), " strings; at most ", kMaxStopStrings);
  }
  for (const std::string& stop : in.stop()) {
    if (stop.empty() || stop.size() > kMaxStopStringBytes) {
      return bad("stop: each string must be 1 to ", kMaxStopStringBytes, " bytes");
    }
  }
  r.stop_token_ids.assign(in.stop_token_ids().begin(), in.stop_token_ids().end());
  r.ignore_eos = in.ignore_eos();
  r.n = in.has_n() ? in.n() : 1;
  return r;  // the Cluster validates the rest (ids, sampling ranges, lengths, n)
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  auto request = std::make_unique<v1::GenerateRequest>();
  if (grpc::Status admitted = Admit(*context, *bytes, request.get()); !admitted.ok()) {
    return new ErrorReactor(admitted);
  }
  absl::StatusOr<GenerationRequest> r = Translate(*request);
  // Validated before the reactor sizes anything by n or the prompt.
  if (r.ok()) {
    if (absl::Status valid = cluster_->Validate(*r); !valid.ok()) r = valid;
  }
  if (!r.ok()) {
    return new ErrorReactor(ToGrpcStatus(r.status()));
  }
  // Waiting for a worker ends a little before the client's deadline, so it hears UNAVAILABLE
  // (no worker) rather than a bare DEADLINE_EXCEEDED.
  const auto deadline = context->deadline();
  const absl::Time give_up_at = deadline == std::chrono::system_clock::time_point::max()
                                    ? absl::InfiniteFuture()
                                    : absl::FromChrono(deadline) - absl::Milliseconds(200);
  return new GenerateReactor(
      this, *std::move(r), std::vector<std::string>(request->stop().begin(), request->stop().end()),
      give_up_at);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* bytes,
                                                      grpc::ByteBuffer* response_bytes) {
  auto* reactor = context->DefaultReactor();
  v1::TokenizeRequest request;
  if (grpc::Status admitted = Admit(*context, *bytes, &request); !admitted.ok()) {
    reactor->Finish(admitted);
    return reactor;
  }
  if (request.text().size() > static_cast<size_t>(cluster_->max_model_len()) * 64) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: too long"));
    return reactor;
  }
  v1::TokenizeResponse response;
  for (int id : tokenizer_->Encode(request.text())) response.add_token_ids(id);
  *response_bytes = Serialize(response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* bytes,
                                                          grpc::ByteBuffer* response_bytes) {
  auto* reactor = context->DefaultReactor();
  v1::GetModelInfoRequest request;
  if (grpc::Status admitted = Admit(*context, *bytes, &request); !admitted.ok()) {
    reactor->Finish(admitted);
    return reactor;
  }
  v1::ModelInfo info;
  v1::ModelInfo* response = &info;
  const ClusterStats stats = cluster_->stats();
  response->set_model_name(model_name_);
  response->set_context_length(cluster_->max_model_len());
  response->set_vocab_size(cluster_->config().vocab_size);
  response->set_block_size(stats.block_size);
  response->set_num_workers(stats.num_workers);
  response->set_num_blocks(stats.num_blocks);
  response->set_num_used_blocks(stats.num_used_blocks);
  response->set_model_fingerprint(cluster_->config().Fingerprint());
  *response_bytes = Serialize(info);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace pagoda
