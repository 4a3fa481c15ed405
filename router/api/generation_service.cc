#include "router/api/generation_service.h"

#include <deque>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/process/grpc_security.h"
#include "common/process/secret.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "lib/grammar/json_schema.h"
#include "router/api/generation_stream.h"
#include "router/api/request_policy.h"
#include "router/core/sequence.h"

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

// gRPC's peer string ("ipv4:10.0.0.7:53412", "ipv6:[::1]:53412") as a RequestPeer: the
// connection is all of it (its port tells a client's connections apart), the client the
// address without the port.
RequestPeer GrpcPeer(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  const bool has_port = colon != std::string::npos && colon != scheme &&
                        (peer.starts_with("ipv4:") || peer.starts_with("ipv6:"));
  return {.client = has_port ? peer.substr(0, colon) : peer, .connection = peer};
}

// A unary call: the key and the request's bytes (GenerationService::Admit), then `answer`'s
// response or its status.
template <typename Request, typename Answerer>
grpc::ServerUnaryReactor* Answer(const GenerationService& service,
                                 grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer& bytes, grpc::ByteBuffer* response_bytes,
                                 Answerer answer) {
  auto* reactor = context->DefaultReactor();
  Request request;
  grpc::Status status = service.Admit(*context, bytes, &request);
  if (status.ok()) {
    auto response = answer(request);
    if (response.ok()) {
      *response_bytes = Serialize(*response);
    } else {
      status = ToGrpcStatus(response.status());
    }
  }
  reactor->Finish(status);
  return reactor;
}

// What GetModelInfo and ListModels say of a model.
v1::ModelInfo InfoOf(const ServedModel& model) {
  const ClusterStats stats = model.cluster->stats();
  v1::ModelInfo info;
  info.set_model_name(model.name);
  info.set_context_length(model.cluster->max_model_len());
  info.set_vocab_size(model.cluster->config().vocab_size);
  info.set_block_size(stats.block_size);
  info.set_num_workers(stats.num_workers);
  info.set_num_blocks(stats.num_blocks);
  info.set_num_used_blocks(stats.num_used_blocks);
  info.set_model_fingerprint(model.cluster->config().Fingerprint());
  return info;
}

