// pagoda-router: the flags as RouterServerOptions, then a RouterServer (router/router_server.h):
// the public pagoda.v1.Generation service on --port, workers on --worker-port, the OpenAI API
// on --http-port (8000), and --spawn-workers=N local pagoda-worker processes: the one-command
// deployment. SIGTERM or SIGINT: RouterServer::Shutdown (readiness NOT_SERVING, new calls
// refused, the streams in flight get up to --shutdown-grace-s), then exit 0. A command line
// that can never work exits 2, a router that cannot start 1.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/dtype_flags.h"
#include "common/process/command_line.h"
#include "common/process/secret.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "router/api/openai/openai_embeddings.h"
#include "router/router_server.h"
#include "router/spec/speculative.h"

ABSL_FLAG(int, port, 50051, "public port (pagoda.v1.Generation, grpc.health.v1)");
ABSL_FLAG(int, worker_port, 50052, "port workers dial");
ABSL_FLAG(int, http_port, 8000, "OpenAI-compatible HTTP API (/v1/...); 0 = off");
ABSL_FLAG(bool, no_web_ui, false, "do not serve the web page at / on --http-port (404 there)");
ABSL_FLAG(std::string, allowed_origins, "",
          "CORS for browsers on --http-port: origins that may call it, comma-separated "
          "(https://app.example,http://localhost:3000) or *; empty = CORS off");
ABSL_FLAG(std::string, allowed_methods, "*", "CORS: methods a preflight may ask for; * = any");
ABSL_FLAG(std::string, allowed_headers, "*", "CORS: headers a preflight may ask for; * = any");
ABSL_FLAG(bool, allow_credentials, false,
          "CORS: browsers may send cookies and Authorization (the origin is echoed, never *)");
ABSL_FLAG(std::string, chat_template, "",
          "Jinja chat template file for /v1/chat/completions; default: the model's own");
ABSL_FLAG(std::string, tool_call_parser, "auto",
          "how chat outputs' tool calls are parsed: hermes, llama3_json, mistral, none; auto = "
          "detected from the chat template");
ABSL_FLAG(std::string, reasoning_parser, "auto",
          "<think> blocks as reasoning_content: qwen3, deepseek_r1, none; auto = detected from "
          "the chat template");
ABSL_FLAG(std::string, pooling, "last",
          "/v1/embeddings: last (the last token's hidden state) | mean (over the tokens); "
          "either L2-normalized");
ABSL_FLAG(std::string, host, "0.0.0.0", "address to listen on");
ABSL_FLAG(std::string, model, "",
          "a GGUF file, a llama2.c checkpoint (.bin, with tokenizer.bin beside it) or a Hugging "
          "Face model directory; workers must serve the same. Repeat it as --model=NAME=PATH to "
          "serve several models: a request's `model` picks one (the first by default), each "
          "worker serves the one its files are");
ABSL_FLAG(std::string, tokenizer, "", "tokenizer file; default: the model's");
ABSL_FLAG(std::string, served_model_name, "",
          "the name in GetModelInfo and the metrics' model_name label; default: the model's "
          "file name without extension, or its directory's name");
ABSL_FLAG(int, spawn_workers, 0,
          "start this many local workers as child processes (for each --model)");
ABSL_FLAG(std::string, worker_kv_cache_mb, "auto",
          "--kv-cache-mb of spawned workers; auto: they share half the memory available");
// The help texts built by absl::StrCat live until ABSL_FLAG has copied them (a default
// argument's temporary lasts for the whole call), which clang-tidy's dangling-handle check
// cannot see.
ABSL_FLAG(std::string, worker_weight_dtype, "auto",
          // NOLINTNEXTLINE(bugprone-dangling-handle): see above
          absl::StrCat("--weight-dtype of spawned workers: ", pagoda::WeightDtypeChoices()));
ABSL_FLAG(std::string, worker_compute_dtype, "auto",
          // NOLINTNEXTLINE(bugprone-dangling-handle): see above
          absl::StrCat("--compute-dtype of spawned workers: ", pagoda::ComputeDtypeChoices()));
ABSL_FLAG(std::string, worker_kv_cache_dtype, "auto",
          // NOLINTNEXTLINE(bugprone-dangling-handle): see above
          absl::StrCat("--kv-cache-dtype of spawned workers: ", pagoda::KvDtypeChoices()));
