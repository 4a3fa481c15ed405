#include "cli/generate_command.h"

#include <chrono>

#include "common/json_writer.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda {

int GenerateCommand(const GenerateOptions& o, std::ostream& out, std::ostream& err) {
  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials()));
  v1::GenerateRequest request;
  request.set_prompt(o.prompt);
  if (o.max_tokens.has_value()) request.set_max_tokens(*o.max_tokens);
  v1::SamplingParams* s = request.mutable_sampling();
  s->set_temperature(o.sampling.temperature);
  s->set_top_p(o.sampling.top_p);
  s->set_top_k(o.sampling.top_k);
  s->set_min_p(o.sampling.min_p);
  s->set_seed(o.sampling.seed);
  s->set_repetition_penalty(o.sampling.repetition_penalty);
  s->set_presence_penalty(o.sampling.presence_penalty);
  s->set_frequency_penalty(o.sampling.frequency_penalty);
  request.set_n(o.n);
  request.set_ignore_eos(o.ignore_eos);
  for (const std::string& stop : o.stop) request.add_stop(stop);

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000)));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  struct Sequence {
    std::vector<int> prompt_ids, output_ids;
    std::string text, finish_reason;
  };
  std::vector<Sequence> seqs(o.n);
  const bool stream = !o.json && o.n == 1;
  if (stream) out << o.prompt << std::flush;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.index() < 0 || response.index() >= o.n) continue;
    Sequence& seq = seqs[response.index()];
    seq.output_ids.insert(seq.output_ids.end(), response.token_ids().begin(),
                          response.token_ids().end());
    seq.text += response.text();
    if (!response.finish_reason().empty()) seq.finish_reason = response.finish_reason();
    if (response.prompt_token_ids_size() > 0) {
      seq.prompt_ids.assign(response.prompt_token_ids().begin(), response.prompt_token_ids().end());
    }
    if (stream) out << response.text() << std::flush;
  }
  const grpc::Status status = reader->Finish();
  if (stream) out << "\n";
  if (!status.ok()) {
    err << "error: " << status.error_message() << " (" << status.error_code() << ")\n";
    return 1;
  }
  for (const Sequence& seq : seqs) {
    if (o.json) {
      out << "{\"prompt_ids\":" << JsonIntArray(seq.prompt_ids)
          << ",\"output_ids\":" << JsonIntArray(seq.output_ids)
          << ",\"text\":" << JsonQuote(seq.text) << ",\"finish_reason\":\"" << seq.finish_reason
          << "\"}\n";
    } else if (!stream) {
      out << o.prompt << seq.text << "\n\n";
    }
  }
  return 0;
}

}  // namespace pagoda
