// The models behind the router's one endpoint, as every front end sees them (issue 39): a
// request's `model` names one (the first added is the default, for a request that names none),
// and each model brings its own Cluster of workers, tokenizer, chat template, output formats,
// metrics and structured-output compiler. The router's ModelHosts own those parts; this is the
// front ends' directory of them. Built before serving, then read-only: thread-safe.
//
//   ServedModels models;
//   models.Add({.name = "stories", .cluster = &cluster, .tokenizer = &tokenizer});
//   absl::StatusOr<const ServedModel*> m = models.Find(request.model());  // NOT_FOUND, named
//   RETURN_IF_ERROR(models.CheckServing(**m));  // UNAVAILABLE at once: no worker, others have
#ifndef PAGODA_ROUTER_API_SERVED_MODELS_H_
#define PAGODA_ROUTER_API_SERVED_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/chat_template.h"
#include "lib/text/tokenizer.h"
#include "router/api/constraint_compiler.h"
#include "router/api/openai/tools/tool_call_format.h"
#include "router/core/cluster.h"
#include "router/core/router_metrics.h"

namespace pagoda {

// One model. Pointers not owned (they outlive the directory); chat_template and metrics may be
// null (chat is then refused; nothing is counted).
struct ServedModel {
  std::string name;  // what requests and /v1/models call it
  Cluster* cluster = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const jinja::ChatTemplate* chat_template = nullptr;
  // How its chat outputs are parsed (--tool-call-parser, --reasoning-parser, or detected from
  // its template); kNone: not at all.
  ToolCallFormat tool_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  RouterMetrics* metrics = nullptr;
  // Set by ServedModels::Add: grammars compiled over this model's vocabulary.
  std::shared_ptr<ConstraintCompiler> constraints = nullptr;
};

class ServedModels {
 public:
  // Adds a model (cluster and tokenizer set, its name not yet taken: else INVALID_ARGUMENT
  // naming --model). Before serving only.
  absl::Status Add(ServedModel model);

  // What a request's `model` names: a model, or a LoRA adapter of one (vLLM's convention: the
  // adapter's name is the request's model).
  struct Choice {
    const ServedModel* model = nullptr;
    std::string adapter = {};  // "": the base model
  };
  // The model or adapter named `name` (a model's name first), or the default model for "".
  // NOT_FOUND otherwise, naming what is served ("the model `x` does not exist; this router
  // serves `a`, `b`").
  absl::StatusOr<Choice> Resolve(absl::string_view name) const;
  // Resolve's model: an adapter's is its base model.
  absl::StatusOr<const ServedModel*> Find(absl::string_view name) const;
  // UNAVAILABLE when `model` has no worker (none that is not draining) while another model has
  // one: its requests would wait for a worker nobody is starting, so they are answered at once.
  // OK otherwise (with one model, or no worker anywhere, a request waits as it always did).
  absl::Status CheckServing(const ServedModel& model) const;
  // The same, and UNAVAILABLE when the choice's adapter is held by no worker of a model that
  // has workers ready.
  absl::Status CheckServing(const Choice& choice) const;

  const ServedModel& default_model() const { return *models_.front(); }
  const std::vector<std::unique_ptr<ServedModel>>& all() const { return models_; }
  // "`a`, `b`": the models and their adapters, for messages.
  std::string Names() const;

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;  // stable addresses
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_SERVED_MODELS_H_
