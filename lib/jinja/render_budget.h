// What one render may spend (RenderLimits) and what it has spent so far. Internal to
// pagoda_jinja; users set RenderLimits through Template (template.h).
#ifndef PAGODA_LIB_JINJA_RENDER_BUDGET_H_
#define PAGODA_LIB_JINJA_RENDER_BUDGET_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pagoda::jinja {

// What one render may spend. A template from a model file and a context from a request are
// both untrusted: exceeding any bound is RESOURCE_EXHAUSTED, never a crash or a hang.
struct RenderLimits {
  int64_t max_output_bytes = 16 << 20;   // also bounds any one string or list built
  int64_t max_steps = 1'000'000;         // loop iterations, calls, filters, elements built
  int64_t max_copied_bytes = 256 << 20;  // bytes copied into new strings (concatenation, ...)
  int max_call_depth = 200;              // nested macro calls and nested evaluation
};

// The spending of one render against its RenderLimits. Once a charge fails the render is
// over: the totals stay past the limit and every later charge fails too. Not thread-safe; one
// per render.
class RenderBudget {
 public:
  explicit RenderBudget(const RenderLimits& limits) : limits_(limits) {}
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  // Spends `steps`, or `bytes` of copying; RESOURCE_EXHAUSTED past the limit.
  absl::Status Charge(int64_t steps);
  absl::Status ChargeBytes(int64_t bytes);
  // RESOURCE_EXHAUSTED if a string or list of `size` would pass the output bound.
  absl::Status CheckSize(int64_t size) const;

  // One level of nesting (a statement, an expression, a macro call) for as long as it lives.
  class DepthGuard {
   public:
    explicit DepthGuard(RenderBudget& budget) : budget_(budget) { ++budget_.depth_; }
    ~DepthGuard() { --budget_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    RenderBudget& budget_;
  };
  // RESOURCE_EXHAUSTED "line <line>: <what> deeper than <max_call_depth>" when the levels
  // entered pass max_call_depth.
  absl::Status CheckDepth(int line, absl::string_view what) const;

  const RenderLimits& limits() const { return limits_; }
  int64_t steps() const { return steps_; }
  int64_t copied_bytes() const { return copied_bytes_; }
  int depth() const { return depth_; }

 private:
  const RenderLimits limits_;
  int64_t steps_ = 0;
  int64_t copied_bytes_ = 0;
  int depth_ = 0;
};

}  // namespace pagoda::jinja

#endif  // PAGODA_LIB_JINJA_RENDER_BUDGET_H_
