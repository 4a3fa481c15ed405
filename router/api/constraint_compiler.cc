#include "router/api/constraint_compiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/token_masker.h"

namespace pagoda {

ConstraintCompiler::ConstraintCompiler(const Tokenizer* tokenizer, const ModelConfig& config)
    : tokenizer_(tokenizer), vocab_size_(config.vocab_size), eos_ids_([&] {
        std::vector<int> ids = config.eos_ids;
        if (tokenizer->eos_id() >= 0 && tokenizer->eos_id() < config.vocab_size &&
            std::find(ids.begin(), ids.end(), tokenizer->eos_id()) == ids.end()) {
          ids.push_back(tokenizer->eos_id());
        }
        std::erase_if(ids, [&](int id) { return id < 0 || id >= config.vocab_size; });
        return ids;
      }()) {}

std::vector<std::string> ConstraintCompiler::TokenBytes(const Tokenizer& tokenizer, int vocab_size,
                                                        const std::vector<int>& eos_ids) {
  std::vector<std::string> bytes(vocab_size);
  const int known = std::min(vocab_size, tokenizer.vocab_size());
  // After EOS: a token as it reads mid-text (SentencePiece drops a leading space at the start).
  const int prev = tokenizer.eos_id();
  for (int id = 0; id < known; ++id) {
    if (id == tokenizer.bos_id() || std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end())
      continue;
    std::string b = tokenizer.TokenBytes(prev, id);
    // Control tokens decode to their names; a grammar must never spell one out of them.
    const bool special = tokenizer.IsAddedToken(id) || b == "<unk>" || b == "<s>" || b == "</s>" ||
                         b == "<pad>" || (b.size() > 4 && b.starts_with("<|") && b.ends_with("|>"));
    if (!special) bytes[id] = std::move(b);
  }
  return bytes;
}

int ConstraintCompiler::SpecialTokenId(std::string_view text) const {
  const std::vector<int> ids = tokenizer_->Encode(text);
  return ids.size() == 1 && ids[0] < vocab_size_ && tokenizer_->IsAddedToken(ids[0]) ? ids[0] : -1;
}

absl::StatusOr<std::shared_ptr<const TokenVocabulary>> ConstraintCompiler::Vocabulary() {
  absl::MutexLock lock(&mu_);
  if (vocabulary_ == nullptr) {
    // Fails only for a token over 64 KiB (a broken tokenizer file): every request says so.
    ASSIGN_OR_RETURN(vocabulary_, TokenVocabulary::Create(
                                      TokenBytes(*tokenizer_, vocab_size_, eos_ids_), eos_ids_));
    LOG(INFO) << "structured output: vocabulary of " << vocab_size_ << " tokens, "
              << vocabulary_->nodes().size() << " trie nodes";
  }
  return vocabulary_;
}

absl::StatusOr<std::shared_ptr<const Constraint>> ConstraintCompiler::Compile(
    std::string_view gbnf, absl::string_view field) {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->first != gbnf) continue;
      auto hit = *it;
      cache_.erase(it);
      cache_.push_back(hit);
      return hit.second;
    }
  }
  // llama.cpp's rule: `<text>` is the token that text encodes to, when it is exactly one.
  const GbnfTokens tokens{.vocab_size = vocab_size_, .find = [this](std::string_view text) {
                            const std::vector<int> ids = tokenizer_->Encode(text);
                            return ids.size() == 1 ? ids[0] : -1;
                          }};
  absl::StatusOr<std::shared_ptr<const Grammar>> grammar = ParseGbnf(gbnf, {}, &tokens);
  if (!grammar.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", grammar.status().message()));
  }
  absl::StatusOr<std::shared_ptr<const TokenVocabulary>> vocabulary = Vocabulary();
  if (!vocabulary.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": the tokenizer's vocabulary: ", vocabulary.status().message()));
  }
  auto constraint = std::make_shared<Constraint>();
  constraint->grammar = *std::move(grammar);
  constraint->masker =
      std::make_shared<TokenMasker>(constraint->grammar, *std::move(vocabulary),
                                    TokenMaskerOptions{.cache_bytes = kMaskCacheBytes});
  absl::MutexLock lock(&mu_);
  cache_.emplace_back(std::string(gbnf), constraint);
  if (cache_.size() > kMaxCachedConstraints) cache_.pop_front();
  return constraint;
}

}  // namespace pagoda
