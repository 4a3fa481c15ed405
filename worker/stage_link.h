// How a pipeline stage's residual stream reaches the next stage (issue 40). WorkerEngine calls
// its link at two named points of a step that computes tokens: before its first layer, a stage
// that does not hold the model's first layer receives the stage before's stream; after its
// last layer, a stage that does not hold the model's last layer sends its own on. What crosses
// is (rows, dim) floats, exactly as the next layer reads them. The router sends every stage
// the same StepCommand; only the last samples.
#ifndef PAGODA_WORKER_STAGE_LINK_H_
#define PAGODA_WORKER_STAGE_LINK_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace pagoda {

class StageLink {
 public:
  virtual ~StageLink() = default;
  // Fills `out` with the previous stage's residual stream of step `step_id`, waiting for it
  // (bounded). An error fails the step: the router fails the group over.
  virtual absl::Status Receive(int64_t step_id, std::span<float> out) = 0;
  // Hands this stage's residual stream of step `step_id` to the next stage.
  virtual absl::Status Send(int64_t step_id, std::span<const float> hidden) = 0;
  // A new router connection (WorkerEngine::Reset): what arrived for the old one's steps is
  // dropped, and so is the way to the next stage until the new router wires the group again.
  virtual void Reset() {}
  // The router's call ended while a step may be waiting in Receive: that Receive returns
  // CANCELLED now rather than at its timeout, so the stage can join its group again at once.
  // Thread-safe (the connection's heartbeat thread calls it while a step runs).
  virtual void Interrupt() {}
};

}  // namespace pagoda

#endif  // PAGODA_WORKER_STAGE_LINK_H_
