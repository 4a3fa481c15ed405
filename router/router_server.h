// The router as one object (what pagoda-router's main runs): the public pagoda.v1.Generation
// service (with grpc.health.v1, and reflection when enabled) on `port`, the WorkerLink stream for
// workers on `worker_port`, the OpenAI-compatible HTTP API, Prometheus metrics, and between them
// one ModelHost per model served (its Cluster, tokenizer, template, metrics and the local workers
// of --spawn-workers); a request's `model` picks one, a worker's Hello its fingerprint.
//
// Health (grpc.health.v1 on `port`): "liveness" is SERVING while the server runs; "" (and
// "pagoda.v1.Generation") is SERVING while at least one worker that is not draining is
// connected (of any model), and the proxy in front of `port` (h2_proxy) runs. Shutdown: readiness
// goes NOT_SERVING, new calls are refused, and the streams in flight get up to `shutdown_grace` to
// finish.
//
//   auto server = RouterServer::Start(options);   // loads, listens, spawns
//   std::thread t([&] { (*server)->Run(); });      // ticks until Shutdown
//   (*server)->Shutdown();                         // from any thread, e.g. on SIGTERM
//
// Thread-safety: Run on one thread, Shutdown from any; the accessors are constant after Start.
#ifndef PAGODA_ROUTER_ROUTER_SERVER_H_
#define PAGODA_ROUTER_ROUTER_SERVER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/process/http_server.h"
#include "common/process/metrics.h"
#include "common/process/secret.h"
#include "lib/jinja/chat_template.h"
#include "lib/text/tokenizer.h"
#include "router/api/openai/cors.h"
#include "router/api/openai/tools/tool_call_format.h"
#include "router/api/served_models.h"
#include "router/core/cluster.h"
#include "router/core/wait_line.h"
#include "router/link/h2_proxy.h"
#include "router/link/local_workers.h"
#include "router/model_host.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace pagoda {

class GenerationService;
struct PublicReflection;
class OpenAiServer;
class WorkerLinkService;

// What pagoda-router's flags of the same names set, with their defaults (cluster's are
// ClusterOptions'; the router's --max-num-batched-tokens is 512). Files the flags name are read
// by the caller: chat_template is parsed, worker_tls holds PEM contents.
struct RouterServerOptions {
  // The models served (--model=NAME=PATH, repeated), the first the default; each takes its own
  // tokenizer, chat template and output formats from its files. Empty: the one model the
  // fields below describe (--model=PATH and the flags that go with it).
  std::vector<ModelHostOptions> models;

  // A GGUF file, a llama2.c checkpoint or a Hugging Face model directory; workers must serve
  // the same.
  std::string model;
  std::string tokenizer;          // "": the model's
  std::string served_model_name;  // "": the model's file name without extension, or its dir's
  // --rope-scaling: JSON as config.json's rope_scaling, applied to the model's own and passed
  // to spawned workers (remote ones must be given the same); "": the model's files decide.
  std::string rope_scaling;
  // For /v1/chat/completions; unset: the model directory's, else the tokenizer file's (GGUF),
  // else chat is refused.
  std::optional<jinja::ChatTemplate> chat_template;
  std::string chat_template_source;  // chat_template's text, for detecting the formats below
  // How chat outputs are parsed (--tool-call-parser, --reasoning-parser); unset: detected
  // from the chat template (what it writes: <tool_call>, [TOOL_CALLS], <think>, ...).
  std::optional<ToolCallFormat> tool_call_format;
  std::optional<ReasoningFormat> reasoning_format;
  // LoRA adapters (--lora-modules: NAME=PATH or MODEL:NAME=PATH, router/lora_modules.h), each
  // checked against its model at start and loaded by the model's spawned workers; requests
  // name an adapter as their model. Paths must lie in local_workers.lora_dir when it is set.
  std::vector<std::string> lora_modules;
  // POST /v1/load_lora_adapter and /v1/unload_lora_adapter on http_port (behind api_key), with
  // paths confined to local_workers.lora_dir, else to the --lora-modules paths' directories.
  bool allow_runtime_lora_updating = false;

