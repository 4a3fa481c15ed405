#include "router/model_host.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_loader.h"
#include "common/model/rope_scaling.h"
#include "common/model/weights_digest.h"
#include "common/process/progress_meter.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "lib/text/tokenizer_loader.h"
#include "router/core/cluster_gauges.h"
#include "router/core/model_length.h"

namespace pagoda {
namespace {

// The model's own chat template: the model directory's, else the one in the tokenizer file
// (GGUF). None when there is none or it does not parse: chat requests are then refused,
// everything else is served.
std::optional<jinja::ChatTemplate> ModelChatTemplate(const std::string& name,
                                                     const std::string& model,
                                                     const Tokenizer& tokenizer,
                                                     std::string* source_out) {
  std::string& source = *source_out;
  if (std::filesystem::is_directory(model)) {
    absl::StatusOr<std::string> found = jinja::LoadChatTemplate(model);
    if (found.ok()) source = *std::move(found);
  }
  if (source.empty()) source = tokenizer.chat_template();
  if (source.empty()) {
    LOG(WARNING) << name
                 << ": no chat template: /v1/chat/completions is refused (see --chat-template)";
    return std::nullopt;
  }
  absl::StatusOr<jinja::ChatTemplate> parsed = jinja::ChatTemplate::Create(source);
  if (!parsed.ok()) {
    LOG(WARNING) << name << ": the model's chat template does not parse ("
                 << parsed.status().message() << "): /v1/chat/completions is refused";
    return std::nullopt;
  }
  return *std::move(parsed);
}

}  // namespace

std::string DefaultServedModelName(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // a trailing slash
  return std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
}

absl::StatusOr<std::unique_ptr<ModelHost>> ModelHost::Load(ModelHostOptions options,
                                                           const ClusterOptions& cluster) {
  std::string name = options.name.empty() ? DefaultServedModelName(options.path) : options.name;
  std::unique_ptr<ModelHost> host(new ModelHost(std::move(options), std::move(name)));
  RETURN_IF_ERROR(host->Load(cluster));
  return host;
}

ModelHost::ModelHost(ModelHostOptions options, std::string name)
    : options_(std::move(options)),
      name_(std::move(name)),
      registry_(MetricLabels{{"model_name", name_}}),
      metrics_(&registry_) {}

ModelHost::~ModelHost() = default;

absl::Status ModelHost::Load(const ClusterOptions& cluster_options) {
  ASSIGN_OR_RETURN(config_, LoadModelConfig(options_.path));
  RETURN_IF_ERROR(ApplyRopeScalingFlag(options_.rope_scaling, &config_));
  RETURN_IF_ERROR(CheckMaxModelLen(cluster_options.engine.max_model_len, config_));
  // The weights' digest makes the fingerprint tell fine-tunes of one base model apart. Every
  // byte is read once: minutes for a large model on a cold disk, so it shows its progress as a
  // worker's load does.
  {
    std::optional<ProgressMeter> progress;  // from the first read, which knows the total
    ASSIGN_OR_RETURN(config_.weights_digest,
                     WeightsDigest(options_.path, [&](int64_t done, int64_t total) {
                       if (!progress) {
                         progress.emplace(absl::StrCat("hashing the weights of ", name_), total,
                                          ProgressMeter::ForStderr());
                       }
                       progress->Add(done - progress->done());
                     }));
  }
  ASSIGN_OR_RETURN(tokenizer_, LoadModelTokenizer(options_.path, options_.tokenizer, config_));
  std::string source = options_.chat_template_source;
  chat_template_ = options_.chat_template
                       ? options_.chat_template
                       : ModelChatTemplate(name_, options_.path, *tokenizer_, &source);
  if (!chat_template_) source.clear();
  tool_call_format_ = options_.tool_call_format.value_or(DetectToolCallFormat(source));
  reasoning_format_ = options_.reasoning_format.value_or(DetectReasoningFormat(source));
  LOG(INFO) << name_ << ": chat outputs: tool calls " << ToolCallFormatName(tool_call_format_)
            << ", reasoning " << ReasoningFormatName(reasoning_format_)
            << (options_.tool_call_format ? "" : " (tool calls detected from the template)");
  ClusterOptions cluster = cluster_options;
  cluster.metrics = &metrics_;
  cluster_ = std::make_unique<Cluster>(config_, cluster);
  AddClusterGauges(&registry_, cluster_.get());
  return absl::OkStatus();
}

absl::Status ModelHost::SpawnWorkers(const LocalWorkersOptions& options,
                                     LocalWorkersRouter router) {
  router.model = options_.path;
  router.rope_scaling = options_.rope_scaling;
  for (const LoraModule& m : lora_modules_) router.lora_modules.push_back(m.flag());
  ASSIGN_OR_RETURN(local_workers_, LocalWorkers::Start(options, router));
  return absl::OkStatus();
}

void ModelHost::SetLoraModules(std::vector<LoraModule> modules) {
  std::vector<std::string> names;
  for (const LoraModule& m : modules) names.push_back(m.name);
  cluster_->loras().Configure(names);
  lora_modules_ = std::move(modules);
}

std::optional<std::string> ModelHost::NextStatsLine(const ClusterStats& stats, absl::Time now,
                                                    bool named) {
  if (!stats_line_) stats_line_.emplace(&metrics_, now);
  std::optional<std::string> line = stats_line_->Next(stats, now);
  if (line && named) *line = absl::StrCat(name_, ": ", *line);
  return line;
}

void ModelHost::ReapWorkers() {
  if (local_workers_) local_workers_->Reap();
}

ServedModel ModelHost::served() {
  return {.name = name_,
          .cluster = cluster_.get(),
          .tokenizer = tokenizer_.get(),
          .chat_template = chat_template_ ? &*chat_template_ : nullptr,
          .tool_format = tool_call_format_,
          .reasoning_format = reasoning_format_,
          .metrics = &metrics_};
}

}  // namespace pagoda
