#include "router/constraint.h"

#include <bit>

namespace pagoda {

absl::Status FillAllowed(TokenMasker& masker, GrammarMatcher& matcher, std::vector<uint64_t>* mask,
                         std::vector<int>* ids, std::vector<uint64_t>* words) {
  const int vocab = masker.vocabulary().size();
  mask->assign(masker.vocabulary().mask_words(), 0);
  if (absl::Status s = masker.FillMask(matcher, *mask); !s.ok()) return s;
  int count = 0;
  for (uint64_t w : *mask) count += std::popcount(w);
  ids->clear();
  words->clear();
  if (count < vocab / 32) {
    ids->reserve(count);
    for (size_t i = 0; i < mask->size(); ++i) {
      for (uint64_t w = (*mask)[i]; w != 0; w &= w - 1) {
        ids->push_back(static_cast<int>(i * 64 + std::countr_zero(w)));
      }
    }
  } else {
    *words = *mask;
  }
  return absl::OkStatus();
}

}  // namespace pagoda
