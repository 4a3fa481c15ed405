#include "lib/jinja/render_budget.h"

#include "absl/strings/str_cat.h"

namespace pagoda::jinja {

absl::Status RenderBudget::Charge(int64_t steps) {
  steps_ += steps;
  if (steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        absl::StrCat("template exceeded its limit of ", limits_.max_steps,
                     " steps (loop iterations, calls, filters, elements built)"));
  }
  return absl::OkStatus();
}

absl::Status RenderBudget::ChargeBytes(int64_t bytes) {
  copied_bytes_ += bytes;
  if (copied_bytes_ > limits_.max_copied_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "template exceeded its limit of ", limits_.max_copied_bytes, " bytes copied into strings"));
  }
  return absl::OkStatus();
}

absl::Status RenderBudget::CheckSize(int64_t size) const {
  if (size > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("template built a value of ", size,
                                                     " bytes, over the limit of ",
                                                     limits_.max_output_bytes));
  }
  return absl::OkStatus();
}

absl::Status RenderBudget::CheckDepth(int line, absl::string_view what) const {
  if (depth_ > limits_.max_call_depth) {
    return absl::ResourceExhaustedError(
        absl::StrCat("line ", line, ": ", what, " deeper than ", limits_.max_call_depth));
  }
  return absl::OkStatus();
}

}  // namespace pagoda::jinja
