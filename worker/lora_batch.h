// The rows of one step grouped by LoRA adapter (LlamaModel's ForwardBatch::loras): sequences are
// added in scheduling order, each adapter's rows kept ascending. Reused step after step, so a
// step allocates only when it outgrows the last one; a step with no adapter adds nothing and
// gives an empty span (the base model's path, untouched). Not thread-safe.
#ifndef PAGODA_WORKER_LORA_BATCH_H_
#define PAGODA_WORKER_LORA_BATCH_H_

#include <span>
#include <vector>

#include "worker/llama_model.h"
#include "worker/packed_lora.h"

namespace pagoda {

class LoraBatch {
 public:
  void Clear() {
    for (Group& g : groups_) g.rows.clear();
    num_groups_ = 0;
    spans_.clear();
  }
  // Rows [first_row, first_row + n) run through `lora` (Not owned; outlives the step).
  void Add(const PackedLora* lora, int first_row, int n) {
    int g = 0;
    while (g < num_groups_ && groups_[g].lora != lora) ++g;
    if (g == num_groups_) {
      if (num_groups_ == static_cast<int>(groups_.size())) groups_.emplace_back();
      groups_[num_groups_++].lora = lora;
    }
    for (int i = 0; i < n; ++i) groups_[g].rows.push_back(first_row + i);
  }
  // Valid until the next Clear or Add.
  std::span<const LoraRows> rows() {
    spans_.clear();
    for (int g = 0; g < num_groups_; ++g) spans_.push_back({groups_[g].lora, groups_[g].rows});
    return spans_;
  }

 private:
  struct Group {
    const PackedLora* lora = nullptr;
    std::vector<int> rows;
  };
  std::vector<Group> groups_;  // the first num_groups_ in use this step
  int num_groups_ = 0;
  std::vector<LoraRows> spans_;
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_LORA_BATCH_H_
