// The variables of a render's frames. Internal to pagoda_jinja.
#ifndef PAGODA_LIB_JINJA_SCOPE_H_
#define PAGODA_LIB_JINJA_SCOPE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "lib/jinja/value.h"

namespace pagoda::jinja {

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

// Variables of one frame; a miss looks in the parent.
class Scope {
 public:
  explicit Scope(ScopePtr parent) : parent_(std::move(parent)) {}
  const Value* Lookup(absl::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
      const auto it = s->vars_.find(name);
      if (it != s->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void Set(const std::string& name, Value value) { vars_[name] = std::move(value); }
  void Clear() { vars_.clear(); }

 private:
  ScopePtr parent_;
  absl::flat_hash_map<std::string, Value> vars_;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_SCOPE_H_
