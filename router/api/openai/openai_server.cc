#include "router/api/openai/openai_server.h"

#include <httplib.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/json.h"
#include "common/process/guarded_http_server.h"
#include "common/process/http_server.h"
#include "common/process/version.h"
#include "glog/logging.h"
#include "router/api/generation_stream.h"
#include "router/api/openai/call_writer.h"
#include "router/api/openai/head_gate.h"
#include "router/api/openai/openai_embeddings.h"
#include "router/api/openai/openai_error.h"
#include "router/api/openai/openai_request.h"
#include "router/api/openai/openai_response.h"
#include "router/api/openai/openai_tokens.h"
#include "router/api/openai/request_json.h"
#include "router/api/openai/responses_output.h"
#include "router/api/request_policy.h"
#include "router/api/web/web_ui.h"

namespace pagoda {
namespace {

// Requests larger than this are refused before they are read (413).
constexpr size_t kMaxBodyBytes = 32 << 20;
// A body nesting deeper, with more keys, or whose tree would cost more than twice its size is
// refused while it is parsed (request_json.h): ordered_json looks each key up by a linear scan
// of its object (200k keys were 40 s of a core), and a node a value made a 32 MiB body of
// token ids ~570 MB.
RequestJsonLimits BodyLimits(std::vector<std::string> id_fields = {}) {
  RequestJsonLimits limits;  // 64 levels, 1024 keys an object, 100k in all
  limits.id_fields = std::move(id_fields);
  return limits;
}
// How long the HTTP thread waits for output before it looks again.
constexpr absl::Duration kTakeWait = absl::Milliseconds(500);

void Send(httplib::Response& res, const OpenAiError& error) {
  res.status = error.http_status;
  res.set_content(error.Body(), "application/json");
}

void SendError(httplib::Response& res, int status, std::string message, std::string param = "",
               std::string code = "") {
  Send(res, MakeOpenAiError(status, std::move(message), std::move(param), std::move(code)));
}

// A core error as OpenAI's: INVALID_ARGUMENT names its field first, which becomes `param`.
void SendStatus(httplib::Response& res, const absl::Status& status) { Send(res, ErrorOf(status)); }

}  // namespace

class OpenAiServer::Api {
 private:
  // A served model, and what its requests are parsed against.
  struct Model {
    const ServedModel* served = nullptr;
    OpenAiContext context;
    std::string fingerprint;  // system_fingerprint
  };

 public:
  Api(const ServedModels* models, OpenAiServerOptions options)
      : models_(models), cors_(options.cors), options_(std::move(options)) {
    for (const auto& served : models->all()) {
      Model& m = models_by_name_.emplace_back();
      m.served = served.get();
      const Tokenizer* tokenizer = served->tokenizer;
      m.context.cluster = served->cluster;
      m.context.constraints = served->constraints.get();
      m.context.tokenizer = tokenizer;
      m.context.chat_template = served->chat_template;
      m.context.tool_format = served->tool_format;
      m.context.reasoning_format = served->reasoning_format;
      if (tokenizer->bos_id() >= 0)
        m.context.bos_token = tokenizer->TokenBytes(-1, tokenizer->bos_id());
      if (tokenizer->eos_id() >= 0)
        m.context.eos_token = tokenizer->TokenBytes(-1, tokenizer->eos_id());
      m.fingerprint = absl::StrCat("fp_", served->cluster->config().weights_digest.substr(0, 16));
    }
  }

