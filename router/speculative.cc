#include "router/speculative.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

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

// Prompt lookup (TEMPORARY until router/spec lands).
class NgramDraftProposer : public DraftProposer {
 public:
  int Propose(std::span<const int> tokens, int k, std::vector<int>* draft) override {
    const int len = static_cast<int>(tokens.size());
    for (int n = std::min(3, len - 1); n >= 1; --n) {
      const std::span<const int> tail = tokens.last(n);
      for (int start = len - n - 1; start >= 0; --start) {
        if (!std::equal(tail.begin(), tail.end(), tokens.begin() + start)) continue;
        const int from = start + n, got = std::min(k, len - from);
        draft->insert(draft->end(), tokens.begin() + from, tokens.begin() + from + got);
        return got;
      }
    }
    return 0;
  }
};

}  // namespace

std::unique_ptr<DraftProposer> MakeDraftProposer(const SpeculativeOptions& options) {
  if (options.method == SpeculativeMethod::kOff || options.num_speculative_tokens <= 0) {
    return nullptr;
  }
  return std::make_unique<NgramDraftProposer>();
}

}  // namespace pagoda
