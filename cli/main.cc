// pagoda: the command-line tool. `pagoda run` (offline, in-process); `generate` and `bench`
// talk to a router; `tokenize` to a tokenizer file (DESIGN §9).
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/bench_command.h"
#include "cli/generate_command.h"
#include "cli/render_template_command.h"
#include "cli/run_command.h"
#include "cli/serve_command.h"
#include "cli/tokenize_command.h"
#include "common/process/command_line.h"
#include "common/process/secret.h"
#include "glog/logging.h"
#include "worker/worker_flags.h"
#include "worker/worker_options.h"

ABSL_FLAG(std::string, model, "",
          "a GGUF file, a llama2.c checkpoint (.bin, with tokenizer.bin beside it) or a Hugging "
          "Face model directory (config.json, *.safetensors, tokenizer.json)");
ABSL_FLAG(std::string, tokenizer, "",
          "tokenizer.bin, tokenizer.json or a directory holding one; default: the model's");
ABSL_FLAG(std::string, prompt, "", "one prompt");
ABSL_FLAG(std::string, prompts_file, "", "a file with one prompt per line, run as one batch");
ABSL_FLAG(std::string, text, "", "tokenize: the text to encode");
ABSL_FLAG(std::string, texts_file, "", "tokenize: a JSON array of strings");
ABSL_FLAG(int, max_tokens, 0, "output tokens per sequence at most; 0 = up to the model length");
// Unset (std::nullopt): the model's generation_config.json value, else the value in the help.
ABSL_FLAG(std::optional<double>, temperature, std::nullopt,
          "0 = greedy; default: the model's (generation_config.json), else 1");
ABSL_FLAG(std::optional<double>, top_p, std::nullopt,
          "nucleus sampling mass, in (0, 1]; default: the model's, else 1 (off)");
ABSL_FLAG(std::optional<int>, top_k, std::nullopt,
          "keep the k most likely tokens; default: the model's, else 0 (off)");
ABSL_FLAG(double, min_p, 0.0, "drop tokens below min_p x the top probability");
ABSL_FLAG(std::optional<double>, repetition_penalty, std::nullopt,
          "> 1 discourages tokens already in prompt or output; default 1 (off)");
ABSL_FLAG(double, presence_penalty, 0.0, "in [-2, 2]");
ABSL_FLAG(double, frequency_penalty, 0.0, "in [-2, 2]");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "sampling seed: the same seed gives the same tokens (generate: unset = the router "
          "draws one; run and bench: 0)");
ABSL_FLAG(int, n, 1, "samples per prompt");
ABSL_FLAG(bool, ignore_eos, false, "keep generating past the model's end-of-text tokens");
ABSL_FLAG(bool, json, false, "print one JSON object per output, in input order");
ABSL_FLAG(int, max_model_len, 0, "prompt + output tokens per sequence; 0 = the model's context");
ABSL_FLAG(int, max_num_batched_tokens, 512,
          "tokens per step (chunked-prefill budget; docs/BENCHMARKS.md §8)");
ABSL_FLAG(std::string, server, "127.0.0.1:50051", "the router's public address, HOST:PORT");
// Repeatable: every --stop=S is read from argv (RepeatedFlagValues); Abseil keeps the last.
ABSL_FLAG(std::string, stop, "",
          "a stop string, commas and all; repeat the flag for several (--stop=A --stop=B)");
ABSL_FLAG(std::vector<std::string>, stop_token_ids, {},
          "token ids that end a sequence, comma-separated (--stop-token-ids=1,2)");
ABSL_FLAG(int, logprobs, 0,
          "with --json: the top N alternatives of every generated token, in [0, 20]");
ABSL_FLAG(double, timeout, 600, "deadline of each call, seconds");
ABSL_FLAG(std::string, dataset, "random",
          "random | chat | repeat (a passage, then its start again)");
ABSL_FLAG(int, num_prompts, 100, "requests in all");
ABSL_FLAG(std::string, request_rate, "inf", "arrivals per second (Poisson), or inf");
ABSL_FLAG(int, max_concurrency, 0, "requests in flight at most; 0 = no cap");
ABSL_FLAG(int, input_len, 128, "prompt tokens (chat: tokens per user message)");
ABSL_FLAG(int, output_len, 128, "output tokens of each request");
ABSL_FLAG(double, max_tokens_ratio, 1.0,
          "ask for max_tokens = ratio x output length; the client ends the stream at the "
          "output length");
