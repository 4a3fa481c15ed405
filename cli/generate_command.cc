#include "cli/generate_command.h"

#include <chrono>
#include <thread>

#include "common/json_writer.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda {

namespace {

struct Sequence {
  std::vector<int> prompt_ids, output_ids;
  std::string text, finish_reason;
};

struct Result {
  grpc::Status status;
  std::vector<Sequence> seqs;  // (n)
};

// One streaming call; `echo` (if set) gets the text as it arrives.
Result GenerateOne(v1::Generation::Stub& stub, const GenerateOptions& o, const std::string& prompt,
                   std::ostream* echo) {
  v1::GenerateRequest request;
  request.set_prompt(prompt);
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
      stub.Generate(&context, request);
  Result result;
  result.seqs.resize(o.n);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.index() < 0 || response.index() >= o.n) continue;
    Sequence& seq = result.seqs[response.index()];
    seq.output_ids.insert(seq.output_ids.end(), response.token_ids().begin(),
                          response.token_ids().end());
    seq.text += response.text();
    if (!response.finish_reason().empty()) seq.finish_reason = response.finish_reason();
    if (response.prompt_token_ids_size() > 0) {
      seq.prompt_ids.assign(response.prompt_token_ids().begin(), response.prompt_token_ids().end());
    }
    if (echo != nullptr) *echo << response.text() << std::flush;
  }
  result.status = reader->Finish();
  return result;
}

}  // namespace

int GenerateCommand(const GenerateOptions& o, std::ostream& out, std::ostream& err) {
  auto stub =
      v1::Generation::NewStub(grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials()));
  const bool stream = !o.json && o.n == 1 && o.prompts.size() == 1;
  std::vector<Result> results(o.prompts.size());
  if (stream) {
    out << o.prompts[0] << std::flush;
    results[0] = GenerateOne(*stub, o, o.prompts[0], &out);
    out << "\n";
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
      err << "error: prompt " << i + 1 << ": " << r.status.error_message() << " ("
          << r.status.error_code() << ")\n";
      if (o.json) out << "{\"error\":" << JsonQuote(r.status.error_message()) << "}\n";
      continue;
    }
    for (const Sequence& seq : r.seqs) {
      if (o.json) {
        out << "{\"prompt_ids\":" << JsonIntArray(seq.prompt_ids)
            << ",\"output_ids\":" << JsonIntArray(seq.output_ids)
            << ",\"text\":" << JsonQuote(seq.text) << ",\"finish_reason\":\"" << seq.finish_reason
            << "\"}\n";
      } else if (!stream) {
        out << o.prompts[i] << seq.text << "\n\n";
      }
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace pagoda
