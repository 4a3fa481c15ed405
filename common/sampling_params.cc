#include "common/sampling_params.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace pagoda {

absl::Status SamplingParams::Validate() const {
  auto bad = [](const char* field, auto value, const char* want) {
    return absl::InvalidArgumentError(absl::StrCat(field, " = ", value, ": must be ", want));
  };
  if (!std::isfinite(temperature) || temperature < 0) {
    return bad("temperature", temperature, "finite and >= 0");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "in (0, 1]");
  if (top_k < 0) return bad("top_k", top_k, ">= 0");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", min_p, "in [0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return bad("repetition_penalty", repetition_penalty, "finite and > 0");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return bad("presence_penalty", presence_penalty, "in [-2, 2]");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty", frequency_penalty, "in [-2, 2]");
  }
  if (logprobs < 0 || logprobs > kMaxLogprobs) {
    return bad("logprobs", logprobs, absl::StrCat("in [0, ", kMaxLogprobs, "]").c_str());
  }
  return absl::OkStatus();
}

uint64_t RandomSeed() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine() >> 11;  // below 2^53: exact in every JSON client's numbers
}

}  // namespace pagoda
