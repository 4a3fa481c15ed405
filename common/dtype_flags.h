// Flags that choose a dtype of common/dtype_names.h: "auto" (the reader's default) or a name.
// One parser for every binary, so the router refuses a --worker-*-dtype its workers would.
#ifndef PAGODA_COMMON_DTYPE_FLAGS_H_
#define PAGODA_COMMON_DTYPE_FLAGS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dtype_names.h"

namespace pagoda {

// `value` of flag --`flag` (e.g. "weight-dtype"): nullopt for "auto", else the dtype it names.
// INVALID_ARGUMENT "--weight-dtype=VALUE: expected auto, f32, bf16, int8 or int4" otherwise.
absl::StatusOr<std::optional<WeightDtype>> ParseWeightDtypeFlag(absl::string_view flag,
                                                                absl::string_view value);
absl::StatusOr<std::optional<KvDtype>> ParseKvDtypeFlag(absl::string_view flag,
                                                        absl::string_view value);

// A compute dtype flag's value: "auto" is one of its values (ComputeDtype::kAuto), not the
// reader's default. INVALID_ARGUMENT "--compute-dtype=VALUE: expected auto, f32 or bf16".
absl::StatusOr<ComputeDtype> ParseComputeDtypeFlag(absl::string_view flag, absl::string_view value);

// What such a flag accepts, for help texts: "auto, f32, bf16, int8 or int4",
// "auto, f32, bf16, f16 or int8".
std::string WeightDtypeChoices();
std::string KvDtypeChoices();
std::string ComputeDtypeChoices();  // "auto, f32 or bf16"

}  // namespace pagoda

#endif  // PAGODA_COMMON_DTYPE_FLAGS_H_