ABSL_FLAG(double, range_ratio, 0.0, "lengths uniform in [len(1-r), len(1+r)]");
ABSL_FLAG(int, system_prompt_len, 1024, "chat: tokens of the shared system prompt");
ABSL_FLAG(int, turns, 4, "chat: requests per conversation");
ABSL_FLAG(std::string, metrics, "", "the router's metrics HOST:PORT, sampled during the run");
ABSL_FLAG(std::string, backend, "grpc",
          "grpc (the router's --server) | openai (POST --base-url's /v1/completions, streamed)");
ABSL_FLAG(std::string, base_url, "",
          "openai: the server, http://HOST:PORT (e.g. Pagoda's --http-port, llama-server)");
ABSL_FLAG(std::string, model_name, "",
          "openai: the requests' \"model\"; several, comma-separated, are taken in turn (e.g. "
          "LoRA adapters); default: the first of GET /v1/models");
ABSL_FLAG(int, lora_ids, 0,
          "openai, llama-server: each request applies one of its LoRA adapters 0..N-1 in turn "
          "(its per-request \"lora\" field); 0 = none");
ABSL_FLAG(std::string, response_format, "",
          "openai: a JSON object sent as each request's response_format, e.g. "
          "{\"type\":\"json_object\"}");
ABSL_FLAG(std::string, extra_request_body, "",
          "openai: a JSON object whose fields are added to every request (SGLang's bench flag), "
          "e.g. {\"logit_bias\":{\"3\":-100}}; it may not set a field the bench sets itself");
ABSL_FLAG(int, vocab_size, 0,
          "openai: random prompt ids stay below it; default: the server's (/v1/models)");
ABSL_FLAG(std::string, api_key, "",
          "the router's API key, sent as authorization: Bearer KEY; default $PAGODA_API_KEY "
          "(prefer it: flags show in ps)");
ABSL_FLAG(std::string, template_file, "", "a Jinja chat template file");
ABSL_FLAG(std::string, context_file, "", "a JSON object of template variables");
ABSL_FLAG(std::string, now, "",
          "the time strftime_now() formats, e.g. 2026-11-22T00:00:00; default "
          "$PAGODA_TEMPLATE_NOW, else the clock");

