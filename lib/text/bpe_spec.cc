#include "lib/text/bpe_spec.h"

#include <algorithm>

namespace pagoda {

absl::flat_hash_map<std::string, int> BpeSpec::TokenIds() const {
  absl::flat_hash_map<std::string, int> ids;
  auto add = [&](const std::string& piece, int64_t id) {
    auto [it, inserted] = ids.emplace(piece, static_cast<int>(id));
    if (!inserted) it->second = std::min(it->second, static_cast<int>(id));
  };
  for (const auto& [piece, id] : vocab) add(piece, id);
  for (const AddedToken& a : added_tokens) {
    if (!a.content.empty()) add(a.content, a.id);
  }
  return ids;
}

bool SplitMerge(std::string_view merge, std::pair<std::string, std::string>* pieces) {
  const size_t space = merge.find(' ');
  if (space == std::string_view::npos) return false;
  pieces->first = std::string(merge.substr(0, space));
  pieces->second = std::string(merge.substr(space + 1));
  return true;
}

}  // namespace pagoda
