#include "router/core/constraint.h"

#include <algorithm>
#include <bit>

#include "glog/logging.h"

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

bool FillStepAllowed(const Constraint& constraint, GrammarMatcher& matcher, int64_t seq_id,
                     std::vector<uint64_t>* mask, std::vector<int>* ids,
                     std::vector<uint64_t>* words) {
  const absl::Status status = FillAllowed(*constraint.masker, matcher, mask, ids, words);
  if (status.ok()) return true;
  LOG(WARNING) << "sequence " << seq_id << ": " << status;
  words->clear();
  *ids = {0};
  return false;
}

GrammarEnd AdvanceGrammar(const Constraint& constraint, GrammarMatcher& matcher, int token,
                          int64_t seq_id) {
  const TokenVocabulary& vocab = constraint.masker->vocabulary();
  const std::vector<int>& eos = vocab.eos_ids();
  if (std::find(eos.begin(), eos.end(), token) != eos.end()) return GrammarEnd::kStopToken;
  if (token < 0 || token >= vocab.size() || !matcher.AcceptToken(token, vocab.bytes(token))) {
    LOG(WARNING) << "sequence " << seq_id << ": token " << token << " is outside its grammar";
    return GrammarEnd::kStopToken;
  }
  return matcher.IsComplete() && !matcher.CanContinue() ? GrammarEnd::kComplete : GrammarEnd::kNo;
}

}  // namespace pagoda