namespace {

constexpr char kUsage[] =
    "pagoda <command> [flags]; `pagoda <command> --help` lists that command's flags.\n"
    "  serve     MODEL [flags]: serves MODEL on this machine (the router and local workers,\n"
    "            the OpenAI API on port 8000, gRPC on 50051); every pagoda-router flag works\n"
    "  run       --model=M [--tokenizer=T] (--prompt=TEXT | --prompts-file=F) [sampling]\n"
    "            [--json]: offline, in this process\n"
    "  generate  --server=HOST:PORT (--prompt=TEXT | --prompts-file=F) [sampling]\n"
    "            [--stop=S ...] [--stop-token-ids=1,2] [--logprobs=N] [--json]: a router's client\n"
    "  bench     (--server=HOST:PORT | --backend=openai --base-url=URL [--model-name=M])\n"
    "            [--dataset=random|chat|repeat] [--num-prompts=N]\n"
    "            [--request-rate=R|inf] [--max-concurrency=C] [--input-len=N] [--output-len=N]\n"
    "            [--range-ratio=R] [--max-tokens-ratio=R] [--ignore-eos] [--temperature=0]\n"
    "            [--system-prompt-len=N --turns=T]\n"
    "            [--metrics=HOST:PORT] [--seed=S] [--response-format=JSON] [--json]:\n"
    "            load generator\n"
    "  tokenize  --tokenizer=PATH (--text=S | --texts-file=F.json)\n"
    "  render-template  (--template-file=T | --model=DIR) --context-file=C.json [--now=TIME]:\n"
    "            prints a chat template's rendering\n";

// `pagoda run`'s engine: the worker's own flags (worker_flags.h) and the step budget.
std::vector<std::string> EngineFlags() {
  std::vector<std::string> names = {"max_model_len", "max_num_batched_tokens"};
  for (std::string& name : pagoda::WorkerEngineFlagNames()) names.push_back(std::move(name));
  return names;
}

pagoda::ProgramUsage Usage() {
  return {"pagoda",
          kUsage,
          {
              {"Model", {"model", "tokenizer"}, {"run"}},
              {"Prompts", {"prompt", "prompts_file", "json"}, {"run", "generate"}},
              {"Sampling",
               {"max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                "presence_penalty", "frequency_penalty", "seed", "n", "ignore_eos"},
               {"run", "generate"}},
              {"Engine (run)", EngineFlags(), {"run"}},
              {"Router client (generate, bench)",
               {"server", "api_key", "timeout"},
               {"generate", "bench"}},
              {"Generate", {"stop", "stop_token_ids", "logprobs"}, {"generate"}},
              {"Bench",
               {"backend",
                "base_url",
                "model_name",
                "lora_ids",
                "extra_request_body",
                "vocab_size",
                "dataset",
                "num_prompts",
                "request_rate",
                "max_concurrency",
                "input_len",
                "output_len",
                "range_ratio",
                "max_tokens_ratio",
                "ignore_eos",
                "system_prompt_len",
                "turns",
                "metrics",
                "seed",
                "response_format",
                "temperature",
                "json"},
               {"bench"}},
              {"Tokenize", {"tokenizer", "text", "texts_file"}, {"tokenize"}},
              {"Render template",
               {"template_file", "model", "context_file", "now"},
               {"render-template"}},
          }};
}

pagoda::SamplingParams SamplingFromFlags() {
  pagoda::SamplingParams s;
  s.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  s.presence_penalty = static_cast<float>(absl::GetFlag(FLAGS_presence_penalty));
  s.frequency_penalty = static_cast<float>(absl::GetFlag(FLAGS_frequency_penalty));
  s.seed = absl::GetFlag(FLAGS_seed).value_or(0);
  return s;
}

// The sampling flags whose default is the model's (or the router's): set only if given.
pagoda::SamplingOverrides OverridesFromFlags() {
  pagoda::SamplingOverrides o;
  if (const auto v = absl::GetFlag(FLAGS_temperature)) o.temperature = static_cast<float>(*v);
  if (const auto v = absl::GetFlag(FLAGS_top_p)) o.top_p = static_cast<float>(*v);
  o.top_k = absl::GetFlag(FLAGS_top_k);
  o.seed = absl::GetFlag(FLAGS_seed);
  if (const auto v = absl::GetFlag(FLAGS_repetition_penalty)) {
    o.repetition_penalty = static_cast<float>(*v);
  }
  return o;
}

// --prompt or --prompts-file (one prompt per non-empty line).
bool ReadPrompts(std::vector<std::string>* prompts) {
  const std::string prompt = absl::GetFlag(FLAGS_prompt);
  const std::string prompts_file = absl::GetFlag(FLAGS_prompts_file);
  if (prompt.empty() == prompts_file.empty()) {
    std::cerr << "error: give exactly one of --prompt and --prompts-file\n";
    return false;
  }
  if (!prompt.empty()) {
    prompts->push_back(prompt);
    return true;
  }
  std::ifstream in(prompts_file);
  if (!in) {
    std::cerr << "error: cannot open --prompts-file " << prompts_file << "\n";
    return false;
  }
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts->push_back(line);
  }
  return true;
}

int Run(const std::vector<std::string>& lora_modules) {
  pagoda::RunOptions o;
  o.model = absl::GetFlag(FLAGS_model);
  o.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  if (o.model.empty()) {
    std::cerr << "error: --model is required\n";
    return 2;
  }
  if (!ReadPrompts(&o.prompts)) return 2;
  if (const int max_tokens = absl::GetFlag(FLAGS_max_tokens); max_tokens != 0) {
    o.max_tokens = max_tokens;
  }
  o.n = absl::GetFlag(FLAGS_n);
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  o.json = absl::GetFlag(FLAGS_json);
  o.sampling = SamplingFromFlags();
  o.overrides = OverridesFromFlags();
  absl::StatusOr<pagoda::WorkerOptions> worker = pagoda::WorkerOptionsFromFlags(lora_modules);
  if (!worker.ok()) {
    std::cerr << "error: " << worker.status().message() << "\n";
    return 2;
  }
  o.worker = *worker;
  o.worker.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  o.engine.max_num_batched_tokens = o.worker.max_num_batched_tokens;
  o.engine.max_num_seqs = o.worker.max_num_seqs;
  o.engine.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  return pagoda::RunOffline(o, std::cout, std::cerr);
}

int Generate(const std::vector<std::string>& stops) {
  pagoda::GenerateOptions o;
  o.server = absl::GetFlag(FLAGS_server);
  if (!ReadPrompts(&o.prompts)) return 2;
  if (const int max_tokens = absl::GetFlag(FLAGS_max_tokens); max_tokens != 0) {
    o.max_tokens = max_tokens;
  }
  o.sampling = SamplingFromFlags();
  o.overrides = OverridesFromFlags();
  o.sampling.logprobs = absl::GetFlag(FLAGS_logprobs);
  o.n = absl::GetFlag(FLAGS_n);
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  o.stop = stops;
  for (const std::string& id : absl::GetFlag(FLAGS_stop_token_ids)) {
    int value = 0;
    if (!absl::SimpleAtoi(id, &value)) {
      std::cerr << "error: --stop-token-ids: '" << id << "' is not a token id\n";
      return 2;
    }
    o.stop_token_ids.push_back(value);
  }
  o.json = absl::GetFlag(FLAGS_json);
  o.timeout_s = absl::GetFlag(FLAGS_timeout);
  o.api_key = pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_api_key), pagoda::kApiKeyEnv);
  return pagoda::GenerateCommand(o, std::cout, std::cerr);
}

