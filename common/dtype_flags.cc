#include "common/dtype_flags.h"

#include <span>

#include "absl/strings/str_cat.h"

namespace pagoda {
namespace {

constexpr WeightDtype kWeightDtypes[] = {WeightDtype::kF32, WeightDtype::kBf16, WeightDtype::kInt8,
                                         WeightDtype::kInt4};
constexpr KvDtype kKvDtypes[] = {KvDtype::kF32, KvDtype::kBf16, KvDtype::kF16, KvDtype::kInt8};
// Without kAuto: Choices and Parse name "auto" themselves.
constexpr ComputeDtype kComputeDtypes[] = {ComputeDtype::kF32, ComputeDtype::kBf16};

// "auto, " then the names, the last after "or".
template <typename Dtype>
std::string Choices(std::span<const Dtype> dtypes, const char* (*name)(Dtype)) {
  std::string out = "auto";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    absl::StrAppend(&out, i + 1 < dtypes.size() ? ", " : " or ", name(dtypes[i]));
  }
  return out;
}

template <typename Dtype>
absl::StatusOr<std::optional<Dtype>> Parse(absl::string_view flag, absl::string_view value,
                                           std::span<const Dtype> dtypes,
                                           const char* (*name)(Dtype)) {
  if (value == "auto") return std::nullopt;
  for (const Dtype d : dtypes) {
    if (value == name(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": expected ", Choices(dtypes, name)));
}

}  // namespace

absl::StatusOr<std::optional<WeightDtype>> ParseWeightDtypeFlag(absl::string_view flag,
                                                                absl::string_view value) {
  return Parse<WeightDtype>(flag, value, kWeightDtypes, WeightDtypeName);
}

absl::StatusOr<std::optional<KvDtype>> ParseKvDtypeFlag(absl::string_view flag,
                                                        absl::string_view value) {
  return Parse<KvDtype>(flag, value, kKvDtypes, KvDtypeName);
}

absl::StatusOr<ComputeDtype> ParseComputeDtypeFlag(absl::string_view flag,
                                                   absl::string_view value) {
  absl::StatusOr<std::optional<ComputeDtype>> parsed =
      Parse<ComputeDtype>(flag, value, kComputeDtypes, ComputeDtypeName);
  if (!parsed.ok()) return parsed.status();
  return parsed->value_or(ComputeDtype::kAuto);
}

std::string WeightDtypeChoices() { return Choices<WeightDtype>(kWeightDtypes, WeightDtypeName); }
std::string KvDtypeChoices() { return Choices<KvDtype>(kKvDtypes, KvDtypeName); }
std::string ComputeDtypeChoices() {
  return Choices<ComputeDtype>(kComputeDtypes, ComputeDtypeName);
}

}  // namespace pagoda