ABSL_FLAG(std::string, worker_kv_cache_dir, "",
          "--kv-cache-dir of spawned workers: worker i keeps its KV blocks in DIR/worker-i across "
          "restarts; \"\" = off");
ABSL_FLAG(int, worker_threads, 0, "--threads of spawned workers; 0 = the cores split between them");
ABSL_FLAG(std::string, lora_modules, "",
          "NAME=PATH, or MODEL:NAME=PATH with several models: a LoRA adapter (a PEFT directory or "
          "a GGUF LoRA file) of the model, loaded by its spawned workers; requests name it as "
          "their model. Repeat the flag for several");
ABSL_FLAG(int, max_loras, 4, "spawned workers' --max-loras: distinct LoRA adapters in one step");
ABSL_FLAG(int, max_cpu_loras, 8,
          "spawned workers' --max-cpu-loras: LoRA adapters held in memory (at least --max-loras)");
ABSL_FLAG(std::string, lora_dtype, "auto",
          "spawned workers' --lora-dtype: f32, bf16 (half the bytes each step reads), or auto: "
          "f32 over a model stored in f32, bf16 over any other");
ABSL_FLAG(bool, allow_runtime_lora_updating, false,
          "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's API; behind "
          "--api-key): adapters loaded at run time must lie in --lora-dir, else in the "
          "--lora-modules paths' directories");
ABSL_FLAG(std::string, lora_dir, "",
          "the directory LoRA adapter paths must lie in (spawned workers' --lora-dir); empty: "
          "each --lora-modules path's own directory");
ABSL_FLAG(std::string, placement, "prefix", "prefix | round_robin | least_loaded");
ABSL_FLAG(bool, kv_transfer, true,
          "pull a prompt's cached prefix from the worker that has it instead of computing it, and "
          "move a draining worker's sequences with their KV (workers with --kv-transfer-port)");
ABSL_FLAG(int, kv_transfer_min_tokens, 32, "pull a prefix only when it spares this many tokens");
ABSL_FLAG(double, kv_transfer_max_wait_s, 60.0,
          "a request waits at most this (and at most 3 times its own measured prefill time of "
          "it) for another worker to compute or hold its prefix, then computes it where it was "
          "placed");
ABSL_FLAG(int, max_model_len, 0, "prompt + output tokens per sequence; 0 = the model's context");
ABSL_FLAG(std::string, rope_scaling, "",
          "RoPE scaling to stretch the model's context, as config.json's rope_scaling, e.g. "
          "'{\"rope_type\":\"yarn\",\"factor\":4,\"original_max_position_embeddings\":32768}' "
          "(linear, llama3 or yarn; the context becomes original x factor, what --max-model-len "
          "may then ask for); passed to spawned workers, remote ones need the same; \"\": the "
          "model's own");
ABSL_FLAG(int, max_num_batched_tokens, 512,
          "tokens per step and worker: a longer prompt is prefilled in chunks, and a chunk holds "
          "every decode of its step (docs/BENCHMARKS.md §8)");