int Bench() {
  pagoda::BenchOptions o;
  o.backend = absl::GetFlag(FLAGS_backend);
  o.server = absl::GetFlag(FLAGS_server);
  o.base_url = absl::GetFlag(FLAGS_base_url);
  o.model_name = absl::GetFlag(FLAGS_model_name);
  o.lora_ids = absl::GetFlag(FLAGS_lora_ids);
  if (o.lora_ids < 0 || o.lora_ids > 1024) {
    std::cerr << "pagoda bench: --lora-ids must be in [0, 1024]\n";
    return 2;
  }
  o.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  o.response_format = absl::GetFlag(FLAGS_response_format);
  o.extra_request_body = absl::GetFlag(FLAGS_extra_request_body);
  o.api_key = pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_api_key), pagoda::kApiKeyEnv);
  o.dataset = absl::GetFlag(FLAGS_dataset);
  o.num_prompts = absl::GetFlag(FLAGS_num_prompts);
  const std::string rate = absl::GetFlag(FLAGS_request_rate);
  if (rate != "inf" && !absl::SimpleAtod(rate, &o.request_rate)) {
    std::cerr << "error: --request-rate must be a number or inf\n";
    return 2;
  }
  o.max_concurrency = absl::GetFlag(FLAGS_max_concurrency);
  o.temperature = absl::GetFlag(FLAGS_temperature).value_or(0);
  o.input_len = absl::GetFlag(FLAGS_input_len);
  o.output_len = absl::GetFlag(FLAGS_output_len);
  o.max_tokens_ratio = absl::GetFlag(FLAGS_max_tokens_ratio);
  o.range_ratio = absl::GetFlag(FLAGS_range_ratio);
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  o.system_prompt_len = absl::GetFlag(FLAGS_system_prompt_len);
  o.turns = absl::GetFlag(FLAGS_turns);
  o.seed = absl::GetFlag(FLAGS_seed).value_or(0);
  o.metrics = absl::GetFlag(FLAGS_metrics);
  o.json = absl::GetFlag(FLAGS_json);
  o.progress = !o.json && isatty(STDERR_FILENO);
  o.timeout_s = absl::GetFlag(FLAGS_timeout);
  return pagoda::BenchCommand(o, std::cout, std::cerr);
}

int Tokenize() {
  pagoda::TokenizeOptions o;
  o.tokenizer = absl::GetFlag(FLAGS_tokenizer);
  o.text = absl::GetFlag(FLAGS_text);
  o.texts_file = absl::GetFlag(FLAGS_texts_file);
  return pagoda::TokenizeCommand(o, std::cout, std::cerr);
}

int RenderTemplate() {
  pagoda::RenderTemplateOptions o;
  o.template_file = absl::GetFlag(FLAGS_template_file);
  o.model = absl::GetFlag(FLAGS_model);
  o.context_file = absl::GetFlag(FLAGS_context_file);
  o.now = absl::GetFlag(FLAGS_now);
  return pagoda::RenderTemplateCommand(o, std::cout, std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  // `serve` takes pagoda-router's flags, which this binary does not define: it runs the router.
  if (argc > 1 && std::string_view(argv[1]) == "serve") {
    return pagoda::ServeCommand(std::vector<std::string>(argv + 2, argv + argc), std::cerr);
  }
  const std::vector<std::string> args = pagoda::ParseCommandLine(argc, argv, Usage());
  FLAGS_logtostderr = true;
  if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = 1;  // quiet CLI by default
  google::InitGoogleLogging(argv[0]);
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command == "run") return Run(pagoda::RepeatedFlagValues(argc, argv, "lora_modules"));
  if (command == "generate") return Generate(pagoda::RepeatedFlagValues(argc, argv, "stop"));
  if (command == "bench") return Bench();
  if (command == "tokenize") return Tokenize();
  if (command == "render-template") return RenderTemplate();
  std::cerr << kUsage;
  return 2;
}
