// Pipeline stages waiting for their group (issue 40), for one model. A stage is a worker whose
// Hello holds a range of the model's layers; it waits here until waiting stages of the model
// tile every layer, and those stages then leave together as one group (StageGroup), which the
// router serves as one worker. Until then Missing() says which layers no waiting stage holds,
// for the log. Thread-safe.
#ifndef PAGODA_ROUTER_CORE_STAGE_ASSEMBLER_H_
#define PAGODA_ROUTER_CORE_STAGE_ASSEMBLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/executor.h"

namespace pagoda {

class StageAssembler {
 public:
  explicit StageAssembler(int num_layers) : num_layers_(num_layers) {}

  // `stage` (its info()'s layer range within the model's) joins. Returns the stages of a group
  // that now tiles the model, in layer order, taken out of those waiting (`stage` among them);
  // empty while layers are missing.
  std::vector<std::shared_ptr<Executor>> Join(std::shared_ptr<Executor> stage)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A waiting stage left (its stream ended); no-op for one not waiting.
  void Leave(const Executor* stage) ABSL_LOCKS_EXCLUDED(mu_);
  // The ranges of layers no waiting stage holds, as "2:5, 7:8"; "" when none is missing.
  std::string Missing() const ABSL_LOCKS_EXCLUDED(mu_);
  // How many layers no waiting stage holds; 0 while no stage waits (nothing is missing then).
  int NumMissing() const ABSL_LOCKS_EXCLUDED(mu_);
  int num_waiting() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Indices into waiting_ of stages whose ranges run from `from` to the last layer, in order
  // (the earliest joined first); empty when there are none.
  std::vector<size_t> ChainFrom(int from) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Per layer, whether a waiting stage holds it.
  std::vector<bool> Held() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int num_layers_;
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Executor>> waiting_ ABSL_GUARDED_BY(mu_);  // in joining order
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STAGE_ASSEMBLER_H_
