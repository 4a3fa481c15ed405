// The router's checks of a worker's answer to a step, the mirror of the worker's
// WorkerEngine::Validate (which checks the router's command): a StepResult comes off the wire,
// so anything in it that the command did not ask for means the worker is broken, and the
// Engine stops there rather than feed it to the Scheduler (whose Postprocess CHECKs the shape).
// Pure functions: no state.
#ifndef PAGODA_ROUTER_CORE_STEP_CHECK_H_
#define PAGODA_ROUTER_CORE_STEP_CHECK_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "common/step.h"
#include "router/core/sequence.h"

namespace pagoda {

// OK when `result` answers `command` as a worker of a model with `vocab_size` tokens and
// `dim`-wide embeddings must:
//   - the same step id, and a finite, non-negative forward time;
//   - exactly the samples asked for, in scheduling order: one per sampling sequence, and with a
//     draft the draft tokens the worker kept followed by the first token that differs (or the
//     one after the whole draft), never a sample past a token that did not match nor a missing
//     one after a token that did;
//   - token ids in [0, vocab_size), finite log probabilities, no more top alternatives than
//     the sequence asked for, no stop id before its min_tokens;
//   - prompt log probabilities exactly for the chunks that asked, one row per position before
//     the prompt's last, ranks in [1, vocab_size]; an embedding of `dim` finite values for each
//     embedding sequence whose prompt the step completed, and nothing unrequested.
// INTERNAL naming the step and what was wrong otherwise. `sequence_of` finds a scheduled
// sequence by id (null once aborted: such a sequence is checked for shape only).
absl::Status CheckStepResult(const StepCommand& command, const StepResult& result, int vocab_size,
                             int dim, const std::function<const Sequence*(int64_t)>& sequence_of);

}  // namespace pagoda

#endif  // PAGODA_ROUTER_CORE_STEP_CHECK_H_