// One Generate call: translation only. Chunks come from the call's GenerationStream; one write
// is in flight at a time, and each written response tells the stream its tokens were sent.
class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GenerateReactor(GenerationService* service, const ServedModel& model,
                  grpc::CallbackServerContext* context, GenerationRequest request,
                  const std::vector<std::string>& stops, absl::Time give_up_at)
      : context_(context),
        seed_(request.sampling.seed),
        prompt_ids_(request.prompt_ids),
        stream_(model.cluster, model.tokenizer, model.metrics, [this] { OnOutput(); }) {
    std::vector<GenerationRequest> requests;
    requests.push_back(std::move(request));
    const absl::Status submitted =
        stream_.Submit(std::move(requests), stops, give_up_at, service->Peer(*context));
    absl::MutexLock lock(&mu_);
    if (!submitted.ok()) FinishLocked(ToGrpcStatus(submitted));
  }

  void OnWriteDone(bool ok) override {
    int sent;
    {
      absl::MutexLock lock(&mu_);
      sent = writing_tokens_;
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
        return;
      }
      MaybeWriteLocked();
    }
    stream_.Sent(sent);  // outside mu_: it may resume the request
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
  }

  void OnDone() override {
    stream_.Abort();  // returns once OnOutput cannot run any more
    delete this;
  }

 private:
  // The stream has output, its end or an error (on a worker loop thread).
  void OnOutput() {
    absl::MutexLock lock(&mu_);
    if (writing_ && !finished_) {
      // The client may not be reading, so the write may never end: an error (e.g. the stall
      // timeout's) ends the call now.
      if (absl::Status error = stream_.error(); !error.ok()) {
        FinishWithErrorLocked(error);
        return;
      }
    }
    MaybeWriteLocked();
  }

  void MaybeWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (pending_.empty()) {
      GenerationStream::Taken taken = stream_.Take(absl::ZeroDuration());
      if (!taken.error.ok()) {
        FinishWithErrorLocked(taken.error);
        return;
      }
      for (const OutputChunk& c : taken.chunks) pending_.push_back(ToResponse(c));
      done_ = taken.done;
    }
    if (!pending_.empty()) {
      writing_ = true;
      writing_tokens_ = pending_.front().token_ids_size();
      writing_bytes_ = Serialize(pending_.front());
      pending_.pop_front();
      StartWrite(&writing_bytes_);
    } else if (done_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  v1::GenerateResponse ToResponse(const OutputChunk& c) const {
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
    if (c.prompt_logprobs) {
      const PromptLogprobs& p = *c.prompt_logprobs;
      const size_t top_n = p.logprobs.empty() ? 0 : p.top.size() / p.logprobs.size();
      for (size_t i = 0; i < p.logprobs.size(); ++i) {
        v1::TokenLogprobs* lp = r.add_prompt_logprobs();
        lp->set_token_id(prompt_ids_[p.first_position + i]);
        lp->set_logprob(p.logprobs[i]);
        lp->set_rank(p.ranks[i]);
        for (size_t j = 0; j < top_n; ++j) {
          v1::TopLogprob* top = lp->add_top();
          top->set_token_id(p.top[i * top_n + j].token_id);
          top->set_logprob(p.top[i * top_n + j].logprob);
        }
      }
    }
    if (c.finished) {
      r.set_finish_reason(FinishReasonName(c.finish_reason));
      r.mutable_usage()->set_prompt_tokens(c.prompt_tokens);
      r.mutable_usage()->set_completion_tokens(c.completion_tokens);
      r.mutable_usage()->set_cached_tokens(c.cached_tokens);
      r.mutable_prompt_token_ids()->Add(prompt_ids_.begin(), prompt_ids_.end());
      r.set_seed(seed_);
    }
    return r;
  }

  void FinishWithErrorLocked(const absl::Status& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    FinishLocked(ToGrpcStatus(error));
    // A client that is not reading would get the status only after the output it has not
    // read, so never: the call is reset instead, which frees gRPC's side of it too.
    if (stream_.paused()) context_->TryCancel();
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  // Constant after construction.
  grpc::CallbackServerContext* const context_;  // Not owned; valid until OnDone.
  const uint64_t seed_;                         // the request's, or the one drawn for it
  const std::vector<int> prompt_ids_;

  absl::Mutex mu_;
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);  // taken, not yet written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;                      // a write is in flight:
  grpc::ByteBuffer writing_bytes_ ABSL_GUARDED_BY(mu_);            // its bytes
  int writing_tokens_ ABSL_GUARDED_BY(mu_) = 0;                    // and its tokens
  bool done_ ABSL_GUARDED_BY(mu_) = false;                         // the stream has nothing more
  bool finished_ ABSL_GUARDED_BY(mu_) = false;

  GenerationStream stream_;  // last: its callback uses the members above
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

GenerationService::GenerationService(const ServedModels* models, std::string api_key,
                                     std::pair<std::string, std::string> proxy_headers)
    : models_(models), api_key_(std::move(api_key)), proxy_headers_(std::move(proxy_headers)) {}

RequestPeer GenerationService::Peer(const grpc::CallbackServerContext& context) const {
  RequestPeer peer = GrpcPeer(context.peer());
  const auto& metadata = context.client_metadata();
  const auto value = [&](const std::string& key, std::string* out) {
    const auto found = key.empty() ? metadata.end() : metadata.find(key);
    if (found != metadata.end() && !found->second.empty() && found->second.size() <= 64) {
      *out = std::string(found->second.data(), found->second.size());
    }
  };
  value(proxy_headers_.first, &peer.client);
  value(proxy_headers_.second, &peer.connection);
  return peer;
}

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
  if (CallCarriesToken(context, api_key_)) return grpc::Status::OK;
  if (RouterMetrics* metrics = models_->default_model().metrics) metrics->refused_api_key->Add();
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong API key: send metadata authorization: Bearer <key>");
}

