// The OpenAI-compatible HTTP API (vLLM's routes) on cpp-httplib, over the same models (their
// Clusters) as the gRPC service; a request's `model` picks one (served_models.h):
//
//   POST /v1/completions, /v1/chat/completions   (JSON, or server-sent events with stream)
//   POST /v1/responses         (OpenAI's Responses API, stateless: openai_responses.h)
//   POST /v1/embeddings        (pooled as OpenAiServerOptions::pooling says)
//   GET  /v1/models (every model)  POST /tokenize, /detokenize
//   GET  /health (200 when a worker is ready, else 503), /version, /metrics
//   GET  /, /ui/<file>         the web page (web/web_ui.h) unless OpenAiServerOptions::web_ui
//                              is off; with an API key, it takes the key as HTTP Basic's
//                              password too (head_gate.h)
//
// Translation only: a call becomes core requests (openai_request), runs in a GenerationStream,
// and its chunks become OpenAI's objects (openai_response). Nothing is answered before the call
// has output: with no worker ready it waits kWorkerWait for one (as a gRPC call waits until
// its deadline), then answers 503. Errors are OpenAI's object {"error": {"message", "type",
// "param", "code"}}: 400 a bad field (named in param), 401 a missing or wrong API key, 404 an
// unknown model or path, 429 the queue is full, 503 no worker came. A streaming client that
// goes away aborts its sequences. With CORS origins set (OpenAiServerOptions::cors), every
// response carries the Access-Control-* headers for an allowed Origin, and a preflight
// (OPTIONS) is answered 204 without the API key; without them OPTIONS is not served.
#ifndef PAGODA_ROUTER_API_OPENAI_OPENAI_SERVER_H_
#define PAGODA_ROUTER_API_OPENAI_OPENAI_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "router/api/openai/cors.h"
#include "router/api/served_models.h"

namespace pagoda {

class GuardedHttpServer;

struct OpenAiServerOptions {
  std::string host = "0.0.0.0";
  int port = 8000;              // 0: any free port (see port())
  std::string api_key;          // "": no key needed
  int threads = 256;            // connections served at once (a streaming call holds one)
  std::function<bool()> ready;  // /health; null: ready
  std::function<std::string()> render_metrics;  // /metrics' text when set
  CorsOptions cors;                             // off by default (no allowed origins)
  Pooling pooling = Pooling::kLast;             // /v1/embeddings' (--pooling)
  bool web_ui = true;                           // the page at `/` (--no-web-ui: off, 404)
  // vLLM's POST /v1/load_lora_adapter and /v1/unload_lora_adapter (issue 39): loads the adapter
  // at `path` as `name` on every worker of its model, or unloads `name` when `path` is empty,
  // answering once they did. Null (pagoda-router without --allow-runtime-lora-updating): both
  // are refused with 404, naming the flag.
  std::function<absl::Status(const std::string& name, const std::string& path)> change_adapter;
};

class OpenAiServer {
 public:
  // Listens and serves on its own threads. `models` (at least one) is not owned and outlives
  // the server; API keys refused are counted in its default model's metrics.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(const ServedModels* models,
                                                             OpenAiServerOptions options);
  ~OpenAiServer();  // Stop()

  int port() const { return port_; }
  // Stops accepting, ends the streams in flight and joins the threads.
  void Stop();

 private:
  class Api;  // the routes' handlers

  OpenAiServer();
  std::unique_ptr<Api> api_;
  std::unique_ptr<GuardedHttpServer> server_;  // after api_: destroyed (stopped) first
  std::thread thread_;
  int port_ = 0;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_OPENAI_OPENAI_SERVER_H_
