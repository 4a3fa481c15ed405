// One model the router serves (issue 39: a router may serve several behind one endpoint), and
// everything that is its own: its shape and fingerprint (read from its files: the router holds
// no weights), its tokenizer, chat template and output formats, its metrics (a registry whose
// series carry model_name), the Cluster of its workers, and the local workers spawned for it.
// RouterServer holds one per --model; the front ends see them through ServedModels.
//
//   ASSIGN_OR_RETURN(auto host, ModelHost::Load(options, cluster_options));
//   RETURN_IF_ERROR(models.Add(host->served()));
//   RETURN_IF_ERROR(host->SpawnWorkers(local_workers, router));  // once the worker port listens
//
// Thread-safety: constant after Load but for the Cluster (thread-safe) and Tick/SpawnWorkers,
// which RouterServer calls from one thread.
#ifndef PAGODA_ROUTER_MODEL_HOST_H_
#define PAGODA_ROUTER_MODEL_HOST_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "common/process/metrics.h"
#include "lib/jinja/chat_template.h"
#include "lib/text/tokenizer.h"
#include "router/api/served_models.h"
#include "router/core/cluster.h"
#include "router/core/router_metrics.h"
#include "router/core/stats_line.h"
#include "router/link/local_workers.h"
#include "router/lora_modules.h"

namespace pagoda {

// What pagoda-router's model flags say of one model (--model, and for the only model
// --tokenizer, --served-model-name, --chat-template, --tool-call-parser, --reasoning-parser).
struct ModelHostOptions {
  // A GGUF file, a llama2.c checkpoint or a Hugging Face model directory.
  std::string path = {};
  std::string tokenizer = {};  // "": the model's
  // --rope-scaling: JSON as config.json's rope_scaling, applied to the model's own and passed to
  // its spawned workers; "": the model's files decide.
  std::string rope_scaling = {};
  std::string name = {};  // "": the file name without extension, or the directory's name
  // Unset: the model directory's, else the tokenizer file's (GGUF), else chat is refused.
  std::optional<jinja::ChatTemplate> chat_template = {};
  std::string chat_template_source = {};  // chat_template's text, for detecting the formats below
  // Unset: detected from the chat template.
  std::optional<ToolCallFormat> tool_call_format = {};
  std::optional<ReasoningFormat> reasoning_format = {};
};

// The name a model is served under when none is given: "stories260K" for .../stories260K.bin,
// "TinyLlama-1.1B" for .../TinyLlama-1.1B/.
std::string DefaultServedModelName(const std::string& path);

class ModelHost {
 public:
  // Reads the model's shape, digests its weights (showing progress), loads its tokenizer and
  // chat template and makes its Cluster with `cluster` (whose metrics are the host's own).
  // Errors: the files', and INVALID_ARGUMENT for a --max-model-len the model cannot take.
  static absl::StatusOr<std::unique_ptr<ModelHost>> Load(ModelHostOptions options,
                                                         const ClusterOptions& cluster);
  ~ModelHost();  // kills its local workers, then stops the Cluster's loops

  // Its LoRA adapters from --lora-modules: listed and accepted from now on, and loaded by the
  // workers it spawns.
  void SetLoraModules(std::vector<LoraModule> modules);
  // Spawns its local workers (options.num_workers of them) to dial `router`'s worker port;
  // `router.model` and `router.lora_modules` are set here.
  absl::Status SpawnWorkers(const LocalWorkersOptions& options, LocalWorkersRouter router);

  // Its periodic stats line for its Cluster's `stats`, when one is due (prefixed with the
  // model's name when `named`).
  std::optional<std::string> NextStatsLine(const ClusterStats& stats, absl::Time now, bool named);
  void ReapWorkers();  // collects its local workers that exited

  ServedModel served();  // what the front ends see of it
  const std::string& name() const { return name_; }
  const std::string& path() const { return options_.path; }
  const ModelConfig& config() const { return config_; }
  Cluster* cluster() const { return cluster_.get(); }
  RouterMetrics* metrics() { return &metrics_; }
  const MetricsRegistry& registry() const { return registry_; }

 private:
  ModelHost(ModelHostOptions options, std::string name);
  absl::Status Load(const ClusterOptions& cluster);

  const ModelHostOptions options_;
  const std::string name_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<jinja::ChatTemplate> chat_template_;
  ToolCallFormat tool_call_format_ = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format_ = ReasoningFormat::kNone;
  MetricsRegistry registry_;  // model_name on every series
  RouterMetrics metrics_;
  std::unique_ptr<Cluster> cluster_;
  std::vector<LoraModule> lora_modules_;
  std::unique_ptr<LocalWorkers> local_workers_;  // after cluster_: killed first
  std::optional<StatsLine> stats_line_;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_MODEL_HOST_H_
