// The layers a pipeline stage holds (issue 40): [begin, end) of the model's layers, 0-based,
// half-open, as `pagoda-worker --layers=A:B` names them. The first stage (begin 0) also holds
// the token embedding; the last (end = the model's num_layers) the final norm and the
// classifier. A whole model is the range [0, num_layers).
#ifndef PAGODA_COMMON_MODEL_LAYER_RANGE_H_
#define PAGODA_COMMON_MODEL_LAYER_RANGE_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pagoda {

struct LayerRange {
  int begin = 0;
  int end = 0;

  int size() const { return end - begin; }
  bool first() const { return begin == 0; }
  bool last(int num_layers) const { return end == num_layers; }
  bool whole(int num_layers) const { return first() && last(num_layers); }
  // "A:B".
  std::string ToString() const;
  bool operator==(const LayerRange&) const = default;
};

// Parses "A:B" (decimal, A < B). INVALID_ARGUMENT naming `text` otherwise. It does not know
// the model: CheckLayerRange does that.
absl::StatusOr<LayerRange> ParseLayerRange(std::string_view text);

// INVALID_ARGUMENT unless 0 <= begin < end <= num_layers, naming the model's layers.
absl::Status CheckLayerRange(const LayerRange& range, int num_layers);

}  // namespace pagoda

#endif  // PAGODA_COMMON_MODEL_LAYER_RANGE_H_