ABSL_FLAG(int, max_num_seqs, 256, "sequences per step and worker");
ABSL_FLAG(int, max_waiting, 1024,
          "requests waiting for a worker (a prompt of a call is one, whatever its n) before "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(double, heartbeat_timeout_s, 5.0, "a worker silent this long is dead");
ABSL_FLAG(std::string, kv_reservation, "on-demand",
          "on-demand: KV blocks as tokens arrive (paged); max-len: prompt + max_tokens reserved "
          "at admission (the contiguous baseline)");
ABSL_FLAG(bool, enable_prefix_caching, true, "reuse cached KV blocks of shared prompt prefixes");
ABSL_FLAG(std::string, speculative, "suffix",
          "speculative decoding: off | ngram (drafts from the sequence's own prompt and output) | "
          "suffix (recent outputs of all requests when they match, else ngram); drafts go only "
          "where they are expected to pay for their measured cost");
ABSL_FLAG(int, num_speculative_tokens, 8, "draft tokens per sequence and step, at most");
ABSL_FLAG(int, speculative_max_step_tokens, 16,
          "until a worker's step times are measured, drafts are added while a step has fewer "
          "query tokens than this");
ABSL_FLAG(int, metrics_port, 0,
          "serve Prometheus metrics at http://HOST:PORT/metrics and readiness at /health; 0 = off");
ABSL_FLAG(double, shutdown_grace_s, 25.0, "on SIGTERM, how long in-flight streams may take");
ABSL_FLAG(
    std::string, worker_token, "",
    "the cluster's secret: workers must present it to connect (default: $PAGODA_WORKER_TOKEN; "
    "if neither is set, a random one for --spawn-workers only)");
ABSL_FLAG(bool, insecure_worker_port, false,
          "accept any worker that reaches --worker-port, without a token");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate: TLS on --worker-port (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA: with --tls-cert, workers must present a client certificate it signed (mTLS)");
ABSL_FLAG(std::string, api_key, "",
          "every public call must carry authorization: Bearer KEY (default: $PAGODA_API_KEY; "
          "none = open). Health and reflection stay open");
ABSL_FLAG(double, step_timeout_s, 30.0,
          "a worker that does not answer a step this long is failed over like a dead one");
ABSL_FLAG(int, max_streams_per_connection, 256,
          "concurrent calls on one client connection; more wait in the client");
// Hostile clients on the gRPC side (issue 23).
ABSL_FLAG(double, stall_timeout_s, 60.0,
          "a call whose client reads nothing this long (paused, its output unsent) is cancelled");
ABSL_FLAG(int, max_paused_per_connection, 64,
          "paused sequences (calls whose output is not read) per client connection; past it the "
          "oldest paused call there is cancelled (0: no cap)");
ABSL_FLAG(int, max_paused_per_client, 256,
          "paused sequences per client IP address, over all its connections (0: no cap)");
ABSL_FLAG(std::string, h2_proxy, "auto",
          "HTTP/2 flood guard: auto = the HAProxy tools/setup.sh installs (/usr/sbin/haproxy) "
          "serves --port and forwards to the router on a loopback port, bounding rapid reset and "
          "CONTINUATION floods (gRPC 1.51 does not); none installed: served directly, with a "
          "warning | off = the router serves --port itself (behind another proxy, or trusted "
          "clients) | a path = that haproxy executable");
ABSL_FLAG(int, h2_proxy_max_requests_per_s, 200,
          "--h2-proxy: requests a second from one client address before HTTP 429 (gRPC "
          "UNAVAILABLE), and at most 64 connections from it; 127.0.0.1 and ::1 are not "
          "limited; 0 = no limit");
ABSL_FLAG(int, max_paused_sequences, 4096,
          "paused sequences over the whole router, whoever holds them; past it the oldest paused "
          "call is cancelled (0: no cap)");
ABSL_FLAG(bool, enable_reflection, false,
          "serve gRPC server reflection on --port (lists pagoda.v1.Generation and health only)");

namespace {

pagoda::ProgramUsage Usage() {
  return {
      "pagoda-router",
      "pagoda-router --model=M [--port=50051 --worker-port=50052] [--spawn-workers=N] [flags]\n"
      "pagoda-router --model=NAME=PATH --model=NAME2=PATH2 ... (several models, one endpoint)\n"
      "Serves pagoda.v1.Generation (and grpc.health.v1) on --port, the OpenAI API on --http-port;\n"
      "workers dial --worker-port.\n",
      {
          {"Model",
           {"model", "tokenizer", "served_model_name", "max_model_len", "rope_scaling",
            "chat_template", "tool_call_parser", "reasoning_parser", "pooling"}},
          {"Network", {"host", "port", "http_port", "no_web_ui", "worker_port", "metrics_port"}},
          {"Browsers (CORS)",
           {"allowed_origins", "allowed_methods", "allowed_headers", "allow_credentials"}},
          {"Local workers",
           {"spawn_workers", "worker_kv_cache_mb", "worker_kv_cache_dtype", "worker_threads",
            "worker_weight_dtype", "worker_compute_dtype", "worker_kv_cache_dir"}},
          {"Scheduling",
           {"placement", "kv_transfer", "kv_transfer_min_tokens", "kv_transfer_max_wait_s",
            "max_num_batched_tokens", "max_num_seqs", "max_waiting", "kv_reservation",
            "enable_prefix_caching"}},
          {"Failure and shutdown", {"heartbeat_timeout_s", "step_timeout_s", "shutdown_grace_s"}},
          {"Security",
           {"worker_token", "insecure_worker_port", "tls_cert", "tls_key", "tls_ca", "api_key",
            "max_streams_per_connection", "h2_proxy", "h2_proxy_max_requests_per_s"}},
          {"Hostile clients",
           {"stall_timeout_s", "max_paused_per_connection", "max_paused_per_client",
            "max_paused_sequences", "enable_reflection"}},
      }};
}

// --chat-template's file, parsed: a template that cannot be read or does not parse is a bad
// flag. Unset for an empty file (the model's own is used).
absl::StatusOr<std::optional<pagoda::jinja::ChatTemplate>> ReadChatTemplate(
    const std::string& path, std::string* source_out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--chat-template: cannot read ", path));
  std::string& source = *source_out;
  source.assign(std::istreambuf_iterator<char>(in), {});
  if (source.empty()) return std::nullopt;
  ASSIGN_OR_RETURN(pagoda::jinja::ChatTemplate parsed, pagoda::jinja::ChatTemplate::Create(source));
  return parsed;
}

// One --model value: NAME=PATH when it has an `=` with a name before it that is no path (no
// `/`), else a PATH alone (named after its file).
pagoda::ModelHostOptions ParseModelFlag(const std::string& value) {
  const size_t equals = value.find('=');
  if (equals == std::string::npos || equals == 0 || value.find('/') < equals ||
      equals + 1 == value.size()) {
    return {.path = value};
  }
  return {.path = value.substr(equals + 1), .name = value.substr(0, equals)};
}

// --model, given once (with the flags that go with one model) or several times.
absl::Status SetModels(const std::vector<std::string>& values, pagoda::RouterServerOptions* o) {
  o->tokenizer = absl::GetFlag(FLAGS_tokenizer);
  o->served_model_name = absl::GetFlag(FLAGS_served_model_name);
  if (values.size() > 1) {
    for (const std::string& value : values) o->models.push_back(ParseModelFlag(value));
    return absl::OkStatus();
  }
  pagoda::ModelHostOptions one = ParseModelFlag(absl::GetFlag(FLAGS_model));
  o->model = one.path;
  if (!one.name.empty()) {
    if (!o->served_model_name.empty()) {
      return absl::InvalidArgumentError(
          "--served-model-name: the model is already named by --model=NAME=PATH");
    }
    o->served_model_name = one.name;
  }
  return absl::OkStatus();
}

// The flags as RouterServerOptions; INVALID_ARGUMENT (or NOT_FOUND for a file named by a flag)
// when they can never work.
absl::StatusOr<pagoda::RouterServerOptions> OptionsFromFlags(int argc, char** argv) {
  pagoda::RouterServerOptions o;
  RETURN_IF_ERROR(SetModels(pagoda::RepeatedFlagValues(argc, argv, "model"), &o));
  o.rope_scaling = absl::GetFlag(FLAGS_rope_scaling);
  if (const std::string path = absl::GetFlag(FLAGS_chat_template); !path.empty()) {
    ASSIGN_OR_RETURN(o.chat_template, ReadChatTemplate(path, &o.chat_template_source));
  }
  if (const std::string name = absl::GetFlag(FLAGS_tool_call_parser); name != "auto") {
    absl::StatusOr<pagoda::ToolCallFormat> format = pagoda::ToolCallFormatFromName(name);
    if (!format.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--tool-call-parser: ", format.status().message()));
    o.tool_call_format = *format;
  }
  if (const std::string name = absl::GetFlag(FLAGS_reasoning_parser); name != "auto") {
    absl::StatusOr<pagoda::ReasoningFormat> format = pagoda::ReasoningFormatFromName(name);
    if (!format.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("--reasoning-parser: ", format.status().message()));
    o.reasoning_format = *format;
  }

  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.worker_port = absl::GetFlag(FLAGS_worker_port);
  o.http_port.reset();
  if (const int port = absl::GetFlag(FLAGS_http_port); port > 0) o.http_port = port;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port > 0) o.metrics_port = port;
  ASSIGN_OR_RETURN(o.cors, pagoda::ParseCorsOptions(absl::GetFlag(FLAGS_allowed_origins),
                                                    absl::GetFlag(FLAGS_allowed_methods),
                                                    absl::GetFlag(FLAGS_allowed_headers),
                                                    absl::GetFlag(FLAGS_allow_credentials)));
  o.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  ASSIGN_OR_RETURN(o.pooling, pagoda::ParsePooling(absl::GetFlag(FLAGS_pooling)));

  pagoda::EngineOptions& engine = o.cluster.engine;
  engine.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  engine.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  engine.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  ASSIGN_OR_RETURN(engine.speculative.method,
                   pagoda::ParseSpeculativeMethod(absl::GetFlag(FLAGS_speculative)));
  engine.speculative.num_speculative_tokens = absl::GetFlag(FLAGS_num_speculative_tokens);
  engine.speculative.max_step_tokens = absl::GetFlag(FLAGS_speculative_max_step_tokens);
  RETURN_IF_ERROR(pagoda::ValidateSpeculativeOptions(engine.speculative));
  o.cluster.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  const std::string reservation = absl::GetFlag(FLAGS_kv_reservation);
  if (reservation == "max-len") {
    engine.kv_reservation = pagoda::KvReservation::kMaxLen;
  } else if (reservation != "on-demand") {
    return absl::InvalidArgumentError("--kv-reservation must be on-demand or max-len");
  }
  o.cluster.kv_transfer = absl::GetFlag(FLAGS_kv_transfer);
  o.cluster.kv_transfer_min_tokens = absl::GetFlag(FLAGS_kv_transfer_min_tokens);
  if (o.cluster.kv_transfer_min_tokens < 0) {
    return absl::InvalidArgumentError("--kv-transfer-min-tokens must be >= 0");
  }
  const double max_wait = absl::GetFlag(FLAGS_kv_transfer_max_wait_s);
  if (!(max_wait >= 0 && max_wait <= 3600)) {
    return absl::InvalidArgumentError("--kv-transfer-max-wait-s must be in [0, 3600]");
  }
  o.cluster.kv_transfer_max_wait = absl::Seconds(max_wait);
  const std::string placement = absl::GetFlag(FLAGS_placement);
  if (placement == "round_robin") {
    o.cluster.placement = pagoda::PlacementPolicy::kRoundRobin;
  } else if (placement == "least_loaded") {
    o.cluster.placement = pagoda::PlacementPolicy::kLeastLoaded;
  } else if (placement != "prefix") {
    return absl::InvalidArgumentError("--placement must be prefix, round_robin or least_loaded");
  }
  o.heartbeat_timeout = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_timeout_s));
  o.step_timeout = absl::Seconds(absl::GetFlag(FLAGS_step_timeout_s));
  o.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_s));

  o.worker_token =
      pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_worker_token), pagoda::kWorkerTokenEnv);
  o.insecure_worker_port = absl::GetFlag(FLAGS_insecure_worker_port);
  ASSIGN_OR_RETURN(o.worker_tls,
                   pagoda::ReadTlsPem(absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                                      absl::GetFlag(FLAGS_tls_ca)));
  o.api_key = pagoda::SecretFromFlagOrEnv(absl::GetFlag(FLAGS_api_key), pagoda::kApiKeyEnv);
  o.cluster.stall_timeout = absl::Seconds(absl::GetFlag(FLAGS_stall_timeout_s));
  o.cluster.paused_caps = {.max_per_connection = absl::GetFlag(FLAGS_max_paused_per_connection),
                           .max_per_client = absl::GetFlag(FLAGS_max_paused_per_client),
                           .max_total = absl::GetFlag(FLAGS_max_paused_sequences)};
  o.enable_reflection = absl::GetFlag(FLAGS_enable_reflection);
  o.web_ui = !absl::GetFlag(FLAGS_no_web_ui);
  ASSIGN_OR_RETURN(o.h2_proxy, pagoda::ResolveH2Proxy(absl::GetFlag(FLAGS_h2_proxy)));
  if (o.h2_proxy.empty() && absl::GetFlag(FLAGS_h2_proxy) == "auto") {
    LOG(WARNING) << "--h2-proxy=auto: " << pagoda::kDefaultHaproxy
                 << " is not installed (tools/setup.sh installs it)";
  }
  o.h2_proxy_max_requests_per_s = absl::GetFlag(FLAGS_h2_proxy_max_requests_per_s);
  if (o.h2_proxy_max_requests_per_s < 0) {
    return absl::InvalidArgumentError("--h2-proxy-max-requests-per-s must be >= 0");
  }

  o.local_workers.num_workers = absl::GetFlag(FLAGS_spawn_workers);
  // Beside this executable (/proc/self/exe: argv[0] is a bare name when started through PATH,
  // and execve does not search PATH).
  std::error_code self_error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", self_error);
  if (self_error) self = argv[0];
  o.local_workers.binary = (self.parent_path() / "pagoda-worker").string();
  o.local_workers.kv_cache_mb = absl::GetFlag(FLAGS_worker_kv_cache_mb);
  o.local_workers.weight_dtype = absl::GetFlag(FLAGS_worker_weight_dtype);
  o.local_workers.kv_cache_dtype = absl::GetFlag(FLAGS_worker_kv_cache_dtype);
  o.local_workers.compute_dtype = absl::GetFlag(FLAGS_worker_compute_dtype);
  o.local_workers.threads = absl::GetFlag(FLAGS_worker_threads);
  o.local_workers.kv_cache_dir = absl::GetFlag(FLAGS_worker_kv_cache_dir);
  o.lora_modules = pagoda::RepeatedFlagValues(argc, argv, "lora_modules");
  o.local_workers.max_loras = absl::GetFlag(FLAGS_max_loras);
  o.local_workers.max_cpu_loras = absl::GetFlag(FLAGS_max_cpu_loras);
  o.local_workers.lora_dir = absl::GetFlag(FLAGS_lora_dir);
  o.local_workers.lora_dtype = absl::GetFlag(FLAGS_lora_dtype);
  if (const std::string& d = o.local_workers.lora_dtype; d != "auto" && d != "f32" && d != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora-dtype=", d, ": expected auto, f32 or bf16"));
  }
  o.allow_runtime_lora_updating = absl::GetFlag(FLAGS_allow_runtime_lora_updating);
  if (o.local_workers.max_loras < 1 || o.local_workers.max_loras > 1024 ||
      o.local_workers.max_cpu_loras < o.local_workers.max_loras ||
      o.local_workers.max_cpu_loras > 1024) {
    return absl::InvalidArgumentError(
        "--max-loras must be in [1, 1024] and --max-cpu-loras in [--max-loras, 1024]");
  }
  RETURN_IF_ERROR(pagoda::RouterServer::CheckOptions(o));
  return o;
}