  void Register(httplib::Server* s) {
    s->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generate(req, res, /*chat=*/false);
    });
    s->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      Generate(req, res, /*chat=*/true);
    });
    s->Post("/v1/responses",
            [this](const httplib::Request& req, httplib::Response& res) { Respond(req, res); });
    s->Post("/v1/embeddings",
            [this](const httplib::Request& req, httplib::Response& res) { Embed(req, res); });
    s->Post("/v1/load_lora_adapter", [this](const httplib::Request& req, httplib::Response& res) {
      ChangeAdapter(req, res, /*load=*/true);
    });
    s->Post("/v1/unload_lora_adapter", [this](const httplib::Request& req, httplib::Response& res) {
      ChangeAdapter(req, res, /*load=*/false);
    });
    s->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      OrderedJson data = OrderedJson::array();
      for (const Model& m : models_by_name_) {
        const ModelConfig& config = m.served->cluster->config();
        // max_model_len as vLLM says it; meta as llama-server does (clients such as `pagoda
        // bench` read the vocabulary size there). Then the model's LoRA adapters, each with
        // the model as its parent, as vLLM lists them.
        OrderedJson entry = {{"id", m.served->name},
                             {"object", "model"},
                             {"created", started_at_},
                             {"owned_by", "pagoda"},
                             {"root", m.served->name},
                             {"parent", nullptr},
                             {"max_model_len", m.served->cluster->max_model_len()},
                             {"meta",
                              {{"n_vocab", config.vocab_size},
                               {"n_ctx_train", config.max_seq_len},
                               {"n_embd", config.dim}}}};
        data.push_back(entry);
        for (const std::string& adapter : m.served->cluster->loras().Names()) {
          entry["id"] = adapter;
          entry["root"] = adapter;
          entry["parent"] = m.served->name;
          data.push_back(entry);
        }
      }
      SendJson(res, OrderedJson{{"object", "list"}, {"data", std::move(data)}});
    });
    s->Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
      Tokens(req, res, TokenizeReply);
    });
    s->Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
      Tokens(req, res, DetokenizeReply, {"tokens"});
    });
    s->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool ready = !options_.ready || options_.ready();
      res.status = ready ? 200 : 503;
      res.set_content(ready ? "" : "no worker is ready\n", "text/plain");
    });
    s->Get("/version", [](const httplib::Request&, httplib::Response& res) {
      SendJson(res, OrderedJson{{"version", Version()}, {"commit", GitCommit()}});
    });
    s->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      if (!options_.render_metrics) return SendError(res, 404, "no metrics here");
      res.set_content(options_.render_metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
    if (options_.web_ui) {
      const auto page = [this](const httplib::Request& req, httplib::Response& res) {
        WebResponse answer = web_ui_.Get(req.path, req.get_header_value("If-None-Match"));
        res.status = answer.status;
        for (auto& [name, value] : answer.headers) res.set_header(name, value);
        if (answer.status == 200)
          res.set_content(answer.body.data(), answer.body.size(), answer.content_type);
      };
      s->Get("/", page);
      s->Get("/ui/.*", page);
    }
    if (cors_.enabled()) {
      // 200 as vLLM and llama-server answer (a preflight may be 200 or 204; some clients
      // and proxies expect the former).
      s->Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
        res.status = 200;
        if (!IsPreflight(req)) return res.set_header("Allow", "GET, POST, OPTIONS");
        for (const auto& [name, value] :
             cors_.PreflightHeaders(req.get_header_value("Origin"),
                                    req.get_header_value("Access-Control-Request-Method"),
                                    req.get_header_value("Access-Control-Request-Headers"))) {
          res.set_header(name, value);
        }
      });
      // Every other answer (errors and streams too) says which origin may read it.
      s->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (IsPreflight(req)) return;
        for (const auto& [name, value] : cors_.ResponseHeaders(req.get_header_value("Origin"))) {
          res.set_header(name, value);
        }
      });
    }
    s->set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
          // A bug, not the client's: its text stays in the log, not in a header.
          LOG(ERROR) << "exception serving " << req.method << " " << req.path;
          SendError(res, 500, "internal error");
        });
    s->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 400 && GuardedHttpServer::BodyCutOff()) res.status = 413;
      const int status = res.status;
      if (status == 404) return SendError(res, 404, absl::StrCat("no route ", req.path));
      if (status == 413) return SendError(res, 413, "the request body is too large");
      SendError(res, status, absl::StrCat("HTTP ", status));
    });
  }

  // What the server's loop asks of a head before it reads the body.
  const HeadGate& head_gate() const { return head_gate_; }

 private:
  static void SendJson(httplib::Response& res, const OrderedJson& j) {
    res.set_content(j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace),
                    "application/json");
  }

  bool IsPreflight(const httplib::Request& req) const {
    return cors_.IsPreflight(req.method, req.get_header_value("Origin"),
                             req.get_header_value("Access-Control-Request-Method"));
  }

  // The body as a JSON object, or false after answering 400 (413 when too large). Lists of
  // token ids under `id_fields` stay compact (request_json.h).
  static bool ParseBody(const httplib::Request& req, httplib::Response& res, OrderedJson* body,
                        std::vector<std::string> id_fields = {}) {
    if (req.body.size() > kMaxBodyBytes) {
      SendError(res, 413, absl::StrCat("the request body passes ", kMaxBodyBytes, " bytes"));
      return false;
    }
    absl::StatusOr<OrderedJson> parsed =
        ParseRequestJson(req.body, BodyLimits(std::move(id_fields)));
    // A limit names itself; text that is not JSON gets the message clients know.
    if (!parsed.ok() && !absl::EndsWith(parsed.status().message(), kNotJson)) {
      SendError(res, 400, std::string(parsed.status().message()));
      return false;
    }
    if (!parsed.ok() || !parsed->is_object()) {
      SendError(res, 400, "the request body must be a JSON object");
      return false;
    }
    *body = *std::move(parsed);
    return true;
  }

  void Generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    OrderedJson body;
    std::vector<std::string> id_fields;
    if (!chat) id_fields = {"prompt"};
    if (!ParseBody(req, res, &body, std::move(id_fields))) return;
    std::string adapter;
    const Model* model = ModelOf(body, res, &adapter);
    if (model == nullptr) return;
    absl::StatusOr<OpenAiCall> call = chat ? ParseChatRequest(body, model->context)
                                           : ParseCompletionRequest(body, model->context);
    if (!call.ok()) return SendStatus(res, call.status());
    const std::string& name = adapter.empty() ? model->served->name : adapter;
    Run(*model, adapter,
        std::make_shared<CompletionWriter>(std::make_unique<OpenAiCall>(*std::move(call)),
                                           model->served->tokenizer, name, model->fingerprint),
        InOpenAiFieldNames, req, res);
  }

  void Respond(const httplib::Request& req, httplib::Response& res) {
    OrderedJson body;
    if (!ParseBody(req, res, &body)) return;
    std::string adapter;
    const Model* model = ModelOf(body, res, &adapter);
    if (model == nullptr) return;
    absl::StatusOr<ResponsesCall> call = ParseResponsesRequest(body, model->context);
    if (!call.ok()) return SendStatus(res, call.status());
    const std::string& name = adapter.empty() ? model->served->name : adapter;
    Run(*model, adapter, std::make_shared<ResponsesOutput>(*std::move(call), name),
        InResponsesFieldNames, req, res);
  }

  // Submits the writer's call and answers with its output. `in_field_names` names a refused
  // request's fields as the endpoint does.
  void Run(const Model& model, const std::string& adapter, std::shared_ptr<CallWriter> writer,
           absl::Status (*in_field_names)(const absl::Status&), const httplib::Request& req,
           httplib::Response& res) {
    const OpenAiCall& call = writer->call();
    if (absl::Status serving = models_->CheckServing({model.served, adapter}); !serving.ok()) {
      return SendStatus(res, serving);
    }
    auto stream = std::make_shared<GenerationStream>(model.served->cluster, model.served->tokenizer,
                                                     model.served->metrics);
    if (absl::Status s = stream->Submit(WithAdapter(call.requests, adapter), call.stops,
                                        WorkerWaitEnd(std::nullopt, absl::Now()), PeerOf(req));
        !s.ok()) {
      return SendStatus(res, in_field_names(s));
    }
    // Nothing is answered before the call has output, its end or an error: a call that no
    // worker takes in time is a 503, not a stream that fails.
    auto first = std::make_shared<GenerationStream::Taken>();
    while (first->chunks.empty() && !first->done) *first = stream->Take(kTakeWait);
    if (!first->error.ok()) return SendStatus(res, first->error);
    if (!call.stream) {
      for (GenerationStream::Taken taken = std::move(*first);; taken = stream->Take(kTakeWait)) {
        writer->Add(taken.chunks);
        stream->Sent(taken.num_tokens());
        if (!taken.error.ok()) return SendStatus(res, taken.error);
        if (taken.done) break;
        // Nobody would read the answer: the sequences' slots and blocks go to others.
        if (GuardedHttpServer::ClientGone()) return stream->Abort();
      }
      res.set_content(writer->Body(), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto opened = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "text/event-stream",
        [stream, writer, first, opened](size_t, httplib::DataSink& sink) {
          auto send = [&sink](const std::string& bytes) {
            return bytes.empty() || sink.write(bytes.data(), bytes.size());
          };
          GenerationStream::Taken taken;
          if (*opened) {
            taken = stream->Take(kTakeWait);
          } else {
            *opened = true;
            if (!send(writer->Opening())) return false;
            taken = std::move(*first);
          }
          // A write that fails is a client that went away: the provider's false ends the
          // call, and the releaser aborts its sequences.
          if (!send(writer->Events(taken.chunks))) return false;
          stream->Sent(taken.num_tokens());
          if (!taken.done) return true;
          if (!send(taken.error.ok() ? writer->Closing() : writer->Failed(taken.error))) {
            return false;
          }
          sink.done();
          return true;
        },
        [stream](bool) { stream->Abort(); });
  }

  // The client is the socket's address, the connection the socket (one stream at a time).
  static RequestPeer PeerOf(const httplib::Request& req) {
    return {.client = req.remote_addr,
            .connection = absl::StrCat(req.remote_addr, ":", req.remote_port)};
  }

  // The model the body's `model` names (the default when it names none, or is not a string:
  // the request's parser then refuses it), or null after answering 404 model_not_found. When
  // it names a LoRA adapter: the adapter's model, and the adapter in `*adapter`.
  const Model* ModelOf(const OrderedJson& body, httplib::Response& res,
                       std::string* adapter = nullptr) const {
    const auto field = body.find("model");
    const std::string name =
        field != body.end() && field->is_string() ? field->get<std::string>() : "";
    absl::StatusOr<ServedModels::Choice> choice = models_->Resolve(name);
    if (!choice.ok()) {
      SendError(res, 404, std::string(choice.status().message()), "model", "model_not_found");
      return nullptr;
    }
    if (adapter != nullptr) *adapter = choice->adapter;
    for (const Model& m : models_by_name_) {
      if (m.served == choice->model) return &m;
    }
    return nullptr;  // unreachable: every served model has its entry
  }

  // `requests` run under `adapter` ("": the base model).
  static std::vector<GenerationRequest> WithAdapter(std::vector<GenerationRequest> requests,
                                                    const std::string& adapter) {
    for (GenerationRequest& r : requests) r.adapter = adapter;
    return requests;
  }

  // Each input is its own request through the same steps as generation; the answer waits for
  // all of them.
  void Embed(const httplib::Request& req, httplib::Response& res) {
    OrderedJson body;
    if (!ParseBody(req, res, &body, {"input"})) return;
    std::string adapter;
    const Model* model = ModelOf(body, res, &adapter);
    if (model == nullptr) return;
    absl::StatusOr<EmbeddingCall> call =
        ParseEmbeddingRequest(body, model->context, options_.pooling);
    if (!call.ok()) return SendStatus(res, call.status());
    if (absl::Status serving = models_->CheckServing({model->served, adapter}); !serving.ok()) {
      return SendStatus(res, serving);
    }
    GenerationStream stream(model->served->cluster, model->served->tokenizer,
                            model->served->metrics);
    if (absl::Status s = stream.Submit(WithAdapter(call->requests, adapter), {},
                                       WorkerWaitEnd(std::nullopt, absl::Now()));
        !s.ok()) {
      return SendStatus(res, InOpenAiFieldNames(s));
    }
    std::vector<std::vector<float>> embeddings(call->requests.size());
    int64_t prompt_tokens = 0;
    for (;;) {
      GenerationStream::Taken taken = stream.Take(kTakeWait);
      for (OutputChunk& c : taken.chunks) {
        if (c.index >= 0 && c.index < static_cast<int>(embeddings.size())) {
          embeddings[c.index] = std::move(c.embedding);
          prompt_tokens += c.prompt_tokens;
        }
      }
      if (!taken.error.ok()) return SendStatus(res, taken.error);
      if (taken.done) break;
      if (GuardedHttpServer::ClientGone()) return stream.Abort();
    }
    res.set_content(EmbeddingResponseBody(*call, embeddings, prompt_tokens,
                                          adapter.empty() ? model->served->name : adapter),
                    "application/json");
  }

  // vLLM's /v1/load_lora_adapter ({"lora_name", "lora_path"}) and /v1/unload_lora_adapter
  // ({"lora_name"}): its plain-text answer on success.
  void ChangeAdapter(const httplib::Request& req, httplib::Response& res, bool load) {
    if (!options_.change_adapter) {
      return SendError(res, 404,
                       "loading LoRA adapters at run time is off; start pagoda-router with "
                       "--allow-runtime-lora-updating");
    }
    OrderedJson body;
    if (!ParseBody(req, res, &body)) return;
    std::string name, path;
    for (const auto& [key, value] : body.items()) {
      const bool known = key == "lora_name" || (load && key == "lora_path");
      if (!known) return SendError(res, 400, absl::StrCat("unsupported field: ", key), key);
      if (!value.is_string() || value.get<std::string>().empty()) {
        return SendError(res, 400, absl::StrCat(key, " must be a non-empty string"), key);
      }
      (key == "lora_name" ? name : path) = value.get<std::string>();
    }
    if (name.empty() || (load && path.empty())) {
      return SendError(res, 400,
                       load ? "lora_name and lora_path are required" : "lora_name is required");
    }
    if (absl::Status s = options_.change_adapter(name, load ? path : ""); !s.ok()) {
      return SendStatus(res, s);
    }
    res.set_content(absl::StrCat("Success: LoRA adapter '", name, "' ", load ? "added" : "removed",
                                 " successfully."),
                    "text/plain");
  }

  // vLLM's /tokenize and /detokenize: plain reads of the body (openai_tokens.h).
  void Tokens(const httplib::Request& req, httplib::Response& res,
              absl::StatusOr<OrderedJson> (*reply)(const OrderedJson&, const OpenAiContext&),
              std::vector<std::string> id_fields = {}) {
    OrderedJson body;
    if (!ParseBody(req, res, &body, std::move(id_fields))) return;
    const Model* model = ModelOf(body, res);
    if (model == nullptr) return;
    absl::StatusOr<OrderedJson> answer = reply(body, model->context);
    if (!answer.ok()) return SendStatus(res, answer.status());
    SendJson(res, *answer);
  }

  const ServedModels* const models_;
  const CorsPolicy cors_;
  const OpenAiServerOptions options_;
  const HeadGate head_gate_{options_.api_key, &cors_, models_->default_model().metrics,
                            options_.web_ui};
  const WebUi web_ui_;
  std::vector<Model> models_by_name_;  // in models_' order
  const int64_t started_at_ = absl::ToUnixSeconds(absl::Now());
};

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(const ServedModels* models,
                                                                  OpenAiServerOptions options) {
  std::unique_ptr<OpenAiServer> server(new OpenAiServer());
  HttpGuardOptions limits;
  limits.threads = options.threads;
  limits.head.max_body_bytes = kMaxBodyBytes;
  server->api_ = std::make_unique<Api>(models, options);
  // Every request's key on its head, before its body is read (401 from the server's loop).
  const HeadGate* gate = &server->api_->head_gate();
  limits.head_authorized = [gate](absl::string_view head) { return gate->Authorized(head); };
  limits.refusal_headers = [gate](absl::string_view head) { return gate->RefusalHeaders(head); };
  server->server_ = std::make_unique<GuardedHttpServer>(limits);
  GuardedHttpServer* s = server->server_.get();
  UseExclusivePort(s);
  server->api_->Register(s);
  const int port = options.port == 0
                       ? s->bind_to_any_port(options.host)
                       : (s->bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on HTTP port ", options.host, ":", options.port));
  }
  server->port_ = port;
  server->thread_ = s->ListenInBackground();
  LOG(INFO) << "OpenAI-compatible HTTP API on " << options.host << ":" << port;
  return server;
}

OpenAiServer::OpenAiServer() = default;
OpenAiServer::~OpenAiServer() { Stop(); }

void OpenAiServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
  server_->Shutdown();
}

}  // namespace pagoda
