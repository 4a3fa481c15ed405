#include "router/lora_modules.h"

#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/lora_adapter.h"

namespace pagoda {
namespace {

// Reads the adapter against `base` as a worker would (its paths confined as the worker's are).
std::string DirectoryOf(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::string(".") : dir.string();
}

absl::Status Fits(const LoraModule& module, const ModelConfig& base,
                  const std::vector<std::string>& roots) {
  LoraReadOptions read;
  read.allowed_roots = roots.empty() ? std::vector<std::string>{DirectoryOf(module.path)} : roots;
  return ReadLoraAdapter(module.path, base, read).status();
}

}  // namespace

std::vector<std::string> LoraRoots(const std::string& lora_dir,
                                   const std::vector<std::vector<LoraModule>>& modules) {
  if (!lora_dir.empty()) return {lora_dir};
  std::set<std::string> roots;
  for (const auto& of_model : modules) {
    for (const LoraModule& m : of_model) roots.insert(DirectoryOf(m.path));
  }
  return {roots.begin(), roots.end()};
}

absl::StatusOr<std::vector<std::vector<LoraModule>>> AssignLoraModules(
    const std::vector<std::string>& values, const std::vector<LoraBase>& models,
    const std::vector<std::string>& roots) {
  std::vector<std::vector<LoraModule>> out(models.size());
  std::set<std::string> names;
  for (const LoraBase& m : models) names.insert(m.name);
  for (const std::string& value : values) {
    auto bad = [&value](auto&&... why) {
      return absl::InvalidArgumentError(absl::StrCat("--lora-modules=", value, ": ", why...));
    };
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
      return bad("expected NAME=PATH or MODEL:NAME=PATH");
    }
    LoraModule module{.name = value.substr(0, eq), .path = value.substr(eq + 1)};
    // MODEL:NAME when what precedes the first colon is a model served (a name may hold colons).
    int model = -1;
    if (const size_t colon = module.name.find(':'); colon != std::string::npos) {
      for (size_t i = 0; i < models.size(); ++i) {
        if (models[i].name == module.name.substr(0, colon)) model = static_cast<int>(i);
      }
      if (model >= 0) module.name = module.name.substr(colon + 1);
    }
    if (!IsLoraAdapterName(module.name)) {
      return bad("the adapter's name must be 1 to 128 bytes of letters, digits and . _ : / -");
    }
    if (!names.insert(module.name).second) {
      return bad("`", module.name, "` already names a model or another adapter");
    }
    if (model < 0 && models.size() == 1) model = 0;
    if (model >= 0) {
      if (absl::Status s = Fits(module, *models[model].config, roots); !s.ok()) {
        return bad(s.message());
      }
      out[model].push_back(std::move(module));
      continue;
    }
    // Several models: the one it fits.
    std::vector<std::string> fit, why_not;
    for (size_t i = 0; i < models.size(); ++i) {
      const absl::Status s = Fits(module, *models[i].config, roots);
      if (s.ok()) {
        fit.push_back(models[i].name);
        model = static_cast<int>(i);
      } else {
        why_not.push_back(absl::StrCat(models[i].name, ": ", s.message()));
      }
    }
    if (fit.empty()) return bad("it fits none of the models (", absl::StrJoin(why_not, "; "), ")");
    if (fit.size() > 1) {
      return bad("it fits ", absl::StrJoin(fit, " and "),
                 ": say which with --lora-modules=MODEL:NAME=PATH");
    }
    out[model].push_back(std::move(module));
  }
  return out;
}

}  // namespace pagoda
