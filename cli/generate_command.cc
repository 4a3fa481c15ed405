#include "cli/generate_command.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda {

namespace {

struct Sequence {
  std::vector<int> prompt_ids, output_ids;
  std::string text, finish_reason;
  std::vector<v1::TokenLogprobs> logprobs;  // (output_ids) when asked for
};

struct Result {
  grpc::Status status;
  std::vector<Sequence> seqs;  // (n)
};

// The deadline `seconds` from now, and the API key if there is one.
void Prepare(const GenerateOptions& o, double seconds, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
  if (!o.api_key.empty()) context->AddMetadata("authorization", "Bearer " + o.api_key);
}

v1::GenerateRequest MakeRequest(const GenerateOptions& o, const std::string& prompt) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  if (o.max_tokens.has_value()) request.set_max_tokens(*o.max_tokens);
  v1::SamplingParams* s = request.mutable_sampling();
  // The API's optional fields are sent only when given, so the model's defaults apply.
  if (o.overrides.temperature) s->set_temperature(*o.overrides.temperature);
  if (o.overrides.top_p) s->set_top_p(*o.overrides.top_p);
  if (o.overrides.top_k) s->set_top_k(*o.overrides.top_k);
  if (o.overrides.repetition_penalty) s->set_repetition_penalty(*o.overrides.repetition_penalty);
  s->set_min_p(o.sampling.min_p);
  if (o.overrides.seed) s->set_seed(*o.overrides.seed);
  s->set_presence_penalty(o.sampling.presence_penalty);
  s->set_frequency_penalty(o.sampling.frequency_penalty);
  request.set_logprobs(o.sampling.logprobs);
  request.set_n(o.n);
  request.set_ignore_eos(o.ignore_eos);
  for (const std::string& stop : o.stop) request.add_stop(stop);
  for (int id : o.stop_token_ids) request.add_stop_token_ids(id);
  return request;
}

// One streaming call; `echo` (if set) gets the prompt once the first message arrives, then the
// text as it arrives.
Result GenerateOne(v1::Generation::Stub& stub, const GenerateOptions& o, const std::string& prompt,
                   std::ostream* echo) {
  grpc::ClientContext context;
  Prepare(o, o.timeout_s, &context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, MakeRequest(o, prompt));
  Result result;
  result.seqs.resize(o.n);
  v1::GenerateResponse response;
  bool echoed = false;
  while (reader->Read(&response)) {
    if (response.index() < 0 || response.index() >= o.n) continue;
    Sequence& seq = result.seqs[response.index()];
    seq.output_ids.insert(seq.output_ids.end(), response.token_ids().begin(),
                          response.token_ids().end());
    seq.text += response.text();
    seq.logprobs.insert(seq.logprobs.end(), response.logprobs().begin(), response.logprobs().end());
    if (!response.finish_reason().empty()) seq.finish_reason = response.finish_reason();
    if (response.prompt_token_ids_size() > 0) {
      seq.prompt_ids.assign(response.prompt_token_ids().begin(), response.prompt_token_ids().end());
    }
    if (echo != nullptr) {
      if (!echoed) *echo << prompt;
      echoed = true;
      *echo << response.text() << std::flush;
    }
  }
  result.status = reader->Finish();
  if (echo != nullptr && echoed) *echo << "\n";
  return result;
}

// Fails fast (no wait for the channel) when nothing answers at `o.server`.
grpc::Status CheckReachable(v1::Generation::Stub& stub, const GenerateOptions& o) {
  grpc::ClientContext context;
  Prepare(o, std::min(o.timeout_s, 10.0), &context);
  v1::ModelInfo info;
  return stub.GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
}

// A logprob as JSON: six significant digits (a float holds about seven), null if not finite.
OrderedJson LogprobJson(float v) {
  if (!std::isfinite(v)) return nullptr;
  return std::strtod(absl::StrFormat("%.6g", v).c_str(), nullptr);
}

OrderedJson LogprobsJson(const std::vector<v1::TokenLogprobs>& logprobs) {
  OrderedJson out = OrderedJson::array();
  for (const v1::TokenLogprobs& lp : logprobs) {
    OrderedJson top = OrderedJson::array();
    for (const v1::TopLogprob& t : lp.top()) {
      top.push_back({{"token_id", t.token_id()}, {"logprob", LogprobJson(t.logprob())}});
    }
    out.push_back({{"token_id", lp.token_id()},
                   {"logprob", LogprobJson(lp.logprob())},
                   {"top", std::move(top)}});
  }
  return out;
}

}  // namespace

std::string DescribeStatus(int code, const std::string& message) {
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)), ": ", message);
}

int GenerateCommand(const GenerateOptions& o, std::ostream& out, std::ostream& err) {
  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials()));
  if (const grpc::Status reached = CheckReachable(*stub, o); !reached.ok()) {
    const bool unreachable = reached.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             reached.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    err << "error: " << (unreachable ? "cannot connect to " : "") << o.server << ": "
        << DescribeStatus(reached.error_code(), reached.error_message()) << "\n";
    return 1;
  }
  const bool stream = !o.json && o.n == 1 && o.prompts.size() == 1;
  std::vector<Result> results(o.prompts.size());
  if (stream) {
    results[0] = GenerateOne(*stub, o, o.prompts[0], &out);
  } else {
    std::vector<std::thread> calls;
    for (size_t i = 0; i < o.prompts.size(); ++i) {
      calls.emplace_back([&, i] { results[i] = GenerateOne(*stub, o, o.prompts[i], nullptr); });
    }
    for (std::thread& t : calls) t.join();
  }
  bool all_ok = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (!r.status.ok()) {
      all_ok = false;
      err << "error: " << (results.size() > 1 ? absl::StrCat("prompt ", i + 1, ": ") : "")
          << DescribeStatus(r.status.error_code(), r.status.error_message()) << "\n";
      if (o.json) out << JsonDump(OrderedJson{{"error", r.status.error_message()}}) << "\n";
      continue;
    }
    for (size_t index = 0; index < r.seqs.size(); ++index) {
      const Sequence& seq = r.seqs[index];
      if (o.json) {
        OrderedJson j = {{"prompt_ids", seq.prompt_ids},
                         {"output_ids", seq.output_ids},
                         {"text", seq.text},
                         {"finish_reason", seq.finish_reason}};
        if (r.seqs.size() > 1) j["index"] = index;
        if (o.sampling.logprobs > 0) j["logprobs"] = LogprobsJson(seq.logprobs);
        out << JsonDump(j) << "\n";
      } else if (!stream) {
        out << o.prompts[i] << seq.text << "\n\n";
      }
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace pagoda