// Idle connections each hold a descriptor: the common soft limit of 1024 runs out long before
// the hard one, and gRPC's listener does not recover from EMFILE.
void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  const rlim_t before = limit.rlim_cur;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
    LOG(INFO) << "file descriptor limit raised from " << before << " to " << limit.rlim_max;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Termination signals are taken by a thread of ours (sigwait), never by a handler: block
  // them before any other thread exists, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Two malloc arenas, not 8 per core: with them the memory a burst of large HTTP bodies
  // took goes back to the system (GuardedHttpServer trims after each; measured in issue 23:
  // 32 x 30 MiB bodies left 464 MiB resident with the default arenas, 63 MiB with two).
  mallopt(M_ARENA_MAX, 2);
  // Blocks of 1 MiB and more straight from mmap, returned when freed: glibc's threshold
  // otherwise grows to 32 MiB after the first large free, and a list that doubles as a body is
  // parsed (request_json.h) then leaves each smaller copy resident in the heap (a 30 MiB body of
  // token ids peaked at 4.2x its size, 3.1x with this).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#ifdef NDEBUG
  // Debian's Abseil is built with its Mutex deadlock detection on: every lock and unlock
  // updates a global acquisition graph (GraphCycles), which took 8% of a busy router's CPU and
  // lengthened every hold of the Cluster's lock (issue 38, BENCHMARKS §30). Release binaries
  // leave it off; tests and debug builds keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif

  pagoda::ParseCommandLine(argc, argv, Usage());
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  RaiseFileLimit();
  absl::StatusOr<pagoda::RouterServerOptions> options = OptionsFromFlags(argc, argv);
  const bool flags_ok = options.ok();
  absl::StatusOr<std::unique_ptr<pagoda::RouterServer>> server =
      flags_ok ? pagoda::RouterServer::Start(*std::move(options)) : options.status();
  if (!server.ok()) {
    std::cerr << "error: " << server.status().message() << "\n";
    return flags_ok ? 1 : 2;  // 2: the command line itself is wrong
  }
  std::thread stopper([&stop_signals, &server] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    LOG(INFO) << "signal " << signal << ": shutting down";
    (*server)->Shutdown();
  });
  (*server)->Run();
  stopper.join();
  return 0;
}
