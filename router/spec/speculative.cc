#include "router/spec/speculative.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/spec/ngram_proposer.h"

namespace pagoda {

absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(std::string_view name) {
  if (name == "off") return SpeculativeMethod::kOff;
  if (name == "ngram") return SpeculativeMethod::kNgram;
  if (name == "suffix") return SpeculativeMethod::kSuffix;
  if (name == "draft-model") {
    return absl::InvalidArgumentError(
        "--speculative=draft-model is not supported yet: use ngram or suffix");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--speculative=", std::string(name), ": expected off, ngram or suffix"));
}

const char* SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNgram:
      return "ngram";
    case SpeculativeMethod::kSuffix:
      return "suffix";
    case SpeculativeMethod::kOff:
      break;
  }
  return "off";
}

absl::Status ValidateSpeculativeOptions(const SpeculativeOptions& options) {
  if (options.num_speculative_tokens < 1 || options.num_speculative_tokens > kMaxDraftTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num-speculative-tokens=", options.num_speculative_tokens,
                     ": must be in [1, ", kMaxDraftTokens, "]"));
  }
  if (options.max_step_tokens < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative-max-step-tokens=", options.max_step_tokens, ": must be >= 2"));
  }
  return absl::OkStatus();
}

namespace {

// Prompt lookup: the sequence's own prompt and output.
class NgramDraftProposer : public DraftProposer {
 public:
  int Propose(std::span<const int> tokens, int k, std::vector<int>* draft) override {
    return ProposeNgram(tokens, k, draft);
  }
};

// Recent outputs of all requests first when they match the sequence's last 3 to 8 tokens (a
// long match there is the best guess: repeated answers, templates), else prompt lookup.
class SuffixDraftProposer : public DraftProposer {
 public:
  explicit SuffixDraftProposer(std::shared_ptr<SuffixIndex> index) : index_(std::move(index)) {}

  int Propose(std::span<const int> tokens, int k, std::vector<int>* draft) override {
    const int n = index_->Propose(tokens, k, draft);
    return n > 0 ? n : ProposeNgram(tokens, k, draft);
  }
  void Finished(std::span<const int> tokens, int num_prompt_tokens) override {
    index_->Add(tokens.first(num_prompt_tokens), tokens.subspan(num_prompt_tokens));
  }

 private:
  const std::shared_ptr<SuffixIndex> index_;
};

}  // namespace

std::shared_ptr<SuffixIndex> MakeSuffixIndex() {
  // 256k tokens, suffixes of 3 to 8: ~15 MB.
  return std::make_shared<SuffixIndex>(
      SuffixIndexOptions{.max_tokens = 1 << 18, .min_n = 3, .max_n = 8});
}

std::unique_ptr<DraftProposer> MakeDraftProposer(const SpeculativeOptions& options) {
  switch (options.method) {
    case SpeculativeMethod::kNgram:
      return std::make_unique<NgramDraftProposer>();
    case SpeculativeMethod::kSuffix:
      return std::make_unique<SuffixDraftProposer>(
          options.suffix_index != nullptr ? options.suffix_index : MakeSuffixIndex());
    case SpeculativeMethod::kOff:
      break;
  }
  return nullptr;
}

}  // namespace pagoda
