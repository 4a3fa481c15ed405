#include "cli/run_command.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/model/model_loader.h"
#include "common/status_macros.h"
#include "lib/text/incremental_decoder.h"
#include "lib/text/tokenizer_loader.h"
#include "router/api/request_policy.h"
#include "router/core/model_length.h"
#include "worker/in_process_executor.h"

namespace pagoda {
namespace {

struct Output {
  std::vector<int> output_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  int num_cached_tokens = 0;
  std::unique_ptr<IncrementalDecoder> decoder;
};

struct PromptResult {
  std::vector<int> prompt_ids;
  std::string error;
  std::vector<Output> outputs;  // (n)
};

void PrintJson(const PromptResult& r, std::ostream& out) {
  if (!r.error.empty()) {
    out << JsonDump(OrderedJson{{"prompt_ids", r.prompt_ids}, {"error", r.error}}) << "\n";
    return;
  }
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const Output& o = r.outputs[i];
    OrderedJson j = {{"prompt_ids", r.prompt_ids},
                     {"output_ids", o.output_ids},
                     {"text", o.text},
                     {"finish_reason", FinishReasonName(o.finish_reason)}};
    if (r.outputs.size() > 1) j["index"] = i;
    out << JsonDump(j) << "\n";
  }
}

}  // namespace

int RunOffline(const RunOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::unique_ptr<WeightSource>> weights = OpenWeightSource(options.model);
  if (!weights.ok()) {
    err << "error: " << weights.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = (*weights)->ApplyRopeScaling(options.worker.rope_scaling); !s.ok()) {
    err << "error: " << s.message() << "\n";
    return 1;
  }
  const ModelConfig config = (*weights)->config();
  if (absl::Status length = CheckMaxModelLen(options.engine.max_model_len, config); !length.ok()) {
    err << "error: " << length.message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      LoadModelTokenizer(options.model, options.tokenizer, config);
  if (!tokenizer.ok()) {
    err << "error: " << tokenizer.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<WorkerEngine>> worker =
      WorkerEngine::Create(**weights, options.worker);
  weights->reset();  // the file's mapping
  if (!worker.ok()) {
    err << "error: " << worker.status().message() << "\n";
    return 1;
  }
  InProcessExecutor executor(*std::move(worker));
  Engine engine(config, &executor, options.engine);

  // Sampling fields the user left unset: the model's defaults, as the router fills them for
  // `pagoda generate`; but an offline run repeats itself unless --seed says otherwise.
  SamplingOverrides set = options.overrides;
  set.seed = options.sampling.seed;
  const SamplingParams sampling = ResolveSampling(set, config, options.sampling);

  // Queues one prompt (its ids go to `prompt_ids`) with the job's settings.
  // A prompt's index is its request id.
  auto add_prompt = [&](int64_t id, const std::string& prompt,
                        std::vector<int>* prompt_ids) -> absl::Status {
    ASSIGN_OR_RETURN(*prompt_ids, EncodePrompt(**tokenizer, prompt, engine.max_model_len()));
    GenerationRequest request;
    request.prompt_ids = *prompt_ids;
    request.sampling = sampling;
    request.max_tokens = options.max_tokens;
    request.n = options.n;
    request.ignore_eos = options.ignore_eos;
    return engine.AddRequest(id, request);
  };

  std::vector<PromptResult> results(options.prompts.size());
  for (size_t i = 0; i < options.prompts.size(); ++i) {
    PromptResult& r = results[i];
    if (absl::Status added = add_prompt(static_cast<int64_t>(i), options.prompts[i], &r.prompt_ids);
        !added.ok()) {
      r.error = std::string(added.message());
      err << "error: prompt " << i + 1 << ": " << r.error << "\n";
      continue;
    }
    r.outputs.resize(options.n);
    for (Output& o : r.outputs) {
      o.decoder = std::make_unique<IncrementalDecoder>(tokenizer->get(), r.prompt_ids.back());
    }
  }
  // One prompt in text mode streams as it generates; otherwise print when all are done.
  const bool stream =
      !options.json && options.prompts.size() == 1 && options.n == 1 && results[0].error.empty();
  if (stream) out << options.prompts[0] << std::flush;

  while (engine.has_unfinished()) {
    absl::StatusOr<std::vector<SequenceUpdate>> updates = engine.Step();
    if (!updates.ok()) {
      err << "error: " << updates.status().message() << "\n";
      return 1;
    }
    for (const SequenceUpdate& u : *updates) {
      Output& o = results[u.request_id].outputs[u.seq_index];
      for (int id : u.token_ids) {
        o.output_ids.push_back(id);
        // A stop token ends the sequence but is not part of its text.
        if (u.finish_reason == FinishReason::kStop) continue;
        const std::string piece = o.decoder->Append(id);
        o.text += piece;
        if (stream) out << piece << std::flush;
      }
      if (u.finished) {
        o.finish_reason = u.finish_reason;
        const std::string rest = o.decoder->Flush();
        o.text += rest;
        if (stream) out << rest << "\n";
      }
    }
  }
  bool all_ok = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const PromptResult& r = results[i];
    all_ok = all_ok && r.error.empty();
    if (options.json) {
      PrintJson(r, out);
    } else if (!stream && r.error.empty()) {
      for (const Output& o : r.outputs) out << options.prompts[i] << o.text << "\n\n";
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace pagoda