absl::StatusOr<GenerationRequest> GenerationService::Translate(const v1::GenerateRequest& in,
                                                               const ServedModel& model) const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (in.request_id().size() > kMaxRequestIdBytes) {
    return bad("request_id: longer than ", kMaxRequestIdBytes, " bytes");
  }
  GenerationRequest r;
  if (!in.prompt().empty() && in.prompt_token_ids_size() > 0) {
    return bad("prompt: set either prompt or prompt_token_ids, not both");
  }
  if (in.prompt_token_ids_size() > 0) {
    r.prompt_ids.assign(in.prompt_token_ids().begin(), in.prompt_token_ids().end());
  } else {
    if (in.prompt().empty()) return bad("prompt: must not be empty");
    ASSIGN_OR_RETURN(r.prompt_ids,
                     EncodePrompt(*model.tokenizer, in.prompt(), model.cluster->max_model_len()));
  }
  if (in.has_max_tokens()) r.max_tokens = in.max_tokens();
  const v1::SamplingParams& s = in.sampling();
  SamplingOverrides set;  // unset: the model's defaults, and a fresh seed
  if (s.has_temperature()) set.temperature = s.temperature();
  if (s.has_top_p()) set.top_p = s.top_p();
  if (s.has_top_k()) set.top_k = s.top_k();
  if (s.has_repetition_penalty()) set.repetition_penalty = s.repetition_penalty();
  if (s.has_seed()) set.seed = s.seed();
  SamplingParams given;
  given.min_p = s.min_p();
  given.presence_penalty = s.presence_penalty();
  given.frequency_penalty = s.frequency_penalty();
  given.logprobs = in.logprobs();
  given.min_tokens = in.min_tokens();
  given.prompt_logprobs = in.has_prompt_logprobs() ? in.prompt_logprobs() : -1;
  if (s.logit_bias_size() > kMaxLogitBiasEntries) {
    return bad("logit_bias: ", s.logit_bias_size(), " tokens; at most ", kMaxLogitBiasEntries);
  }
  std::vector<LogitBias> bias;
  for (const auto& [token_id, value] : s.logit_bias()) bias.push_back({token_id, value});
  RETURN_IF_ERROR(SetLogitBias(std::move(bias), &given));
  r.sampling = ResolveSampling(set, model.cluster->config(), given);
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
  r.cache_salt = in.cache_salt();  // its length is ValidateRequestLimits
  if (!in.grammar().empty() && !in.json_schema().empty()) {
    return bad("grammar: set either grammar or json_schema, not both");
  }
  if (!in.grammar().empty()) {
    ASSIGN_OR_RETURN(r.constraint, model.constraints->Compile(in.grammar(), "grammar"));
  } else if (!in.json_schema().empty()) {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(in.json_schema());
    if (!gbnf.ok()) return bad("json_schema: ", gbnf.status().message());
    ASSIGN_OR_RETURN(r.constraint, model.constraints->Compile(*gbnf, "json_schema"));
  }
  return r;  // the stream validates the rest (ids, sampling ranges, lengths, n)
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  auto request = std::make_unique<v1::GenerateRequest>();
  if (grpc::Status admitted = Admit(*context, *bytes, request.get()); !admitted.ok()) {
    return new ErrorReactor(admitted);
  }
  // The model, or a LoRA adapter of it (named as the model, as in vLLM).
  absl::StatusOr<ServedModels::Choice> choice = models_->Resolve(request->model());
  if (!choice.ok()) return new ErrorReactor(ToGrpcStatus(choice.status()));
  absl::StatusOr<GenerationRequest> r = Translate(*request, *choice->model);
  if (!r.ok()) return new ErrorReactor(ToGrpcStatus(r.status()));
  r->adapter = choice->adapter;
  if (absl::Status serving = models_->CheckServing(*choice); !serving.ok()) {
    return new ErrorReactor(ToGrpcStatus(serving));
  }
  const auto deadline = context->deadline();
  const absl::Time give_up_at =
      WorkerWaitEnd(deadline == std::chrono::system_clock::time_point::max()
                        ? std::nullopt
                        : std::optional<absl::Time>(absl::FromChrono(deadline)),
                    absl::Now());
  return new GenerateReactor(
      this, *choice->model, context, *std::move(r),
      std::vector<std::string>(request->stop().begin(), request->stop().end()), give_up_at);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* bytes,
                                                      grpc::ByteBuffer* response_bytes) {
  return Answer<v1::TokenizeRequest>(
      *this, context, *bytes, response_bytes,
      [this](const v1::TokenizeRequest& request) -> absl::StatusOr<v1::TokenizeResponse> {
        ASSIGN_OR_RETURN(const ServedModel* model, models_->Find(request.model()));
        ASSIGN_OR_RETURN(std::vector<int> ids, EncodePrompt(*model->tokenizer, request.text(),
                                                            model->cluster->max_model_len(), "text",
                                                            /*add_special_tokens=*/false));
        v1::TokenizeResponse response;
        response.mutable_token_ids()->Add(ids.begin(), ids.end());
        return response;
      });
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* bytes,
                                                          grpc::ByteBuffer* response_bytes) {
  return Answer<v1::GetModelInfoRequest>(
      *this, context, *bytes, response_bytes,
      [this](const v1::GetModelInfoRequest& request) -> absl::StatusOr<v1::ModelInfo> {
        ASSIGN_OR_RETURN(const ServedModel* model, models_->Find(request.model()));
        return InfoOf(*model);
      });
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* bytes,
                                                        grpc::ByteBuffer* response_bytes) {
  return Answer<v1::ListModelsRequest>(
      *this, context, *bytes, response_bytes,
      [this](const v1::ListModelsRequest&) -> absl::StatusOr<v1::ListModelsResponse> {
        v1::ListModelsResponse response;
        for (const auto& model : models_->all()) {
          const v1::ModelInfo info = InfoOf(*model);
          *response.add_models() = info;
          for (const std::string& adapter : model->cluster->loras().Names()) {
            v1::ModelInfo& a = *response.add_models() = info;
            a.set_model_name(adapter);
            a.set_parent(model->name);
          }
        }
        return response;
      });
}

}  // namespace pagoda
