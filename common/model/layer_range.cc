#include "common/model/layer_range.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pagoda {

std::string LayerRange::ToString() const { return absl::StrCat(begin, ":", end); }

absl::StatusOr<LayerRange> ParseLayerRange(std::string_view text) {
  const size_t colon = text.find(':');
  LayerRange r;
  if (colon == std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(text.data(), colon), &r.begin) ||
      !absl::SimpleAtoi(absl::string_view(text.data() + colon + 1, text.size() - colon - 1),
                        &r.end) ||
      r.begin < 0 || r.begin >= r.end) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers \"", absl::string_view(text.data(), text.size()),
                     "\" must be A:B, 0 <= A < B: layers A to B-1 (0-based, half-open)"));
  }
  return r;
}

absl::Status CheckLayerRange(const LayerRange& range, int num_layers) {
  if (range.begin < 0 || range.begin >= range.end || range.end > num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layers ", range.ToString(),
                                                   " are not within the model's ", num_layers,
                                                   " layers (0:", num_layers, ")"));
  }
  return absl::OkStatus();
}

}  // namespace pagoda