  std::string host = "0.0.0.0";
  int port = 50051;                      // 0: any free port (port())
  int worker_port = 50052;               // 0: any free port (worker_port())
  std::optional<int> http_port = 8000;   // unset: no HTTP API; 0: any free port
  CorsOptions cors;                      // for browsers on http_port; off by default
  bool web_ui = true;                    // the page at `/` on http_port (--no-web-ui: off)
  Pooling pooling = Pooling::kLast;      // /v1/embeddings' pooling of the hidden states
  std::optional<int> metrics_port;       // /metrics and /health; unset: none; 0: any free port
  int max_streams_per_connection = 256;  // concurrent calls on one client connection
  bool enable_reflection = false;        // gRPC server reflection on `port` (public services only)
  // HAProxy in front of `port` (router/link/h2_proxy.h): its executable; "": the router serves
  // `port` itself (pagoda-router's --h2-proxy=auto picks kDefaultHaproxy when installed).
  std::string h2_proxy;
  int h2_proxy_max_requests_per_s = 200;  // per client address through the proxy; 0: no limit

  ClusterOptions cluster;  // scheduling and placement; its metrics are the server's own
  absl::Duration heartbeat_timeout = absl::Seconds(5);  // a worker silent this long is dead
  absl::Duration step_timeout = absl::Seconds(30);      // a step unanswered this long: dead too
  absl::Duration shutdown_grace = absl::Seconds(25);    // for the streams in flight

  // Workers must present it; "": a random one, so only local workers can join.
  std::string worker_token;
  bool insecure_worker_port = false;  // any worker that reaches worker_port may join
  TlsPem worker_tls;                  // TLS on worker_port when cert is set; mTLS with ca
  std::string api_key;                // every public call must carry it; "": open

  LocalWorkersOptions local_workers;  // their step limits are cluster.engine's
};

class RouterServer {
 public:
  // INVALID_ARGUMENT naming the flag when `options` can never work (no model, a TLS CA without
  // a certificate, TLS with local workers, a dtype local workers would refuse, per-model flags
  // with several models).
  static absl::Status CheckOptions(const RouterServerOptions& options);

  // Checks the options, loads each model's shape, digest, tokenizer and chat template, listens
  // on every port and spawns the local workers (--spawn-workers for each model). Not ready until a
  // worker joins. Errors: those of CheckOptions, the model's, UNAVAILABLE when a port cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(RouterServerOptions options);
  // Shuts down at once (no grace) if Shutdown has not run; kills the local workers.
  // REQUIRES: Run has returned or never ran.
  ~RouterServer();

  // Ticks the cluster (expired requests, readiness, periodic stats, local workers' exits)
  // until Shutdown has finished.
  void Run();
  // Refuses new calls, gives the streams in flight up to shutdown_grace, stops the HTTP API
  // and then the worker port (workers reconnect to whichever router comes next). Returns once
  // the server has stopped, whoever started the shutdown; then Run returns.
  void Shutdown();

  // The ports listened on (useful when the options asked for 0); 0 for a server that is off.
  int port() const { return port_; }
  int worker_port() const { return worker_port_; }
  int http_port() const;
  int metrics_port() const;

 private:
  explicit RouterServer(RouterServerOptions options);

  absl::Status Load();    // Start's first half: each model's host
  absl::Status Listen();  // its second: every port, then the local workers
  void ShutdownWithin(absl::Duration grace);
  void SetReadyLocked(bool ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string RenderMetrics() const;  // every model's registry as one exposition
  // Loads the adapter at `path` as `name` on every worker of the model it fits, or unloads
  // `name` ("" path), waiting for their answers (OpenAiServerOptions::change_adapter).
  absl::Status ChangeAdapter(const std::string& name, const std::string& path);
  void Tick();

  // Constant after Start. Declared in dependency order: destroyed servers first.
  const RouterServerOptions options_;
  std::vector<std::unique_ptr<ModelHost>> hosts_;  // one a model, the default first
  ServedModels models_;                            // the hosts, as the front ends see them
  std::vector<std::string> lora_roots_;            // where adapters loaded at run time may lie
  std::atomic<bool> ready_{false};                 // read by the HTTP /health handlers
  std::unique_ptr<HttpServer> metrics_server_;
  std::unique_ptr<WorkerLinkService> worker_link_;
  std::unique_ptr<grpc::Server> worker_server_;
  std::unique_ptr<GenerationService> generation_;
  std::unique_ptr<PublicReflection> reflection_;  // with enable_reflection
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<H2Proxy> h2_proxy_;  // with options_.h2_proxy: owns the public port
  std::unique_ptr<OpenAiServer> http_;
  int port_ = 0;
  int worker_port_ = 0;

  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stopped_;  // Shutdown has finished

  WaitLine wait_line_;  // Run's own: what the router waits for, if anything
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_ROUTER_SERVER_H_
