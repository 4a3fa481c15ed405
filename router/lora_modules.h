// pagoda-router's --lora-modules (issue 39, vLLM's flag): which model each LoRA adapter adapts.
// A value is NAME=PATH, or MODEL:NAME=PATH for the model served as MODEL. With one model every
// adapter is its; with several, NAME=PATH goes to the one model whose shapes the adapter fits
// (read and checked against each, as its workers will), and MODEL: says which when several fit.
// Each adapter is read here before any worker starts, so a bad file, a path outside the allowed
// directories or a shape that fits no model stops the router naming the flag, rather than
// every spawned worker.
#ifndef PAGODA_ROUTER_LORA_MODULES_H_
#define PAGODA_ROUTER_LORA_MODULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace pagoda {

struct LoraModule {
  std::string name;                                       // what requests name as their model
  std::string path;                                       // a PEFT directory or a GGUF LoRA file
  std::string flag() const { return name + "=" + path; }  // the worker's --lora-modules value
};

// A served model, as --lora-modules values are matched to it.
struct LoraBase {
  std::string name;
  const ModelConfig* config = nullptr;  // Not owned.
};

// The adapters of each of `models` (in their order) from the --lora-modules `values`.
// `roots`: the directories adapter paths must lie in (empty: each path's own directory, as a
// worker without --lora-dir allows its --lora-modules). INVALID_ARGUMENT naming the value: not
// NAME=PATH, a name that is not 1-128 of [A-Za-z0-9._:/-], taken by a model or another
// adapter, an adapter that fits no model (with why) or several (name the model), or a MODEL:
// that is not served.
absl::StatusOr<std::vector<std::vector<LoraModule>>> AssignLoraModules(
    const std::vector<std::string>& values, const std::vector<LoraBase>& models,
    const std::vector<std::string>& roots);

// The directories a path loaded at run time may lie in: --lora-dir, else those of the
// --lora-modules paths (as a worker's).
std::vector<std::string> LoraRoots(const std::string& lora_dir,
                                   const std::vector<std::vector<LoraModule>>& modules);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_LORA_MODULES_H_
